/**
 * Http2Client safety against real loopback peers (issue 12): only a response the server sent
 * resolves; a status or reset the server sent after GOAWAY is final; one deadline for the whole
 * call; never a request on a session that received GOAWAY, and a stream GOAWAY excluded goes to
 * the new session whatever its method.
 */
import { getEventListeners } from 'node:events';
import http2 from 'node:http2';
import type net from 'node:net';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { RequestTimeoutError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client, type Http2ClientOptions } from '../../src/http2/client.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();
const { NGHTTP2_NO_ERROR, NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR } = http2.constants;

function client(options: Http2ClientOptions = {}): Http2Client {
  const c = new Http2Client({ connectTimeout: 1_000, breaker: new HostBreaker(), ...options });
  cleanup.push(() => c.close());
  return c;
}

describe('Http2Client: a response that never arrived never resolves (defect 3)', () => {
  it.each([
    ['NO_ERROR', NGHTTP2_NO_ERROR],
    ['CANCEL', NGHTTP2_CANCEL],
  ])('an RST_STREAM %s before any response headers rejects with a stream error carrying the code, never a status-0 success', async (name, code) => {
    await using peer = await http2Peer();
    const c = client();
    await c.request(`${peer.origin}/`);
    peer.rstStreams(code);
    const err = await c.request(`${peer.origin}/`).then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: code });
    expect(classify(err)).toMatchObject({ kind: 'stream', code: name, notSent: false });
    expect(c.stats()).toMatchObject({ connections: 1, gone: 0, turns: 0 });
    expect(peer.streams).toBe(2);
  });
});

describe('Http2Client: an answer the server sent after GOAWAY is final (defect 1)', () => {
  it('an idempotent GET reset by the server after its GOAWAY gets the reset, and is not sent again', async () => {
    await using peer = await http2Peer({
      handler: (stream) => {
        stream.session!.goaway(NGHTTP2_NO_ERROR); // last stream: this one, so it was processed
        setTimeout(() => {
          if (!stream.closed) stream.close(NGHTTP2_INTERNAL_ERROR);
        }, 20);
      },
    });
    const c = client();
    const err = await c.request(`${peer.origin}/item`).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR' });
    expect(classify(err).code).toBe('INTERNAL_ERROR');
    expect(peer.streams).toBe(1);
    expect(c.stats().turns).toBe(0);
  });
});

describe('Http2Client: one deadline for the whole call (defect 2)', () => {
  it('a 300 ms timeout against a peer that retires the session on every stream ends in about 300 ms, after at most 2 streams', async () => {
    // Every stream: 200 ms later, GOAWAY and the stream refused (never processed: safe to resend).
    const timers = new Set<ReturnType<typeof setTimeout>>();
    cleanup.push(() => timers.forEach(clearTimeout));
    await using peer = await http2Peer({
      handler: (stream) => {
        const t = setTimeout(() => {
          timers.delete(t);
          const session = stream.session;
          if (session === undefined || session.destroyed || stream.closed) return;
          session.goaway(NGHTTP2_NO_ERROR);
          stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        }, 200);
        timers.add(t);
      },
    });
    const c = client();
    const started = performance.now();
    const err = await c.request(`${peer.origin}/`, { timeout: 300 }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(err).toBeInstanceOf(RequestTimeoutError);
    expect(peer.streams).toBeLessThanOrEqual(2); // a fresh 300 ms per turn saw 4
    expect(elapsed).toBeLessThan(700); // a fresh 300 ms per turn took ~1 000
  });

  it('the wait for a session spends the same deadline', async () => {
    const c = client({ connectTimeout: 5_000 });
    const { acceptAndHold } = await import('../../src/testing/tcp-peers.js');
    await using held = await acceptAndHold();
    const started = performance.now();
    const err = await c.request(`http://${held.address}/`, { timeout: 150 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestTimeoutError);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('Http2Client: the deadline and the caller signal together', () => {
  it("with a timeout set, the caller's abort still wins with its own reason, and no listener is left on its signal", async () => {
    await using peer = await http2Peer({
      handler: (stream, headers) => {
        if (headers[':path'] === '/slow') return; // never answered
        stream.respond({ ':status': 200 });
        stream.end('ok');
      },
    });
    const c = client();
    await c.request(`${peer.origin}/warm`, { timeout: 10_000 });
    const before = peer.streams;
    const gone = new AbortController();
    gone.abort(new Error('left before it began'));
    await expect(c.request(`${peer.origin}/`, { timeout: 1_000, signal: gone.signal })).rejects.toThrow('left before it began');
    expect(peer.streams).toBe(before); // never sent

    const caller = new AbortController();
    const p = c.request(`${peer.origin}/slow`, { timeout: 10_000, signal: caller.signal });
    setTimeout(() => caller.abort(new Error('user navigated away')), 50);
    await expect(p).rejects.toThrow('user navigated away');
    expect(getEventListeners(caller.signal, 'abort')).toHaveLength(0);
    expect(c.stats()).toMatchObject({ connections: 1, gone: 0, leases: 0 });
  });
});

describe('Http2Client: never a request on a session that received GOAWAY (defect 11)', () => {
  it.each([
    ['NO_ERROR', NGHTTP2_NO_ERROR],
    ['INTERNAL_ERROR', NGHTTP2_INTERNAL_ERROR],
  ])('a POST sent right after a GOAWAY %s goes to the new session, 10 rounds, each stream seen once', async (_name, code) => {
    await using peer = await http2Peer();
    const c = client();
    const served: number[] = [];
    for (let round = 0; round < 10; round++) {
      const warm = await c.request(`${peer.origin}/warm`);
      peer.goaway(code); // and the peer keeps serving new sessions
      const post = await c.request(`${peer.origin}/submit`, { method: 'POST', body: `round ${round}` });
      expect(post.status).toBe(200);
      expect(post.connectionId).toBeGreaterThan(warm.connectionId);
      served.push(post.status);
    }
    expect(served).toHaveLength(10);
    expect(peer.streams).toBe(20); // one GET and one POST a round: the excluded POST was never processed
    expect(peer.sessions).toBe(11);
  });

  it('with no turn left and no retries, a POST the GOAWAY excluded rejects as not sent, so a retry loop may send it again', async () => {
    await using peer = await http2Peer();
    const c = client({ retiredRetries: 0, retry: false });
    await c.request(`${peer.origin}/warm`);
    const before = peer.streams;
    peer.goaway(NGHTTP2_INTERNAL_ERROR);
    const err = await c.request(`${peer.origin}/submit`, { method: 'POST', body: 'x' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_HTTP2_GOAWAY_SESSION' });
    expect(classify(err)).toMatchObject({ notSent: true });
    expect(peer.streams).toBe(before); // the server never processed it
  });

  it('with no turn left, a POST the GOAWAY excluded goes again after the retry wait, any method, and is processed once', async () => {
    await using peer = await http2Peer();
    const c = client({ retiredRetries: 0, retry: { backoff: () => 10 } });
    await c.request(`${peer.origin}/warm`);
    const before = peer.streams;
    peer.goaway(NGHTTP2_INTERNAL_ERROR);
    const res = await c.request(`${peer.origin}/submit`, { method: 'POST', body: 'x' });
    expect(res.status).toBe(200);
    expect(peer.streams).toBe(before + 1);
  });
});

describe('Http2Client: a signal shared by many calls', () => {
  it('10 calls in flight on one signal, no timeout: one listener each on it (as node:http2), no MaxListenersExceededWarning, and its abort ends them all', async () => {
    await using peer = await http2Peer({ handler: () => {} }); // never answers
    const c = client();
    await c.request(`${peer.origin}/`, { timeout: 50 }).catch(() => undefined); // the session is up
    const controller = new AbortController();
    const { signal } = controller;
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const calls = Array.from({ length: 10 }, () => c.request(`${peer.origin}/`, { signal }).then(
        () => 'answered',
        (err: unknown) => err,
      ));
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(getEventListeners(signal, 'abort')).toHaveLength(10); // was 20: the pool's and the stream's
      const reason = new Error('the caller gave up');
      controller.abort(reason);
      expect(await Promise.all(calls)).toEqual(Array(10).fill(reason));
      await new Promise<void>((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => w.name)).toEqual([]);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('Http2Client: a body node:http2 cannot write', () => {
  it('is a TypeError before any stream opens, so a server allowing few streams still serves the next request', async () => {
    // Five concurrent streams, as nginx or envoy may allow: each bad call used to leave one open.
    const server = http2.createServer({ settings: { maxConcurrentStreams: 5 } });
    let streams = 0;
    server.on('stream', (stream) => {
      streams++;
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const origin = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const c = new Http2Client({ breaker: new HostBreaker(), requestTimeout: 3_000, closeTimeout: 100 });
    cleanup.push(() => c.close());
    const bad: unknown[] = [Readable.from(['x']), new ArrayBuffer(4), new Blob(['x']), 42, { data: 'x' }, null];
    for (const body of bad) {
      const err = await c.request(`${origin}/`, { method: 'POST', body: body as string }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TypeError);
      expect(err).toMatchObject({ code: 'ERR_INVALID_ARG_TYPE', message: expect.stringMatching(/^body must be a string or a Uint8Array/) });
    }
    expect(streams).toBe(0); // was 6 requests sent, each stream left open; the seventh call hung
    expect((await c.request(`${origin}/`)).body.toString()).toBe('ok');
    expect((await c.request(`${origin}/`, { method: 'POST', body: new Uint8Array([1, 2]) })).status).toBe(200);
  });
});
