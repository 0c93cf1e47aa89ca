/**
 * ioredis with no `retryStrategy` of its own: the guard's redials must come no sooner than the
 * client's own default would (an outside review, r124). ioredis counts every retry toward
 * `maxRetriesPerRequest` and fails its offline queue with MaxRetriesPerRequestError each time
 * that many have gone by; a gate refusal is a retry to it. The guard answered at the breaker's
 * pace (250-312 ms windows) once the node's rounds had failed a dial, so its 20 retries went in
 * ~4 s where the plain client's take ~10.5 s: during a 4-10 s outage 194-215 of ~500 queued
 * commands failed guarded, none plain. Counted here on a port nobody listens on (every dial
 * refused at once): each retry's wait, and when the queued command fails, against the plain
 * client in the same run (the schedule, not each wait: own-schedule.test.ts).
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { freePort } from './redis-server.js';

const cleanups = leakCheckEach();

/** ioredis 5's own wait before retry `times` (`Redis.defaultOptions.retryStrategy`). */
const ownDefault = (times: number): number => Math.min(times * 50, 2_000);

/** Retries before ioredis fails its queued commands (kept small: the plain client's 6 take ~1 s). */
const MAX_RETRIES = 5;

interface Run {
  /** When each retry was due (ms from the command): when ioredis was told its wait, plus the wait. */
  dueAt: number[];
  /** Milliseconds from the command to its MaxRetriesPerRequestError. */
  failedAfter: number;
  error: unknown;
}

/** One client to a refused port with a command queued at once; how long until ioredis gives it up. */
async function run(client: Redis): Promise<Run> {
  const dueAt: number[] = [];
  const t0 = performance.now();
  client.on('reconnecting', (ms: number) => dueAt.push(performance.now() - t0 + ms));
  client.on('error', () => {}); // each refused dial; the command's own error is what counts
  const error = await client.ping().then(
    () => undefined,
    (err: unknown) => err,
  );
  return { dueAt, failedAfter: performance.now() - t0, error };
}

describe('RedisGuard: ioredis with its own default pace keeps its offline queue as long as plain', () => {
  it('never redials sooner than ioredis would, so queued commands fail no sooner than the plain client', async () => {
    const port = await freePort();
    const options = { host: '127.0.0.1', port, maxRetriesPerRequest: MAX_RETRIES, connectTimeout: 500 };
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const plain = new Redis(options);
    const guarded = guard.ioredis(Redis, options) as unknown as Redis;
    cleanups.push(() => plain.disconnect(), () => guarded.disconnect());
    const [p, g] = await Promise.all([run(plain), run(guarded)]);
    for (const r of [p, g]) expect((r.error as Error | undefined)?.name).toBe('MaxRetriesPerRequestError');
    // Every retry no sooner than ioredis's own schedule has it (it was the breaker's 250-312 ms
    // window, or a round's, whatever the count). The schedule, not each wait: a dial begun late
    // leaves that much less to wait for the next (own-schedule.test.ts), never less in all.
    expect(g.dueAt.length).toBeGreaterThanOrEqual(MAX_RETRIES);
    let schedule = 0;
    g.dueAt.slice(0, MAX_RETRIES + 1).forEach((at, i) => {
      schedule += ownDefault(i + 1);
      expect(at, `retry ${i + 1}`).toBeGreaterThanOrEqual(schedule);
    });
    // So the queued command waits as long as with the plain client: ioredis gives it up as it
    // asks for retry MAX_RETRIES + 1, after the waits before the first MAX_RETRIES (a dial refused
    // at the gate takes no time where plain's is refused by the kernel, hence the slack).
    const queued = Array.from({ length: MAX_RETRIES }, (_, i) => ownDefault(i + 1)).reduce((a, b) => a + b, 0);
    expect(p.failedAfter).toBeGreaterThanOrEqual(queued - 20);
    expect(g.failedAfter).toBeGreaterThanOrEqual(queued - 20);
  }, 15_000);
});
