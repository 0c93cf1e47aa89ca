/**
 * One Redis client's own TLS mistake (it forgot the CA) must not get the node refused for every
 * client on the breaker (DESIGN rule 1): the node presented a certificate, so it is alive. A real
 * `redis-server` behind a TLS terminator presenting the test certificate; the wrong client's
 * dials counted at the terminator.
 */
import net from 'node:net';
import tls from 'node:tls';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

/** A TLS terminator in front of `upstream` (plain redis-server): counts the TLS connections it accepts. */
async function terminator(upstream: number): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = tls.createServer({ cert: TEST_CERT, key: TEST_KEY }, (s) => {
    const up = net.connect(upstream, '127.0.0.1');
    sockets.add(up);
    s.pipe(up).pipe(s);
    s.on('error', () => up.destroy());
    up.on('error', () => s.destroy());
    up.on('close', () => sockets.delete(up));
  });
  server.on('connection', (s: net.Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as net.AddressInfo).port, connections: () => connections };
}

/** `work`, or a failure after `ms`. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

describe('RedisGuard: one client without the CA', () => {
  for (const lib of ['ioredis', 'node-redis'] as const) {
    it(`${lib}: its certificate errors never open the node; a client with the CA is served`, async () => {
      const redis = await new RedisServer(await freePort()).start();
      cleanups.push(() => redis.kill());
      const front = await terminator(redis.port);
      // Opens at the first failed dial: without the fix, the wrong client's first dial refused everyone.
      const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
      const guard = new RedisGuard({ breaker });
      const key = `127.0.0.1:${front.port}`;
      let wrong: { close: () => Promise<unknown> };
      let right: { ping: () => Promise<string>; close: () => Promise<unknown> };
      if (lib === 'ioredis') {
        const w = guard.ioredis(Redis, { host: '127.0.0.1', port: front.port, tls: {}, retryStrategy: () => 50, maxRetriesPerRequest: 1 });
        w.on('error', () => {});
        wrong = { close: async () => w.disconnect() };
        cleanups.push(() => wrong.close());
        await eventually(() => front.connections(), (n) => n >= 3); // it failed, and dialled again
        const r = guard.ioredis(Redis, { host: '127.0.0.1', port: front.port, tls: { ca: TEST_CERT }, maxRetriesPerRequest: 1 });
        r.on('error', () => {});
        right = { ping: () => r.ping(), close: async () => r.disconnect() };
      } else {
        const w = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: front.port, tls: true as const, reconnectStrategy: () => 50 } });
        w.on('error', () => {});
        w.connect().catch(() => {});
        wrong = { close: () => w.destroy() as unknown as Promise<unknown> };
        cleanups.push(() => wrong.close());
        await eventually(() => front.connections(), (n) => n >= 3);
        const r = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: front.port, tls: true as const, ca: TEST_CERT } });
        r.on('error', () => {});
        await within(r.connect(), 5_000); // was never: the node refused
        right = { ping: () => r.ping(), close: () => r.destroy() as unknown as Promise<unknown> };
      }
      cleanups.push(() => right.close());
      expect(breaker.state(key)?.state ?? 'closed').toBe('closed'); // was 'open'
      expect(breaker.stats().refused).toBe(0);
      expect(await within(right.ping(), 5_000)).toBe('PONG');
    });
  }
});
