/**
 * `maxTotalSockets` and dials whose requests gave up. A guarded dial runs on to its bound after
 * its request leaves (the breaker learns the host's state), holding its slot; under
 * `maxTotalSockets` that slot is every origin's, and requests to a live origin waited behind a
 * dead one's dials until `connectTimeout` (an outside review: 0 of 6 served, ECONNABORTED at their
 * 2 s timeout, where Node's agent, which destroys a connecting socket with its request, served
 * 6 in 13-30 ms). A given-up dial nobody of its own origin waits for now yields its slot to the
 * other origin's queued request.
 */
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { blackhole } from '../../../src/testing/blackhole.js';
import { countingServer, guardedHttp, leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** A GET through `agent`, failed by its own `timeout` (destroyed) after `ms`: 'ok' or the error code, and when. */
function get(url: string, agent: http.Agent, ms: number, t0: number): Promise<{ outcome: string; at: number }> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent, timeout: ms }, (res) => {
      res.resume();
      res.on('end', () => resolve({ outcome: 'ok', at: performance.now() - t0 }));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ outcome: String(e.code), at: performance.now() - t0 }));
  });
}

describe('GuardedHttpAgent under maxTotalSockets', () => {
  it('4 requests to a blackhole give up at 200 ms; 4 to a live origin after them are served at once, not after the dead dials\' 2.5 s bound', async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const live = await countingServer();
    cleanups.push(() => live.close());
    const agent = guardedHttp({ keepAlive: true, maxSockets: 4, maxTotalSockets: 4, connectTimeout: 2_500 });
    const t0 = performance.now();
    const dead = Array.from({ length: 4 }, () => get(`http://${hole.host}:${hole.port}/`, agent, 200, t0));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const served = await Promise.all(Array.from({ length: 4 }, () => get(`${live.origin}/`, agent, 2_000, t0)));
    expect((await Promise.all(dead)).map((d) => d.outcome)).toEqual(Array(4).fill('ETIMEDOUT'));
    expect(served.map((s) => s.outcome)).toEqual(Array(4).fill('ok'));
    for (const s of served) expect(s.at).toBeLessThan(1_500); // was: ETIMEDOUT at 2.3 s, or served past 2.5 s
    expect(live.requests).toBe(4);
  });
});
