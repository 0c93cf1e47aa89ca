/**
 * A session that answers every new stream with RST_STREAM(ENHANCE_YOUR_CALM) is replaced (found
 * by an outside review). node:http2 caps the memory one session may hold (`maxSessionMemory`,
 * 10 MB): a big upload the server answers early (413 without reading it) leaves the client's
 * session over its cap, and from then on that session refuses every stream with
 * ENHANCE_YOUR_CALM, for good, while the server still runs each request and PINGs still pass.
 * Http2Client kept the session ("a reset retires nothing"): 50 of 50 requests over the next
 * 10 s failed, the server having run them all. A stream reset with ENHANCE_YOUR_CALM now retires
 * its session (its other streams finish; new requests get a new session). Real h2c server.
 */
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenH2 } from './listen.js';

const cleanup = leakCheckEach();

/** An h2c server on loopback whose streams go to `onStream`; counts sessions. */
async function h2cServer(onStream: (s: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders) => void): Promise<{ origin: string; sessions: () => number }> {
  let sessions = 0;
  const server = http2.createServer();
  server.on('session', (s) => {
    sessions++;
    s.on('error', () => {});
  });
  server.on('stream', (s, h) => {
    s.on('error', () => {});
    onStream(s, h);
  });
  const port = await listenH2(server, cleanup);
  return { origin: `http://127.0.0.1:${port}`, sessions: () => sessions };
}

/** An h2c server answering `/upload` 413 without reading it and everything else 200; counts sessions. */
function earlyAnswering(): Promise<{ origin: string; sessions: () => number }> {
  return h2cServer((s, h) => {
    s.respond({ ':status': h[':path'] === '/upload' ? 413 : 200 });
    s.end('resp');
  });
}

/** A 10 MB upload the server answers 413 unread, then 5 small POSTs: each POST's status, or the end of its error. */
async function uploadThenPosts(client: Http2Client, origin: string): Promise<Array<number | string>> {
  await client.request(`${origin}/upload`, { method: 'POST', body: Buffer.alloc(10 * 1024 * 1024, 1), timeout: 5_000 }).catch(() => undefined);
  const outcomes: Array<number | string> = [];
  for (let i = 0; i < 5; i++) {
    outcomes.push(await client.request(`${origin}/x`, { method: 'POST', body: 'small', timeout: 2_000 }).then((r) => r.status, (e: Error) => e.message.slice(-27)));
  }
  return outcomes;
}

describe('Http2Client: a session that refuses streams with ENHANCE_YOUR_CALM', () => {
  it('sessionOptions: { maxSessionMemory: 100 } (a user raising the cap for big uploads): the same upload, then 5 small POSTs, all on the one session (was: not an option)', async () => {
    const { origin, sessions } = await earlyAnswering();
    const client = new Http2Client({ breaker: new HostBreaker(), sessionOptions: { maxSessionMemory: 100 } });
    cleanup.push(() => client.close());
    expect(await uploadThenPosts(client, origin)).toEqual([200, 200, 200, 200, 200]);
    expect(sessions()).toBe(1);
  });

  it.each([
    [5, TypeError, /^sessionOptions must be an object/],
    [{ maxSessionMemory: 0 }, RangeError, /^sessionOptions\.maxSessionMemory must be/],
    [{ maxSessionMemory: 1.5 }, RangeError, /^sessionOptions\.maxSessionMemory must be an integer/],
    [{ maxHeaderListPairs: Number.NaN }, RangeError, /^sessionOptions\.maxHeaderListPairs/],
    [{ paddingStrategy: 9 }, RangeError, /^sessionOptions\.paddingStrategy/],
    [{ createConnection: () => null }, TypeError, /^sessionOptions: unknown option createConnection/],
  ])('sessionOptions %o is an error naming it at construction (node:http2 would coerce it silently, or it would replace the client\'s own connection)', (session, type, message) => {
    expect(() => new Http2Client({ breaker: null, sessionOptions: session as never })).toThrow(type);
    expect(() => new Http2Client({ breaker: null, sessionOptions: session as never })).toThrow(message);
  });

  it('a 10 MB upload answered 413 unread, then 5 small POSTs: each served, on a new session (was: every one ENHANCE_YOUR_CALM, run at the server all the same)', async () => {
    const { origin, sessions } = await earlyAnswering();
    const client = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => client.close());
    const outcomes = await uploadThenPosts(client, origin);
    expect(outcomes).toEqual([200, 200, 200, 200, 200]); // was: the first failed ENHANCE_YOUR_CALM, run at the server
    expect(sessions()).toBe(2);
  });
});

/**
 * An upload cut short (its timeout, the caller's abort) while flow control held most of it back:
 * node:http2 keeps the unsent bytes charged to the session's memory after the stream is reset, so
 * the session is over its cap for good (raw node:http2 alike: every later stream refused). The
 * session was retired only once a later stream was refused: a burst sent in between failed whole,
 * ENHANCE_YOUR_CALM each, every handler run at the server (an outside review: 10 of 10 GETs,
 * 10 of 10 POSTs). The cut itself now retires the session: the burst goes to a new one.
 */
describe('Http2Client: an upload cut short retires its session', () => {
  /** An h2c server that never reads `/hold` (nor answers it), and answers anything else 200 after reading it; counts runs per `x-id`. */
  async function holding(): Promise<{ origin: string; sessions: () => number; runs: Map<string, number> }> {
    const runs = new Map<string, number>();
    const server = await h2cServer((s, h) => {
      const id = String(h['x-id']);
      runs.set(id, (runs.get(id) ?? 0) + 1);
      if (h[':path'] === '/hold') return;
      s.resume();
      s.on('end', () => {
        s.respond({ ':status': 200 });
        s.end('ok');
      });
    });
    return { ...server, runs };
  }

  /** 10 concurrent requests of `method` after the cut: their statuses (or error codes and rstCodes). */
  async function burst(client: Http2Client, origin: string, method: string): Promise<Array<number | string>> {
    return Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client
          .request(`${origin}/x`, { method, body: method === 'POST' ? 'small' : undefined, headers: { 'x-id': `${method}${i}` }, timeout: 3_000 })
          .then((r) => r.status, (e: { code?: string; rstCode?: number }) => `${e.code} ${e.rstCode}`),
      ),
    );
  }

  it.each(['timeout', 'abort'] as const)('a 10 MB POST the server never reads, ended by its %s, then 10 GETs and 10 POSTs at once: all served on a new session, each run once (was: 20 of 20 ENHANCE_YOUR_CALM, each run)', async (how) => {
    const { origin, sessions, runs } = await holding();
    const client = new Http2Client({ breaker: new HostBreaker(), keepAliveInterval: 0 });
    cleanup.push(() => client.close());
    await client.request(`${origin}/x`, { headers: { 'x-id': 'warm' } });
    const ac = new AbortController();
    const cut = client.request(`${origin}/hold`, {
      method: 'POST',
      body: Buffer.alloc(10 * 1024 * 1024, 1),
      headers: { 'x-id': 'upload' },
      ...(how === 'timeout' ? { timeout: 200 } : { signal: ac.signal }),
    });
    if (how === 'abort') setTimeout(() => ac.abort(new Error('caller gave up')), 200);
    await expect(cut).rejects.toThrow(how === 'timeout' ? /200/ : 'caller gave up');
    expect(await burst(client, origin, 'GET')).toEqual(Array(10).fill(200));
    expect(await burst(client, origin, 'POST')).toEqual(Array(10).fill(200));
    expect(sessions()).toBe(2);
    for (let i = 0; i < 10; i++) {
      expect(runs.get(`GET${i}`)).toBe(1);
      expect(runs.get(`POST${i}`)).toBe(1);
    }
  });

  it('four 3 MB uploads cut one after another (none alone past the cap, 12 MB together), each followed by 5 GETs at once: all served; a new session every second cut (was: the fourth burst refused whole)', async () => {
    const { origin, sessions } = await holding();
    const client = new Http2Client({ breaker: new HostBreaker(), keepAliveInterval: 0 });
    cleanup.push(() => client.close());
    const body = Buffer.alloc(3_000_000, 1);
    const outcomes: Array<number | string> = [];
    for (let cut = 0; cut < 4; cut++) {
      await expect(client.request(`${origin}/hold`, { method: 'POST', body, timeout: 100 })).rejects.toThrow(/100/);
      outcomes.push(...(await burst(client, origin, 'GET')).slice(0, 5));
    }
    expect(outcomes).toEqual(Array(20).fill(200));
    expect(sessions()).toBe(3);
  });

  it('uploads the server reads whole (50 POSTs of 1 MB, 8 at a time) retire nothing: one session', async () => {
    const { origin, sessions } = await holding();
    const client = new Http2Client({ breaker: new HostBreaker(), keepAliveInterval: 0 });
    cleanup.push(() => client.close());
    const retired: string[] = [];
    client.on('retired', (e) => retired.push(e.reason));
    const body = Buffer.alloc(1024 * 1024, 2);
    for (let round = 0; round < 7; round++) {
      const n = round === 6 ? 2 : 8;
      const statuses = await Promise.all(Array.from({ length: n }, () => client.request(`${origin}/x`, { method: 'POST', body, timeout: 10_000 }).then((r) => r.status)));
      expect(statuses).toEqual(Array(n).fill(200));
    }
    expect(retired).toEqual([]);
    expect(sessions()).toBe(1);
  });
});
