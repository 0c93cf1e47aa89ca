/**
 * A guarded ioredis client's dial refused at the gate sends nothing, so it is not one of
 * ioredis's retries (an outside review, r125, after r124's fix): every refusal counted toward
 * `maxRetriesPerRequest` and waited ioredis's own growing delay, so 10 clients of one guard
 * refused while one of them probed a node that came back ~12 s into an outage stayed down ~5 s
 * more (ioredis 6's delay), where plain clients were back within 0.5 s. Now a refusal waits the
 * breaker's pace and leaves ioredis's count alone; only real dials count and wait its delay (so
 * queued commands still fail no sooner than plain: offline-queue-pace.test.ts). Here the node is
 * isolated for 1.5 s: a command queued with `maxRetriesPerRequest: 3` waits it out and is served;
 * and 6 ioredis 6 clients of one guard come back no later than 6 plain ones after their node's return.
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

describe('RedisGuard: a refusal at the gate is not one of ioredis\'s retries', () => {
  it('a command queued while its node is isolated for 1.5 s is served once the isolation ends, not failed by maxRetriesPerRequest', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const release = breaker.isolate(`127.0.0.1:${server.port}`, 1_500);
    cleanups.push(() => release());
    const guard = new RedisGuard({ breaker });
    const client = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 3 }) as unknown as Redis;
    client.on('error', () => {});
    cleanups.push(() => client.disconnect());
    const t0 = performance.now();
    const answer = await client.ping().catch((err: Error) => err.name);
    const at = performance.now() - t0;
    // Taking a refusal off ioredis's count must never land it on a multiple of
    // maxRetriesPerRequest + 1 (0 here): ioredis fails its queue on those (a first version did, at 89 ms).
    expect(answer).toBe('PONG');
    expect(breaker.stats().refused).toBeGreaterThanOrEqual(1);
    expect(at).toBeGreaterThanOrEqual(1_400);
    expect(at).toBeLessThan(2_500); // the breaker's pace, not ioredis's growing delay
  }, 10_000);

  it('6 ioredis 6 clients of one guard, their node refusing for 4.5 s: back no later than 6 plain ones (were held to ioredis 6\'s growing delay)', async () => {
    const port = await freePort();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const make = (guarded: boolean): Redis6 => {
      const c = guarded ? (guard.ioredis(Redis6, { host: '127.0.0.1', port }) as unknown as Redis6) : new Redis6({ host: '127.0.0.1', port });
      c.on('error', () => {});
      cleanups.push(() => c.disconnect());
      return c;
    };
    const clients = [...Array.from({ length: 6 }, () => make(false)), ...Array.from({ length: 6 }, () => make(true))];
    await new Promise((resolve) => setTimeout(resolve, 4_500)); // ioredis 6's delay has grown to 3.2 s
    const server = await new RedisServer(port).start();
    cleanups.push(() => server.kill());
    const back = performance.now();
    const ready = await Promise.all(
      clients.map(
        (c) =>
          new Promise<number>((resolve) => {
            if (c.status === 'ready') return resolve(0);
            const timer = setTimeout(() => resolve(Infinity), 8_000);
            c.once('ready', () => {
              clearTimeout(timer);
              resolve(performance.now() - back);
            });
          }),
      ),
    );
    const p = ready.slice(0, 6);
    const g = ready.slice(6);
    const within = (ms: number[]): number => ms.filter((x) => x < 1_000).length;
    const seen = `guarded ${g.map(Math.round).join(', ')}; plain ${p.map(Math.round).join(', ')}`;
    expect(Math.max(...p), seen).toBeLessThan(Infinity);
    // A client refused at the gate asks again at the breaker's pace (a 250-312 ms window while
    // its node refuses at once), so one of them probes the node soon after it is back and the
    // refused ones follow; one whose own dial failed just before waits ioredis's schedule, as its
    // plain self does (own-schedule.test.ts). Held to the growing delay, refused ones came 2.7 s after.
    expect(Math.max(...g), seen).toBeLessThan(Math.max(...p) + 600);
    expect(within(g), seen).toBeGreaterThanOrEqual(within(p));
  }, 20_000);
});
