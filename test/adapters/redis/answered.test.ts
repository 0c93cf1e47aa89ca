/**
 * A node that answers a dial and then closes it is alive: the failure is not counted against it
 * (DESIGN rule 1, as `DialContext.answered` for every other dial). Before, each such dial was a
 * failed dial of the node, so a client that could not get a connection (a node at `maxclients`
 * writes `-ERR max number of clients reached` to each new connection, then closes it) opened the
 * breaker, and every client of the node was refused.
 */
import net from 'node:net';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

/** A peer that answers each connection's first bytes with a Redis error, then closes it; counts connections. */
async function answerThenClose(): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.once('data', () => s.end('-ERR max number of clients reached\r\n'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as net.AddressInfo).port, connections: () => connections };
}

type Lib = 'ioredis' | 'node-redis';

/** A guarded client of `port` redialling every 20 ms; its errors are collected. */
function client(lib: Lib, guard: RedisGuard, port: number): unknown[] {
  const errors: unknown[] = [];
  if (lib === 'ioredis') {
    const c = guard.ioredis(Redis, { host: '127.0.0.1', port, retryStrategy: () => 20, maxRetriesPerRequest: 0 });
    c.on('error', (err: unknown) => void errors.push(err));
    cleanups.push(() => c.disconnect());
  } else {
    const c = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port, reconnectStrategy: () => 20 } });
    c.on('error', (err: unknown) => void errors.push(err));
    c.connect().catch(() => {});
    cleanups.push(() => c.destroy());
  }
  return errors;
}

/** Opens at the first failed dial: without the fix, the client's first dial refused everyone. */
function touchyBreaker(): HostBreaker {
  return new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
}

describe('RedisGuard: a node that answered before the dial failed', () => {
  for (const lib of ['ioredis', 'node-redis'] as const) {
    it(`${lib}: a node that replies -ERR to the handshake and closes never opens; no failure counted`, async () => {
      const peer = await answerThenClose();
      const breaker = touchyBreaker();
      const errors = client(lib, new RedisGuard({ breaker }), peer.port);
      // Three dials answered and closed by the node, each settled by the client's strategy.
      await eventually(() => breaker.stats().succeeded, (n) => n >= 3, 5_000);
      expect(peer.connections()).toBeGreaterThanOrEqual(3);
      // node-redis still reports each failure as an 'error' (ioredis closes after its failed ready check).
      if (lib === 'node-redis') expect(errors.length).toBeGreaterThanOrEqual(3);
      expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0, opened: 0 }); // was failed 1, opened 1, then refusals
      expect(breaker.state(`127.0.0.1:${peer.port}`)?.state).toBe('closed');
    });
  }

  it('node-redis: a real redis-server at maxclients never opens; no failure counted', async () => {
    const redis = await new RedisServer(await freePort(), ['--maxclients', '1']).start();
    cleanups.push(() => redis.kill());
    const holder = createClient({ socket: { host: '127.0.0.1', port: redis.port } });
    holder.on('error', () => {});
    await holder.connect();
    cleanups.push(() => holder.destroy());
    const breaker = touchyBreaker();
    const errors = client('node-redis', new RedisGuard({ breaker }), redis.port);
    await eventually(() => breaker.stats().succeeded, (n) => n >= 3, 5_000);
    expect(errors.length).toBeGreaterThanOrEqual(3);
    expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0, opened: 0 });
  });
});

describe('a node isolated until released', () => {
  it('an ioredis client waits and asks again now and then, never spinning on refusals (was: told to wait Infinity, which Node runs as 1 ms)', async () => {
    const breaker = new HostBreaker();
    const port = await freePort();
    const release = breaker.isolate(`127.0.0.1:${port}`); // no end
    cleanups.push(() => release());
    const guard = new RedisGuard({ breaker });
    const c = guard.ioredis(Redis, { host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
    c.on('error', () => {});
    cleanups.push(() => c.disconnect());
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(breaker.stats().refused).toBeLessThanOrEqual(3); // was thousands within 300 ms
  });
});
