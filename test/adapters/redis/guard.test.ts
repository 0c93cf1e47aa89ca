/**
 * RedisGuard with node-redis and ioredis against a real `redis-server` on loopback: a dead node,
 * a restarted one, counting the dials every client makes (a counting resolver: the clients look
 * `localhost` up once per TCP attempt) beside unguarded clients with default settings.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { countingLookup } from '../http/helpers.js';
import { RedisServer, connectedPair, freePort, requireRedisServer } from './redis-server.js';

const cleanups = leakCheckEach();
const CLIENTS = 10;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('RedisGuard: a dead node costs at most one dial per breaker window per process', () => {
  it('redis-server is installed (the tests below need it)', () => {
    requireRedisServer();
  });

  it('node-redis, a dead node: 10 guarded clients dial once each, then one probe per window; 10 default clients redial all along', async () => {
    const port = await freePort();
    const raw = countingLookup();
    const guarded = countingLookup();
    const guard = new RedisGuard({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 500 }) });
    const clients = [
      ...Array.from({ length: CLIENTS }, () => createClient({ socket: { host: 'localhost', port, lookup: raw.lookup } as never })),
      ...Array.from({ length: CLIENTS }, () => guard.nodeRedis(createClient, { socket: { host: 'localhost', port, lookup: guarded.lookup } })),
    ];
    for (const c of clients) {
      c.on('error', () => {});
      c.connect().catch(() => {});
    }
    cleanups.push(() => Promise.all(clients.map((c) => c.destroy())));
    await sleep(2_000);
    // Default node-redis: every client redials within 50..500 ms, again and again.
    expect(raw.calls).toBeGreaterThan(CLIENTS * 4);
    // Guarded: the first dial of each client, then at most one probe per 500 ms window (and a
    // window or two of slack for timer jitter on a loaded machine).
    expect(guarded.calls).toBeLessThanOrEqual(CLIENTS + Math.ceil(2_000 / 500) + 2);
  });

  it('ioredis, a dead node: 10 guarded clients dial once each, then one probe per window; 10 default clients redial all along', async () => {
    const port = await freePort();
    // Every TCP socket this process opens (net.connect publishes it here): the clients' real dials.
    let sockets = 0;
    const onSocket = (): void => {
      sockets++;
    };
    diagnosticsChannel.subscribe('net.client.socket', onSocket);
    cleanups.push(() => diagnosticsChannel.unsubscribe('net.client.socket', onSocket));
    const raw = Array.from({ length: CLIENTS }, () => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of raw) c.on('error', () => {});
    await sleep(2_000);
    for (const c of raw) c.disconnect();
    const rawDials = sockets;
    const guard = new RedisGuard({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 500 }) });
    const guarded = Array.from({ length: CLIENTS }, () => guard.ioredis(Redis, { host: '127.0.0.1', port, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of guarded) c.on('error', () => {});
    cleanups.push(() => guarded.forEach((c) => c.disconnect()));
    await sleep(2_000);
    const guardedDials = sockets - rawDials;
    expect(rawDials).toBeGreaterThan(CLIENTS * 2);
    expect(guardedDials).toBeLessThanOrEqual(CLIENTS + Math.ceil(2_000 / 500) + 2);
  });

  it('node-redis and ioredis, a restarted node: both reconnect after one probe and serve again', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 300 }) });
    const { a, b } = await connectedPair(guard, server.port, cleanups);
    await server.kill();
    await sleep(800);
    expect(guard.breaker.state(`127.0.0.1:${server.port}`)?.state).not.toBe('closed');
    await server.start();
    await expect.poll(async () => (await Promise.all([a.ping().catch(() => 'down'), b.ping().catch(() => 'down')])).join(), { timeout: 5_000, interval: 100 }).toBe('PONG,PONG');
    expect(guard.breaker.state(`127.0.0.1:${server.port}`)?.state).toBe('closed');
  });

  it('a wrong password is a reply from a live server: never a failed dial, the node stays closed for every client', async () => {
    const server = await new RedisServer(await freePort(), ['--requirepass', 'right']).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const guard = new RedisGuard({ breaker });
    const wrong = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port, reconnectStrategy: false as const }, password: 'wrong' });
    wrong.on('error', () => {});
    cleanups.push(() => {
      if (wrong.isOpen) wrong.destroy();
    });
    await expect(wrong.connect()).rejects.toThrow(/WRONGPASS|invalid/i);
    await sleep(300);
    expect(breaker.state(`127.0.0.1:${server.port}`)?.state ?? 'closed').toBe('closed');
    expect(breaker.stats().failed).toBe(0);
    const right = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, password: 'right' });
    right.on('error', () => {});
    cleanups.push(() => right.disconnect());
    expect(await right.ping()).toBe('PONG');
  });

  it('node-redis by url: its password and database are honoured, and its host is the one the breaker files', async () => {
    const server = await new RedisServer(await freePort(), ['--requirepass', 'pw']).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker });
    const client = guard.nodeRedis(createClient, { url: `redis://:pw@127.0.0.1:${server.port}/2` });
    client.on('error', () => {});
    cleanups.push(() => {
      if (client.isOpen) client.destroy();
    });
    await client.connect();
    await client.set('k', 'in db 2');
    const other = guard.nodeRedis(createClient, { url: `redis://localhost:${server.port}`, password: 'pw' });
    other.on('error', () => {});
    cleanups.push(() => {
      if (other.isOpen) other.destroy();
    });
    await other.connect();
    expect(await other.get('k')).toBeNull(); // database 0
    await other.select(2);
    expect(await other.get('k')).toBe('in db 2');
    expect(breaker.state(`127.0.0.1:${server.port}`)?.state).toBe('closed');
    expect(breaker.state(`localhost:${server.port}`)?.state).toBe('closed');
    expect(breaker.stats().succeeded).toBe(2);
  });
});
