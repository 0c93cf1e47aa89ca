/**
 * A client's own `connectTimeout` is its bound on one dial (handshake included); the guard's
 * applies only where the client sets none. Before, the guard's (300 ms here, 2 000 by default)
 * replaced the client's silently: a client patient for 1.5 s with a node frozen for 0.7 s failed
 * its dial, and its PING, where the plain client was served. Against a real `redis-server`.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe("RedisGuard: the client's own connectTimeout", () => {
  it.each(['ioredis', 'node-redis'] as const)('%s: 1.5 s of its own against a node frozen for 0.7 s: served on its first dial, no error; the guard’s 300 ms alone fails that dial', async (lib) => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const make = (own: number | undefined): { ping(): Promise<string>; errors: unknown[] } => {
      const errors: unknown[] = [];
      if (lib === 'ioredis') {
        const c = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, ...(own === undefined ? {} : { connectTimeout: own }) });
        c.on('error', (e: unknown) => errors.push(e));
        cleanups.push(() => c.disconnect());
        return { ping: () => c.ping(), errors };
      }
      const c = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port, ...(own === undefined ? {} : { connectTimeout: own }) } });
      c.on('error', (e: unknown) => errors.push(e));
      cleanups.push(() => c.isOpen && c.destroy());
      c.connect().catch(() => {});
      return { ping: () => c.ping(), errors };
    };
    await server.freeze();
    const patient = make(1_500);
    const hasty = make(undefined);
    const pings = [patient.ping(), hasty.ping().catch(() => 'failed')];
    await new Promise((resolve) => setTimeout(resolve, 700));
    await server.thaw();
    expect(await pings[0]).toBe('PONG'); // node-redis was: rejected at 300 ms
    await pings[1];
    expect(patient.errors).toEqual([]); // ioredis was: an error at 300 ms and a second dial
    expect(hasty.errors.length).toBeGreaterThanOrEqual(1); // the guard's bound still holds where no own one is set
  });

  it('an own connectTimeout that is no duration is refused, naming it', () => {
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    expect(() => guard.ioredis(Redis, { host: '127.0.0.1', port: 6390, connectTimeout: -1, lazyConnect: true })).toThrow(/connectTimeout/);
    expect(() => guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: 6390, connectTimeout: Number.NaN } })).toThrow(/socket.connectTimeout/);
    // 0, both clients' "no timeout", takes the guard's bound: every dial is bounded.
    const io = guard.ioredis(Redis, { host: '127.0.0.1', port: 6390, connectTimeout: 0, lazyConnect: true });
    expect((io.options as { connectTimeout?: number }).connectTimeout).toBe(2_000);
    io.disconnect();
  });

  it('breaker: null is refused (every other adapter reads it as "none"; this guard has nothing to gate without one), not taken for the shared one', () => {
    expect(() => new RedisGuard({ breaker: null as never })).toThrow(/breaker must be a HostBreaker \(left out: the shared one\), got null/);
    expect(new RedisGuard().breaker).toBeInstanceOf(HostBreaker);
  });
});
