/**
 * A client's own `connectTimeout` shorter than the guard's bounds what the client bounds (its TCP
 * connect), not the handshake after it, which neither client bounds. Before, the guard ended any
 * dial whose handshake had heard nothing the client's own number after it began: node-redis with
 * `connectTimeout: 1` (a slip for seconds) against a healthy node failed 5-7 dials and took
 * 406-707 ms to connect where the plain client connected in 1-2 ms on one (an outside review).
 * Here the node is frozen for 400 ms so the handshake waits reliably; plain clients of both
 * libraries are served on their one dial, and so must the guarded ones be. Against a real
 * `redis-server`; dials counted by the server (`total_connections_received`).
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

/** The connections `port`'s server has accepted so far, the asking one included. */
async function accepted(port: number): Promise<number> {
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableOfflineQueue: false });
  try {
    await c.connect();
    const info = await c.info('stats');
    return Number(/total_connections_received:(\d+)/.exec(info)?.[1]);
  } finally {
    c.disconnect();
  }
}

describe("RedisGuard: a client's own connectTimeout shorter than the guard's", () => {
  it.each(['ioredis', 'node-redis'] as const)('%s with connectTimeout 60 ms, its node frozen 400 ms after the TCP connect: served on its one dial, no error', async (lib) => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const before = await accepted(server.port);
    const guard = new RedisGuard({ breaker: new HostBreaker(), connectTimeout: 2_000 });
    const errors: unknown[] = [];
    let ping: () => Promise<string>;
    await server.freeze();
    if (lib === 'ioredis') {
      const c = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, connectTimeout: 60 });
      c.on('error', (e: unknown) => errors.push(e));
      cleanups.push(() => c.disconnect());
      ping = () => c.ping();
    } else {
      const c = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port, connectTimeout: 60 } });
      c.on('error', (e: unknown) => errors.push(e));
      cleanups.push(() => c.isOpen && c.destroy());
      c.connect().catch(() => {});
      ping = () => c.ping();
    }
    const pong = ping();
    await new Promise((resolve) => setTimeout(resolve, 400));
    await server.thaw();
    expect(await pong).toBe('PONG');
    expect(errors.map(String)).toEqual([]); // was: ConnectTimeoutError (handshake) at 60 ms, and a redial
    expect((await accepted(server.port)) - before - 1).toBe(1); // its one dial (the last probe excluded); was: 2 or more
  });

  it('the guard still ends a handshake that hears nothing, at its own bound: node-redis with 60 ms of its own against a node frozen throughout', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker(), connectTimeout: 300 });
    const errors: Error[] = [];
    await server.freeze();
    const c = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port, connectTimeout: 60, reconnectStrategy: false as const } });
    c.on('error', (e: Error) => errors.push(e));
    cleanups.push(() => c.isOpen && c.destroy());
    const t0 = performance.now();
    await expect(c.connect()).rejects.toThrow();
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(290); // the guard's 300, not the client's 60
    expect(took).toBeLessThan(2_000);
    expect(errors.length).toBeGreaterThanOrEqual(1);
    await server.thaw();
  });
});
