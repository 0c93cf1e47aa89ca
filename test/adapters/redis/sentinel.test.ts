/**
 * ioredis in Sentinel mode through RedisGuard: the client asks its sentinels for the master and
 * dials that address, gated by the breaker under the master's own key. A real master and a real
 * sentinel (`redis-server --sentinel`) on loopback. Before, the guard built its connector on
 * ioredis's standalone one whatever the options, so a guarded Sentinel client dialled
 * localhost:6379 (whatever listened there, or nothing) and never the master.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort, startSentinel } from './redis-server.js';

const cleanups = leakCheckEach();

/** Connections the server at `port` has accepted so far (its own count, so every dial to it). */
function connectionsReceived(port: number): number {
  const info = spawnSync('redis-cli', ['-p', String(port), 'info', 'stats'], { encoding: 'utf8' }).stdout;
  return Number(/total_connections_received:(\d+)/.exec(info)?.[1]);
}

/** A master and one sentinel watching it as `mymaster`. */
async function sentinelSetup(): Promise<{ master: RedisServer; sentinels: Array<{ host: string; port: number }> }> {
  const dir = mkdtempSync(join(tmpdir(), 'dialguard-sentinel-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const master = await new RedisServer(await freePort()).start();
  cleanups.push(() => master.kill());
  const sentinel = await startSentinel(await freePort(), master.port, 'mymaster', dir);
  cleanups.push(() => sentinel.kill());
  return { master, sentinels: [{ host: '127.0.0.1', port: sentinel.port }] };
}

describe('RedisGuard: ioredis with sentinels', () => {
  it('reaches the master the sentinels name, its dial filed under the master address (was: localhost:6379, never the master)', async () => {
    const { master, sentinels } = await sentinelSetup();
    const breaker = new HostBreaker();
    const client = new RedisGuard({ breaker }).ioredis(Redis, { sentinels, name: 'mymaster', maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    cleanups.push(() => client.disconnect());
    const before = connectionsReceived(master.port);
    expect(await client.ping()).toBe('PONG'); // was: ECONNREFUSED 127.0.0.1:6379
    expect(connectionsReceived(master.port)).toBeGreaterThan(before);
    expect(breaker.state(`127.0.0.1:${master.port}`)?.state).toBe('closed');
    expect(breaker.state('localhost:6379')).toBeUndefined();
    expect(breaker.stats()).toMatchObject({ succeeded: 1, failed: 0 });
  });

  it('while the master is refused, its dial fails at once with HostUnavailableError and no connection reaches it', async () => {
    const { master, sentinels } = await sentinelSetup();
    const breaker = new HostBreaker();
    const release = breaker.isolate(`127.0.0.1:${master.port}`, 60_000);
    cleanups.push(release);
    const client = new RedisGuard({ breaker }).ioredis(Redis, { sentinels, name: 'mymaster', maxRetriesPerRequest: 0 });
    const errors: unknown[] = [];
    client.on('error', (err: unknown) => void errors.push(err));
    cleanups.push(() => client.disconnect());
    const before = connectionsReceived(master.port);
    await expect(client.ping()).rejects.toThrow();
    expect(errors[0]).toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats().refused).toBeGreaterThanOrEqual(1);
    // Only redis-cli's own INFO connection: the client never reached the master.
    expect(connectionsReceived(master.port)).toBe(before + 1);
  });

  it('a Connector of the user\'s is used as given (ioredis ignores sentinels then, as unguarded)', () => {
    class Mine {
      connect(): Promise<never> {
        return new Promise(() => {});
      }
    }
    const client = new RedisGuard({ breaker: new HostBreaker() }).ioredis(Redis, { sentinels: [{ host: '127.0.0.1', port: 1 }], name: 'm', lazyConnect: true, Connector: Mine });
    const connector = (client as unknown as { connector: object }).connector;
    expect(connector).toBeInstanceOf(Mine);
    client.disconnect();
  });
});
