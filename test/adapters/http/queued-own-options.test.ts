/**
 * A request queued behind a dial that failed is dialled with its own options, as Node's agent
 * dials it (its `removeSocket` uses the queued request's own): was with the failed request's, so
 * the queued one got the other's `timeout` (a 'timeout' it never asked for, or none of its own),
 * and its `lookup`, `localPort` and `checkServerIdentity` as well. Both agents, `maxSockets: 1`,
 * request A then request B, to a host whose connects never complete (a blackhole), every request
 * destroyed on its 'timeout'. And B was not dialled for at all: dialled the moment A's dial
 * failed, it joined that finished dial (the scout of an unproven host) and failed with A's error.
 */
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { blackhole } from '../../../src/testing/blackhole.js';
import { guardedHttp, leakChecked, plain } from './helpers.js';

const cleanups = leakChecked();

interface Outcome {
  timeouts: number;
  code: unknown;
  ms: number;
}

/** One request through `agent`, destroyed on its 'timeout'; how it ended. */
function get(url: string, agent: http.Agent, options: http.RequestOptions, t0: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let timeouts = 0;
    const req = http.get(url, { agent, ...options }, (res) => {
      res.resume();
      resolve({ timeouts, code: 'response', ms: performance.now() - t0 });
    });
    req.on('timeout', () => {
      timeouts++;
      req.destroy();
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ timeouts, code: e.code, ms: performance.now() - t0 }));
  });
}

/** A then B through `agent` to a fresh blackhole; how each ended, and the connects the hole saw. */
async function pair(agent: http.Agent, a: http.RequestOptions, b: http.RequestOptions): Promise<[Outcome, Outcome, number]> {
  const hole = await blackhole();
  cleanups.push(() => hole.close());
  const url = `http://127.0.0.1:${hole.port}/`;
  const t0 = performance.now();
  const [ra, rb] = await Promise.all([get(url, agent, a, t0), get(url, agent, b, t0)]);
  await new Promise((resolve) => setTimeout(resolve, 50));
  return [ra, rb, hole.attempts];
}

describe('GuardedHttpAgent: a queued request is dialled with its own options', () => {
  it("B without a timeout, queued behind A's timeout of 200 ms: B gets no 'timeout' (was A's, armed on B's dial), as with Node's agent", async () => {
    const a = { timeout: 200 };
    const b = { signal: AbortSignal.timeout(1_800) };
    const [, raw] = await pair(plain(new http.Agent({ maxSockets: 1 })), a, b);
    const [, guarded] = await pair(guardedHttp({ maxSockets: 1, connectTimeout: 1_000 }), a, { signal: AbortSignal.timeout(1_800) });
    expect(raw.timeouts).toBe(0);
    expect(guarded).toMatchObject({ timeouts: 0, code: 'ABORT_ERR' });
  });

  it("B with a timeout of 300 ms, queued behind A without one: B's own 'timeout' fires once its dial starts (was never: it waited out the connect timeout)", async () => {
    const [, raw] = await pair(plain(new http.Agent({ maxSockets: 1 })), { signal: AbortSignal.timeout(600) }, { timeout: 300 });
    const [, guarded] = await pair(guardedHttp({ maxSockets: 1, connectTimeout: 1_000 }), {}, { timeout: 300 });
    expect(raw.timeouts).toBe(1);
    expect(guarded.timeouts).toBe(1); // was 0, and DIALGUARD_CONNECT_TIMEOUT at 2 s
    expect(guarded.ms).toBeLessThan(1_900);
  });

  it("B queued behind A's failed dial gets a dial of its own, as with Node's agent (was: A's error, undialled, in the same instant)", async () => {
    const [a, b, dials] = await pair(guardedHttp({ maxSockets: 1, connectTimeout: 500 }), {}, {});
    expect(a.code).toBe('DIALGUARD_CONNECT_TIMEOUT');
    expect(b.code).toBe('DIALGUARD_CONNECT_TIMEOUT');
    expect(dials).toBe(2); // was 1
    expect(b.ms - a.ms).toBeGreaterThan(400); // its own connect timeout, not A's instant
  });
});
