/**
 * GuardedHttpsAgent with a `checkServerIdentity` that throws: the request fails at once with what
 * it threw, and the shared breaker counts nothing (was: an uncaughtException, the request failed
 * with DIALGUARD_CONNECT_TIMEOUT after the whole connect timeout, and the host counted as failed,
 * so a client whose callback throws opened it for every client).
 */
import https from 'node:https';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { countingServer, guardedHttps, leakChecked } from './helpers.js';

const cleanups = leakChecked();

describe('GuardedHttpsAgent: a checkServerIdentity that throws', () => {
  it('fails each request at once with the thrown error; the host is neither failed nor opened, and another client is served', async () => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const thrown = new Error("the caller's check threw");
    const broken = guardedHttps({ breaker, connectTimeout: 2_000, checkServerIdentity: () => { throw thrown; } });
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) {
      const err = await new Promise<unknown>((resolve) => {
        https.get(`https://127.0.0.1:${server.port}/`, { agent: broken }, (res) => { res.resume(); resolve(undefined); }).on('error', resolve);
      });
      expect(err).toBe(thrown);
    }
    expect(performance.now() - t0).toBeLessThan(1_500);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    const good = guardedHttps({ breaker });
    const status = await new Promise<number | undefined>((resolve, reject) => {
      https.get(`https://127.0.0.1:${server.port}/`, { agent: good }, (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
    });
    expect(status).toBe(200);
  });
});
