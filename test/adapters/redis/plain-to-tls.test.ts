/**
 * A client that forgot `tls` against a TLS-only Redis port: the server takes the connection and
 * resets it without sending a byte (checked: `bytesRead` 0, `read ECONNRESET`), so nothing tells
 * the guard the node is alive and its dials are counted as the node's failures. What the guard
 * must not do on top of that is hand this client's failure to the node's TLS clients: the shared
 * redial rounds were keyed by address alone, so a TLS client arriving between the plain client's
 * rounds was failed at once with its `ECONNRESET`, no dial made. A real `redis-server` serving
 * TLS only, with the test certificate.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

/** redis-server listening with TLS only on its port. */
async function tlsOnlyRedis(): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'dialguard-redis-tls-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'cert.pem'), TEST_CERT);
  writeFileSync(join(dir, 'key.pem'), TEST_KEY);
  const port = await freePort();
  const redis = new RedisServer(port, ['--port', '0', '--tls-port', String(port), '--tls-cert-file', join(dir, 'cert.pem'), '--tls-key-file', join(dir, 'key.pem'), '--tls-auth-clients', 'no']);
  await redis.start();
  cleanups.push(() => redis.kill());
  return redis;
}

describe('RedisGuard: a client without tls against a TLS-only node', () => {
  for (const lib of ['ioredis', 'node-redis'] as const) {
    it(`${lib}: a TLS client of the node dials for itself and is served, never handed the plain client's error`, async () => {
      const redis = await tlsOnlyRedis();
      // Never opens here: what fails the TLS client, if anything, is the shared rounds.
      const breaker = new HostBreaker({ failureThreshold: 1_000 });
      const guard = new RedisGuard({ breaker });
      const port = redis.port;
      const heard: unknown[] = [];
      let ping: () => Promise<string>;
      if (lib === 'ioredis') {
        const plain = guard.ioredis(Redis, { host: '127.0.0.1', port });
        plain.on('error', () => {});
        cleanups.push(() => plain.disconnect());
        await eventually(() => breaker.stats().failed, (n) => n >= 3, 5_000); // in rounds, spaced 100 ms and more by now
        const good = guard.ioredis(Redis, { host: '127.0.0.1', port, tls: { ca: TEST_CERT }, maxRetriesPerRequest: 0 });
        good.on('error', (err: unknown) => void heard.push(err));
        cleanups.push(() => good.disconnect());
        ping = () => good.ping();
      } else {
        const plain = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port } });
        plain.on('error', () => {});
        plain.connect().catch(() => {});
        cleanups.push(() => plain.destroy());
        await eventually(() => breaker.stats().failed, (n) => n >= 3, 5_000);
        const good = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port, tls: true as const, ca: TEST_CERT, reconnectStrategy: false as const } });
        good.on('error', (err: unknown) => void heard.push(err));
        cleanups.push(() => good.destroy());
        await good.connect(); // was: rejected with the plain client's ECONNRESET (no reconnect here)
        ping = () => good.ping();
      }
      const succeeded = breaker.stats().succeeded;
      expect(await ping()).toBe('PONG');
      expect(heard).toEqual([]); // was [read ECONNRESET], the plain client's, no dial of its own
      expect(breaker.stats().succeeded).toBeGreaterThanOrEqual(lib === 'ioredis' ? succeeded + 1 : succeeded);
      expect(breaker.stats().succeeded).toBeGreaterThanOrEqual(1); // the TLS client's dial, its own
    });
  }
});

describe('RedisGuard: a client without tls opened the node for plain dials only', () => {
  it('ioredis: a TLS client of the node is served at once while the plain client keeps it open', async () => {
    const redis = await tlsOnlyRedis();
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 60_000 });
    const guard = new RedisGuard({ breaker });
    const plain = guard.ioredis(Redis, { host: '127.0.0.1', port: redis.port });
    plain.on('error', () => {});
    cleanups.push(() => plain.disconnect());
    await eventually(() => breaker.state(`127.0.0.1:${redis.port}`)?.state, (s) => s === 'open', 5_000);
    const good = guard.ioredis(Redis, { host: '127.0.0.1', port: redis.port, tls: { ca: TEST_CERT }, maxRetriesPerRequest: 0 });
    good.on('error', () => {});
    cleanups.push(() => good.disconnect());
    expect(await good.ping()).toBe('PONG'); // was refused: the plain client's failures opened host:port for all
  });

  it("a TLS client's redial waits for no window that only plain dials opened", () => {
    let options: { retryStrategy: (times: number) => number } | undefined;
    class FakeConnector {
      connect(): Promise<never> {
        return Promise.reject(new Error('unused'));
      }
      disconnect(): void {}
    }
    class FakeRedis {
      connector = new FakeConnector();
      constructor(o: { lazyConnect?: boolean; retryStrategy: (times: number) => number }) {
        if (o.lazyConnect !== true) options = o;
      }
      on(): this {
        return this;
      }
      listenerCount(): number {
        return 0;
      }
    }
    const key = '127.0.0.1:6380';
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 60_000 });
    for (let i = 0; i < 3; i++) breaker.admit(key, undefined, 'plain').failed(new Error('closed during the handshake'));
    const guard = new RedisGuard({ breaker, random: () => 0.5 });
    guard.ioredis(FakeRedis as unknown as typeof Redis, { host: '127.0.0.1', port: 6380, tls: {} });
    expect(options!.retryStrategy(1)).toBeLessThanOrEqual(50); // was the window: about 60 000 ms
  });
});
