/**
 * node-redis client pools, guarded: `guard.nodeRedisPool(createClientPool, ...)` and a guarded
 * client's `createPool()`. node-redis builds every member of a pool from one options object, so
 * the members shared the parent client's gate state: each member's dial settled the one before it
 * as failed ("a new dial started before the last one was reported"). Found from outside, then
 * reproduced: a pool of 10 on a healthy `redis-server` opened the breaker while it connected
 * (2.9 s, 6 failures counted), and after a 300 ms restart it was not back within 10 s. Real
 * `redis-server`; a reset-on-accept peer counts the dials to a dead node.
 */
import { createClient, createClientPool } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { acceptAndHold, resetOnAccept } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();
const MEMBERS = 10;

type Pool = ReturnType<typeof createClientPool>;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The two ways to a guarded pool: the guard's factory, and a guarded client's `createPool()`. */
const makers: Array<[string, (guard: RedisGuard, port: number, host?: string) => Pool]> = [
  ['guard.nodeRedisPool(createClientPool)', (guard, port, host = '127.0.0.1') => guard.nodeRedisPool(createClientPool, { socket: { host, port } }, { minimum: MEMBERS })],
  [
    'guardedClient.createPool()',
    (guard, port, host = '127.0.0.1') => (guard.nodeRedis(createClient, { socket: { host, port } }) as unknown as { createPool(o: object): Pool }).createPool({ minimum: MEMBERS }),
  ],
];

/** A real redis-server and a guarded pool made by `make` on a breaker of its own, connected; the errors it emits. */
async function connected(make: (typeof makers)[number][1]): Promise<{ server: RedisServer; breaker: HostBreaker; pool: Pool; errors: string[] }> {
  const server = await new RedisServer(await freePort()).start();
  cleanups.push(() => server.kill());
  const breaker = new HostBreaker();
  const pool = make(new RedisGuard({ breaker }), server.port);
  const errors: string[] = [];
  pool.on('error', (e: Error) => void errors.push(e.message));
  cleanups.push(() => pool.isOpen && pool.destroy());
  await pool.connect();
  return { server, breaker, pool, errors };
}

describe('RedisGuard: node-redis client pools', () => {
  it('disableClientInfo: true (members send nothing as they connect): idle members and a BLPOP longer than the connect timeout live, no dial counted failed (was: each killed at connectTimeout, the node opened)', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 200 });
    const pool = guard.nodeRedisPool(createClientPool, { disableClientInfo: true, socket: { host: '127.0.0.1', port: server.port } }, { minimum: 3 });
    const errors: string[] = [];
    pool.on('error', (e: Error) => void errors.push(e.message));
    cleanups.push(() => pool.isOpen && pool.destroy());
    await pool.connect();
    await sleep(600); // three connect timeouts, idle
    expect(await pool.blPop('dialguard-q', 0.5)).toBeNull(); // blocks 500 ms: no byte meanwhile
    expect(await pool.ping()).toBe('PONG');
    expect(errors).toEqual([]);
    expect(breaker.stats()).toMatchObject({ succeeded: 3, failed: 0, opened: 0 });
  });

  for (const [name, make] of makers) {
    it(`${name}: ${MEMBERS} members connect to a healthy node, each dial a success of its own (was: 6 counted failed, the node opened, 2.9 s)`, async () => {
      const { breaker, pool, errors } = await connected(make);
      expect(pool.totalClients).toBe(MEMBERS);
      expect(await pool.ping()).toBe('PONG');
      expect(breaker.stats()).toMatchObject({ succeeded: MEMBERS, failed: 0, opened: 0, abandoned: 0 });
      expect(errors).toEqual([]);
    });

    it(`${name}: a 300 ms restart: every member serves again within 1.5 s and the node never opens (was: not back in 10 s)`, async () => {
      const { server, breaker, pool, errors } = await connected(make);
      await server.kill();
      await sleep(300);
      await server.start();
      const restarted = performance.now();
      let back = false;
      for (let i = 0; i < 150 && !back; i++) {
        // Every member at once: ping() borrows an idle member per call, so 10 in flight use all 10.
        back = await Promise.all(Array.from({ length: MEMBERS }, () => pool.ping())).then(
          () => true,
          () => false,
        );
        if (!back) await sleep(10);
      }
      expect(back).toBe(true);
      expect(performance.now() - restarted).toBeLessThan(1_500);
      expect(breaker.stats().opened).toBe(0);
      expect(errors.filter((m) => m.includes('before the last one was reported'))).toEqual([]);
    });
  }

  it('a dead node (every connection reset): the pool members redial in shared rounds, then one probe per window; a plain pool redials on its own', async () => {
    const peer = await resetOnAccept();
    cleanups.push(() => peer.close());
    const count = async (make: () => Pool): Promise<number> => {
      const before = peer.attempts;
      const pool = make();
      pool.on('error', () => {});
      pool.connect().catch(() => {});
      await sleep(2_000);
      pool.destroy();
      return peer.attempts - before;
    };
    const plain = await count(() => createClientPool({ socket: { host: '127.0.0.1', port: peer.port } }, { minimum: MEMBERS }));
    const breaker = new HostBreaker({ openDuration: 500 });
    const guarded = await count(() => new RedisGuard({ breaker }).nodeRedisPool(createClientPool, { socket: { host: '127.0.0.1', port: peer.port } }, { minimum: MEMBERS }));
    expect(breaker.stats().opened).toBeGreaterThanOrEqual(1);
    // Plain: each of 10 members on node-redis's own 50 ms doubling, ~60 in 2 s. Guarded: the 10
    // first dials, then one round at a time for all 10 until the node opens (rounds grow by
    // 25-50 ms: at most 10 in its 1.5 s minimum outage), then a probe per 500 ms window.
    expect(plain).toBeGreaterThanOrEqual(4 * MEMBERS);
    expect(guarded).toBeLessThanOrEqual(MEMBERS + 11);
  });

  it('a pool destroyed while a member dial waits in the handshake (accept-and-hold): the dial is abandoned, not failed', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker();
    const pool = new RedisGuard({ breaker, connectTimeout: 2_000 }).nodeRedisPool(createClientPool, { socket: { host: '127.0.0.1', port: peer.port } }, { minimum: 1 });
    pool.on('error', () => {});
    pool.connect().catch(() => {});
    await expect.poll(() => peer.attempts, { timeout: 2_000, interval: 10 }).toBe(1);
    pool.destroy();
    await expect.poll(() => breaker.stats().abandoned, { timeout: 1_000, interval: 10 }).toBe(1);
    expect(breaker.stats().failed).toBe(0);
  });

  it("a url's database and password reach every member, as node-redis reads them (the guard moves them out of the url it replaces)", async () => {
    const server = await new RedisServer(await freePort(), ['--requirepass', 'sesame']).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const pool = new RedisGuard({ breaker }).nodeRedisPool(createClientPool, { url: `redis://:sesame@127.0.0.1:${server.port}/3` }, { minimum: 2 });
    pool.on('error', () => {});
    cleanups.push(() => pool.isOpen && pool.destroy());
    await pool.connect();
    await pool.set('k', 'in db 3');
    const plain = createClient({ url: `redis://:sesame@127.0.0.1:${server.port}/3` });
    plain.on('error', () => {});
    cleanups.push(() => plain.isOpen && plain.destroy());
    await plain.connect();
    expect(await plain.get('k')).toBe('in db 3');
    expect(breaker.stats()).toMatchObject({ succeeded: 2, failed: 0 });
  });

  it('TLS members are not gated (Node publishes no TLS socket to report from): the options reach createClientPool as given', () => {
    const seen: unknown[] = [];
    const options = { socket: { host: '127.0.0.1', port: 6380, tls: true as const } };
    new RedisGuard({ breaker: new HostBreaker() }).nodeRedisPool((o: unknown, p: unknown) => seen.push(o, p), options, { minimum: 2 });
    expect(seen).toEqual([options, { minimum: 2 }]);
  });
});
