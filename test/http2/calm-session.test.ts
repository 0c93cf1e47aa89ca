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

/** An h2c server answering `/upload` 413 without reading it and everything else 200; counts sessions. */
async function earlyAnswering(): Promise<{ origin: string; sessions: () => number }> {
  let sessions = 0;
  const server = http2.createServer();
  server.on('session', (s) => {
    sessions++;
    s.on('error', () => {});
  });
  server.on('stream', (s, h) => {
    s.on('error', () => {});
    s.respond({ ':status': h[':path'] === '/upload' ? 413 : 200 });
    s.end('resp');
  });
  const port = await listenH2(server, cleanup);
  return { origin: `http://127.0.0.1:${port}`, sessions: () => sessions };
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
    // The first may still fail on the refusing session (it is what shows the refusal); the rest are served.
    expect(outcomes.slice(1)).toEqual([200, 200, 200, 200]);
    expect(sessions()).toBeGreaterThanOrEqual(2);
    expect(sessions()).toBeLessThanOrEqual(3);
  });
});
