/**
 * `connectTimeout: null` (a config loader's "unset") is what the plain clients read as no value:
 * they connect and answer PONG. Guarded, it was a TypeError at construction (an outside review).
 * It now takes the guard's bound, as undefined and 0 do.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe('RedisGuard: connectTimeout null', () => {
  it('ioredis and node-redis take the guard’s bound and are served, as their plain selves are', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker(), connectTimeout: 1_500 });
    const io = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, connectTimeout: null as never });
    cleanups.push(() => io.disconnect());
    expect((io.options as { connectTimeout?: number }).connectTimeout).toBe(1_500);
    const nr = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port, connectTimeout: null as never } });
    cleanups.push(() => nr.isOpen && nr.destroy());
    await nr.connect();
    expect(await io.ping()).toBe('PONG');
    expect(await nr.ping()).toBe('PONG');
  });
});
