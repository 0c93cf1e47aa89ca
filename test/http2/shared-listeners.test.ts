/**
 * A healthy call's stream listeners are module-level functions shared by every stream (each finds
 * its call's state on the stream), not closures made per call: ten closures and their context a
 * call were most of Http2Client's extra CPU over raw node:http2 (issue 14's connections bench read
 * 0.967 guarded/raw before, 0.997 and 1.035 after). Counted, not timed.
 */
import http2 from 'node:http2';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();
const EVENTS = ['headers', 'response', 'trailers', 'data', 'end', 'error', 'close'] as const;

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every stream the client opens, seen through `http2.connect`'s sessions. */
function watchStreams(): http2.ClientHttp2Stream[] {
  const streams: http2.ClientHttp2Stream[] = [];
  const connect = http2.connect.bind(http2);
  vi.spyOn(http2, 'connect').mockImplementation(((...args: Parameters<typeof http2.connect>) => {
    const session = connect(...args);
    const request = session.request.bind(session);
    session.request = ((...r: Parameters<typeof session.request>) => {
      const stream = request(...r);
      streams.push(stream);
      return stream;
    }) as typeof session.request;
    return session;
  }) as typeof http2.connect);
  return streams;
}

describe('Http2Client: one set of stream listeners for every call', () => {
  it('two calls\' streams carry the very same listener functions, one of each', async () => {
    await using peer = await http2Peer();
    const streams = watchStreams();
    const c = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => c.close());
    // Listeners read while each call is in flight: node:http2 removes some once a stream closes.
    const seen: Array<Record<string, Function[]>> = [];
    for (let i = 0; i < 3; i++) {
      const call = c.request(`${peer.origin}/`);
      await vi.waitFor(() => expect(streams.length).toBe(i + 1), { timeout: 2_000, interval: 1 });
      const s = streams[i]!;
      seen.push(Object.fromEntries(EVENTS.map((e) => [e, s.listeners(e) as Function[]])));
      expect((await call).status).toBe(200);
    }
    expect(peer.attempts).toBe(1);
    for (const e of EVENTS) {
      // The client's own listener is the last one added for each event (node:http2 adds some first).
      const mine = seen.map((l) => l[e]!.at(-1));
      expect(mine[0], e).toBeTypeOf('function');
      expect(mine[1], e).toBe(mine[0]);
      expect(mine[2], e).toBe(mine[0]);
    }
  });

  it('with a signal and a timeout too', async () => {
    await using peer = await http2Peer();
    const streams = watchStreams();
    const c = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => c.close());
    const controller = new AbortController();
    const listeners: Function[] = [];
    for (let i = 0; i < 2; i++) {
      const call = c.request(`${peer.origin}/`, { signal: controller.signal, timeout: 10_000 });
      await vi.waitFor(() => expect(streams.length).toBe(i + 1), { timeout: 2_000, interval: 1 });
      listeners.push(streams[i]!.listeners('data').at(-1) as Function);
      expect((await call).status).toBe(200);
    }
    expect(listeners[1]).toBe(listeners[0]);
  });
});
