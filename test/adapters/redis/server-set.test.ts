/**
 * A ServerSet over two guarded redis clients, one per node, offline queues off (as a failover set
 * wants: a command for a node that is down fails at once instead of waiting for it), the set and
 * the guard on one breaker. Found by an outside review: with node A killed and B healthy, 18 of 20
 * ioredis calls and 15 of 20 node-redis calls failed on A, because the clients' "not sent,
 * offline" errors classified `unknown`, so the set neither tried B nor moved A back. Now every
 * call is served by B. Real `redis-server`s.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ServerSet } from '../../../src/retry/server-set.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

type Ask = (server: string) => Promise<string>;

/** Two guarded clients of `lib`, one per port; a function asking the one for `server` which port answers. */
async function clients(lib: 'ioredis' | 'node-redis', guard: RedisGuard, ports: readonly number[]): Promise<Ask> {
  const byServer = new Map<string, Ask>();
  for (const port of ports) {
    const key = `127.0.0.1:${port}`;
    if (lib === 'ioredis') {
      const c = guard.ioredis(Redis, { host: '127.0.0.1', port, enableOfflineQueue: false, maxRetriesPerRequest: 0 }) as unknown as Redis;
      c.on('error', () => {});
      cleanups.push(() => c.disconnect());
      await new Promise((resolve) => c.once('ready', resolve));
      byServer.set(key, async () => ((await c.call('CONFIG', 'GET', 'port')) as string[])[1]!);
    } else {
      const c = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port }, disableOfflineQueue: true });
      c.on('error', () => {});
      cleanups.push(() => (c.isOpen ? c.destroy() : undefined));
      await c.connect();
      byServer.set(key, async () => ((await c.sendCommand(['CONFIG', 'GET', 'port'])) as string[])[1]!);
    }
  }
  return (server) => byServer.get(server)!(server);
}

describe('ServerSet over two guarded redis clients: one node dies', () => {
  it.each(['ioredis', 'node-redis'] as const)('%s: with A killed, every call is served by B (was: most failed on A)', async (lib) => {
    const a = await new RedisServer(await freePort()).start();
    const b = await new RedisServer(await freePort()).start();
    cleanups.push(() => a.kill(), () => b.kill());
    const breaker = new HostBreaker();
    const ask = await clients(lib, new RedisGuard({ breaker }), [a.port, b.port]);
    const set = new ServerSet([`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`], { breaker });
    const call = (): Promise<string> => set.run((server) => ask(server), { timeout: 1_000 }).catch((e: unknown) => (e as Error).name);
    expect(await call()).toBe(String(a.port));
    await a.kill();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const answers: string[] = [];
    for (let i = 0; i < 10; i++) {
      answers.push(await call());
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(answers).toEqual(Array(10).fill(String(b.port)));
  });
});
