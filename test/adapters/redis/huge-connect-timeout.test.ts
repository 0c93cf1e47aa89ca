/**
 * `connectTimeout` near its maximum (2^31-1 ms, accepted) made the redial round's lead bound,
 * `connectTimeout + 1 000`, overflow a timer: Node fired it after 1 ms, the round held no one,
 * and all 8 clients of a restarted, frozen node dialled it and hung in its handshake. The bound
 * is capped: one leads, 7 wait for its outcome. Against a real `redis-server` and ioredis.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe('RedisGuard: connectTimeout at its maximum', () => {
  it('a restarted, frozen node: one client dials it, the other 7 wait for the round (was: all 8 in its handshake)', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    const guard = new RedisGuard({ breaker: new HostBreaker(), connectTimeout: 2_147_483_000 });
    const clients = Array.from({ length: 8 }, () => guard.ioredis(Redis, { host: '127.0.0.1', port: server.port }));
    cleanups.push(() => {
      for (const c of clients) c.disconnect();
    });
    for (const c of clients) c.on('error', () => {});
    await Promise.all(clients.map((c) => c.ping()));
    await server.kill();
    await new Promise((resolve) => setTimeout(resolve, 150));
    await server.startFrozen(); // frozen before it serves: no redial is answered

    const status = (s: string): number => clients.filter((c) => c.status === s).length;
    await expect.poll(() => status('connect'), { timeout: 3_000, interval: 10 }).toBeGreaterThanOrEqual(1); // a leader in the handshake
    await new Promise((resolve) => setTimeout(resolve, 500)); // was: the round let go after 1 ms
    expect({ inHandshake: status('connect'), waiting: status('connecting') }).toEqual({ inHandshake: 1, waiting: 7 });
    expect(warnings).not.toContain('TimeoutOverflowWarning');
    await server.thaw();
  });
});
