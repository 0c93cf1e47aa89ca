/**
 * node-redis with RESP 3 (node-redis 6's default; 5.9+ when asked) turns maintenance
 * notifications on at connect, and to pick their endpoint type resolves `socket.host` itself with
 * `dns.lookup`. The guard hands node-redis an IP address as a name only its own lookup resolves
 * (`<ip>.dialguard.invalid`): that lookup failed ENOTFOUND, every connect failed, and the failures
 * opened a healthy node for every client of the shared breaker (an outside review, node-redis
 * 6.4.0 with defaults and 5.12 with RESP 3). For an IP, the guard now names the endpoint type
 * node-redis would pick from the address. Against a real `redis-server`.
 */
import { createClient, createClientPool } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe('RedisGuard (node-redis): RESP 3, maintenance notifications on, an IP address', () => {
  it.each(['plain', 'client', 'pool'] as const)('%s: PING answers PONG, and the breaker hears only successes', { timeout: 10_000 }, async (lane) => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker });
    const options = { RESP: 3 as const, socket: { host: '127.0.0.1', port: server.port, reconnectStrategy: false as const } };
    const errors: string[] = [];
    if (lane === 'pool') {
      const pool = guard.nodeRedisPool(createClientPool, options, { minimum: 2 });
      pool.on('error', (e: Error) => void errors.push(e.message));
      cleanups.push(() => pool.destroy());
      await pool.connect();
      expect(await pool.ping()).toBe('PONG');
    } else {
      const client = lane === 'plain' ? createClient(options) : guard.nodeRedis(createClient, options);
      client.on('error', (e: Error) => void errors.push(e.message));
      cleanups.push(() => client.isOpen && client.destroy());
      await client.connect();
      expect(await client.ping()).toBe('PONG');
    }
    expect(errors).toEqual([]); // was: ENOTFOUND 127.0.0.1.dialguard.invalid
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    expect(breaker.stats().succeeded).toBe(lane === 'plain' ? 0 : lane === 'pool' ? 2 : 1);
  });
});
