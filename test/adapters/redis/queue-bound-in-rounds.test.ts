/**
 * `maxRetriesPerRequest` bounds how long a queued command waits, in retries of the client's own
 * schedule. A guarded ioredis client whose reconnects were refused at the gate while another
 * client of its guard dialled (rounds) never counted them, so its queue was held for the whole
 * outage (an outside review, r140: `maxRetriesPerRequest: 1`, 10 clients, an 8 s outage: queued
 * GETs failed at 7.2 s at p90, plain at 1.2 s). A refusal now counts once its plain self's retry
 * would have come, so the queue fails about when plain's does, and still no sooner
 * (offline-queue-pace.test.ts). 6 ioredis clients per mode, a port that refuses every dial.
 */
import { Redis } from 'ioredis';
import { Redis as Redis6 } from 'ioredis6';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort, requireRedisServer } from './redis-server.js';

requireRedisServer();

const cleanups = leakCheckEach();

/** Milliseconds until `client`'s command queued now fails (Infinity if not within `bound`), and its error's name. */
function queued(client: Redis, bound: number): Promise<{ ms: number; name: string }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ ms: Infinity, name: 'none' }), bound);
    client.get('k').then(
      () => {
        clearTimeout(timer);
        resolve({ ms: performance.now() - t0, name: 'served' });
      },
      (err: Error) => {
        clearTimeout(timer);
        resolve({ ms: performance.now() - t0, name: err.name });
      },
    );
  });
}

describe('RedisGuard: maxRetriesPerRequest with a guard whose clients redial in rounds', () => {
  it('maxRetriesPerRequest 1, 6 clients, every dial refused: queued commands fail about when plain ones do (were held for the outage)', async () => {
    const port = await freePort();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const options = { host: '127.0.0.1', port, maxRetriesPerRequest: 1 };
    const make = (guarded: boolean): Redis => {
      const c = guarded ? (guard.ioredis(Redis, options) as unknown as Redis) : new Redis(options);
      c.on('error', () => {});
      cleanups.push(() => c.disconnect());
      return c;
    };
    const plain = Array.from({ length: 6 }, () => make(false));
    const guarded = Array.from({ length: 6 }, () => make(true));
    const ends = await Promise.all([...plain, ...guarded].map((c) => queued(c, 5_000)));
    const p = ends.slice(0, 6);
    const g = ends.slice(6);
    const seen = `guarded ${g.map((e) => Math.round(e.ms)).join(', ')}; plain ${p.map((e) => Math.round(e.ms)).join(', ')}`;
    for (const e of [...p, ...g]) expect(e.name, seen).toBe('MaxRetriesPerRequestError');
    // A refusal is heard within a breaker window of its due time (was: up to 3.2 s here, plain 62 ms).
    expect(Math.max(...g.map((e) => e.ms)), seen).toBeLessThan(Math.max(...p.map((e) => e.ms)) + 700);
    expect(Math.min(...g.map((e) => e.ms)), seen).toBeGreaterThanOrEqual(Math.min(...p.map((e) => e.ms)) - 20); // no sooner than plain
  }, 10_000);

  it('a breaker window of seconds: a refusal after it stands for the retries its plain self made meanwhile, so the queue fails about when plain fails it (was: one retry per window)', async () => {
    const port = await freePort();
    // Opens on the first failed dial, for 1.5 s windows: ioredis 5's own schedule asks 5 retries in 750 ms.
    const guard = new RedisGuard({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 1_500 }) });
    const options = { host: '127.0.0.1', port, maxRetriesPerRequest: 5 };
    const plain = new Redis(options);
    const guarded = guard.ioredis(Redis, options) as unknown as Redis;
    for (const c of [plain, guarded]) {
      c.on('error', () => {});
      cleanups.push(() => c.disconnect());
    }
    const [p, g] = await Promise.all([queued(plain, 8_000), queued(guarded, 8_000)]);
    const seen = `guarded ${Math.round(g.ms)}, plain ${Math.round(p.ms)}`;
    expect([p.name, g.name], seen).toEqual(['MaxRetriesPerRequestError', 'MaxRetriesPerRequestError']);
    expect(g.ms, seen).toBeGreaterThanOrEqual(p.ms - 20);
    expect(g.ms, seen).toBeLessThan(p.ms + 2_000); // within one window of plain (one retry per window: 6 windows, ~9 s)
  }, 12_000);

  it('6 ioredis 6 clients of one guard, maxRetriesPerRequest 1, a node killed for 5 s: a command queued 2.5 s in is served once it is back, as plain ones are (counted one by one, refusals ran ahead of plain and failed 1-3 of 6)', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const options = { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 };
    const make = (guarded: boolean): Redis6 => {
      const c = guarded ? (guard.ioredis(Redis6, options) as unknown as Redis6) : new Redis6(options);
      c.on('error', () => {});
      cleanups.push(() => c.disconnect());
      return c;
    };
    const clients = [...Array.from({ length: 6 }, () => make(false)), ...Array.from({ length: 6 }, () => make(true))];
    await Promise.all(clients.map((c) => c.ping()));
    await server.kill();
    // ioredis 6's own schedule: 50 ms doubling, so its count is even (a queue flush) after ~1.6 s and next after ~6.4 s.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const ends = clients.map((c) => queued(c as unknown as Redis, 12_000));
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await server.start();
    const got = await Promise.all(ends);
    const seen = got.map((e, i) => `${i < 6 ? 'plain' : 'guarded'} ${e.name}@${Math.round(e.ms)}`).join('; ');
    const served = (from: number): number => got.slice(from, from + 6).filter((e) => e.name === 'served').length;
    expect(served(6), seen).toBeGreaterThanOrEqual(served(0));
  }, 30_000);
});
