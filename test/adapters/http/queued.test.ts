/**
 * Requests waiting in a guarded agent's queue (every `maxSockets` slot taken, dials in flight
 * among them). A guarded dial holds its slot to its own bounded end even when its request left
 * (rule 7), where Node's agent frees the slot at once; so a queued request that gave up (an abort
 * signal, got's timeout, `destroy()`) waited for that dial, was then dialled for, and failed
 * seconds later with the dial's error instead of its own. It now leaves the queue at once with
 * its own error and is never dialled for. And a request `timeout` above 2^31-1 ms, which Node
 * holds at that, fired after 1 ms during the dial.
 */
import http from 'node:http';
import got from 'got';
import { describe, expect, it } from 'vitest';
import { blackhole } from '../../../src/testing/blackhole.js';
import { countingServer, guardedHttp, leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** Requests through `agent` to `url`, each aborted by its own signal at `abortAfter` ms: how and when each failed. */
async function aborted(url: string, agent: http.Agent, count: number, abortAfter: number): Promise<Array<{ code: unknown; ms: number }>> {
  const t0 = performance.now();
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<{ code: unknown; ms: number }>((resolve) => {
          const req = http.get(url, { agent, signal: AbortSignal.timeout(abortAfter) }, (res) => {
            res.resume();
            resolve({ code: 'response', ms: performance.now() - t0 });
          });
          req.on('error', (e: NodeJS.ErrnoException) => resolve({ code: e.code, ms: performance.now() - t0 }));
        }),
    ),
  );
}

describe('GuardedHttpAgent: requests that give up while queued', () => {
  it('6 requests aborted at 100 ms behind 2 slots dialling a blackhole all fail by then with their own ABORT_ERR; nothing is dialled for the queued 4', async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const agent = guardedHttp({ maxSockets: 2, connectTimeout: 2_000 });
    const results = await aborted(`http://127.0.0.1:${hole.port}/`, agent, 6, 100);
    for (const r of results) expect(r.code).toBe('ABORT_ERR'); // the queued 4 were DIALGUARD_CONNECT_TIMEOUT
    expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(1_000); // was 2.5 to 7.5 s
    expect(agent.requests).toEqual({});
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(hole.attempts).toBe(1); // the scout; the second slot waited on it. Was: 3 more dials, one per queued request
  });

  it("got's request timeout: 3 requests behind one slot time out at 100 ms, not one per connect timeout", async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const agent = guardedHttp({ maxSockets: 1, connectTimeout: 1_500 });
    const t0 = performance.now();
    const codes = await Promise.all(
      Array.from({ length: 3 }, () =>
        got(`http://127.0.0.1:${hole.port}/`, { agent: { http: agent }, timeout: { request: 100 }, retry: { limit: 0 } }).then(
          () => 'response',
          (e: { code?: string }) => e.code,
        ),
      ),
    );
    expect(codes).toEqual(['ETIMEDOUT', 'ETIMEDOUT', 'ETIMEDOUT']);
    expect(performance.now() - t0).toBeLessThan(1_000); // was 1.5 s and 3 s for the queued two
  });

  it('behind a busy socket (no dial in flight) a destroyed queued request fails as with Node\'s agent, when the slot frees: "socket hang up", once; the one behind it is served, and the server never sees the destroyed one', async () => {
    let release: () => void = () => {};
    const server = await countingServer({
      handler: (req, res) => {
        req.resume();
        if (req.url === '/slow') release = () => res.end('slow');
        else res.end('ok');
      },
    });
    cleanups.push(() => server.close());
    const agent = guardedHttp({ maxSockets: 1, keepAlive: true });
    const body = (path: string): Promise<string> =>
      new Promise((resolve, reject) => {
        http
          .get(`${server.origin}${path}`, { agent }, (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => resolve(text));
          })
          .on('error', reject);
      });
    const slow = body('/slow');
    await new Promise((resolve) => setTimeout(resolve, 50)); // the slot is taken
    const gone = http.get(`${server.origin}/gone`, { agent });
    const goneErrors: NodeJS.ErrnoException[] = [];
    let closes = 0;
    gone.on('error', (e: NodeJS.ErrnoException) => goneErrors.push(e));
    gone.on('close', () => closes++);
    const behind = body('/behind');
    gone.destroy();
    release();
    expect(await slow).toBe('slow');
    expect(await behind).toBe('ok');
    expect({ requests: server.requests, connections: server.connections }).toEqual({ requests: 2, connections: 1 });
    expect(goneErrors).toMatchObject([{ code: 'ECONNRESET', message: 'socket hang up' }]);
    expect(closes).toBe(1);
  });

  it("a request timeout above 2^31-1 ms is held there during the dial, as Node holds it: no 'timeout' after 1 ms", async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const agent = guardedHttp({ connectTimeout: 1_000 });
    const what = await new Promise<string>((resolve) => {
      const req = http.get(`http://127.0.0.1:${hole.port}/`, { agent, timeout: 2 ** 31 });
      req.on('timeout', () => resolve('timeout'));
      req.on('error', () => resolve('error'));
      setTimeout(() => {
        resolve('still waiting');
        req.destroy();
      }, 150);
    });
    expect(what).toBe('still waiting'); // was 'timeout' after 1-3 ms
  });

  it("a queued request Node dials for when a socket closes, destroyed during that dial: one error, one close, and no wrapper left on it", async () => {
    const server = await countingServer({ handler: (req) => req.resume() }); // never answers: A holds the slot
    cleanups.push(() => server.close());
    const agent = guardedHttp({ maxSockets: 1, keepAlive: true, connectTimeout: 2_000 });
    const first = http.get(`${server.origin}/a`, { agent });
    first.on('error', () => {});
    await new Promise((resolve) => first.once('socket', resolve));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // B queues behind A; when A's socket closes, Node's removeSocket dials for B (B stays queued).
    const b = http.get(`${server.origin}/b`, { agent });
    const events: string[] = [];
    b.on('error', (e: NodeJS.ErrnoException) => events.push(`error ${e.code}`));
    b.on('close', () => events.push('close'));
    // A's socket closes: Node's removeSocket starts a guarded dial for B (B still queued), and B
    // gives up while that dial runs.
    first.socket!.once('close', () => b.destroy());
    first.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(events).toEqual(['error ECONNRESET', 'close']); // was: error and close twice
    expect(Object.getOwnPropertyDescriptor(b, 'destroy')).toBeUndefined(); // no wrapper left behind
  });
});
