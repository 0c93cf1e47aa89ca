/**
 * Seed 004 in redis's words: a long poll (BLPOP) through `retry()` whose connection is killed
 * mid-wait. node-redis rejects it with SocketClosedUnexpectedlyError, which was read as no
 * transport failure (`unknown`), so the call failed at once with most of its deadline left (an
 * outside review: 1 send, failed at 1.5 s of 5 s), where the same long poll over axios or got
 * was sent again. Now an idempotent call sends it again, with what remains of the caller's
 * deadline, and a non-idempotent one (BLMOVE) is not resent. Real redis-server; sends counted by
 * the server (INFO commandstats). (ioredis resends a lost command itself, with its whole wait;
 * with `autoResendUnfulfilledCommands: false` it never settles it once reconnected, plain too:
 * its AbortError, for a pipeline cut mid-way, is pinned in test/core/classify-redis-clients.)
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { retry } from '../../../src/retry/retry.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();
const DEADLINE = 5_000;

/** How many times the server ran `command`. */
async function calls(admin: Redis, command: string): Promise<number> {
  const stats = await admin.info('commandstats');
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

/** Kills the connection of every client blocked in `command`, once one is. */
async function killBlocked(admin: Redis, command: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const line = ((await admin.client('LIST')) as string).split('\n').find((l: string) => l.includes(`cmd=${command}`));
    if (line !== undefined) {
      await admin.client('KILL', 'ID', /id=(\d+)/.exec(line)![1]!);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no client blocked in ${command}`);
}

describe('retry() over a guarded redis client: a long poll whose connection is killed mid-wait', () => {
  for (const lib of ['node-redis'] as const) {
    it(`${lib}: an idempotent BLPOP is sent again with the deadline's remainder and served; a BLMOVE is not resent`, async () => {
      const server = await new RedisServer(await freePort()).start();
      cleanups.push(() => server.kill());
      const admin = new Redis({ host: '127.0.0.1', port: server.port });
      cleanups.push(() => admin.disconnect());
      const guard = new RedisGuard({ breaker: new HostBreaker() });
      const c = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port } });
      c.on('error', () => {});
      cleanups.push(() => c.destroy());
      await c.connect();
      const blpop = (s: number): Promise<unknown> => c.blPop('k', s);
      const blmove = (): Promise<unknown> => c.blMove('src', 'dst', 'LEFT', 'RIGHT', 3);
      const remaining: number[] = [];
      const started = performance.now();
      const served = retry(
        (attempt) => {
          remaining.push(attempt.remaining);
          return blpop(Math.max(0.01, Math.floor(attempt.remaining / 10) / 100));
        },
        { timeout: DEADLINE, idempotent: true, budget: null },
      );
      await killBlocked(admin, 'blpop');
      await killBlocked(admin, 'blpop'); // the second send is blocked: it was sent again
      await admin.rpush('k', 'v');
      const answer = await served;
      expect(answer).toBeTruthy(); // served by the push
      expect(await calls(admin, 'blpop')).toBe(2 + 1); // two killed, one served
      expect(remaining).toHaveLength(3);
      expect(remaining[1]!).toBeLessThan(DEADLINE); // the remainder, not a fresh deadline
      expect(performance.now() - started).toBeLessThan(DEADLINE);

      const failed = retry(() => blmove(), { timeout: DEADLINE, budget: null });
      await killBlocked(admin, 'blmove');
      await expect(failed).rejects.toBeTruthy();
      expect(await calls(admin, 'blmove')).toBe(1); // not idempotent: never resent
    }, 20_000);
  }
});
