/**
 * `client.duplicate()` of a guarded client is a guarded client of its own. node-redis and ioredis
 * build the copy from the parent's options, which carry the guard's gate and strategy closures
 * bound to the parent's state: the copies then reported their dials as the parent's, so one
 * restart saw "a new dial started before the last one was reported" failures, the breaker opened
 * on a 300 ms restart, and subscribers came back in 2.5-3.7 s (unguarded: ~0.3 s). Real
 * `redis-server`, killed and restarted on its port; the breaker's opens counted.
 */
import { Redis } from 'ioredis';
import { RESP_TYPES, createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();
const DUPLICATES = 4;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves once every client answers PING, or after `ms` with those that did not. */
async function allBack(clients: Array<{ ping(): Promise<unknown> }>, ms: number): Promise<number> {
  const until = Date.now() + ms;
  let missing = clients;
  while (missing.length > 0 && Date.now() < until) {
    const answers = await Promise.all(missing.map((c) => Promise.race([c.ping().then(() => true, () => false), sleep(100).then(() => false)])));
    missing = missing.filter((_, i) => !answers[i]);
    if (missing.length > 0) await sleep(50);
  }
  return missing.length;
}

/** A guarded client and what reaches it through one redis-server restart. */
interface Duplicated {
  parent: { duplicate(): Duplicated['parent']; connect(): Promise<unknown>; ping(): Promise<unknown>; on(event: 'error', listener: (e: Error) => void): unknown };
  close(client: Duplicated['parent']): void;
}

/**
 * Makes `make(guard, port)`'s parent and 4 duplicates (`duplicate(parent, i)`, default its own), connects them, restarts the server after
 * 300 ms down, and checks they are all back within 1.5 s, the breaker never opened, and no client
 * reported a sibling's dial.
 */
async function throughRestart(
  make: (guard: RedisGuard, port: number) => Duplicated,
  duplicate: (parent: Duplicated['parent'], i: number) => Duplicated['parent'] = (parent) => parent.duplicate(),
): Promise<void> {
  const server = await new RedisServer(await freePort()).start();
  cleanups.push(() => server.kill());
  const breaker = new HostBreaker();
  const { parent, close } = make(new RedisGuard({ breaker }), server.port);
  const clients = [parent, ...Array.from({ length: DUPLICATES }, (_, i) => duplicate(parent, i))];
  const errors: string[] = [];
  for (const c of clients) c.on('error', (e: Error) => void errors.push(e.message));
  cleanups.push(() => clients.forEach(close));
  await Promise.all(clients.map((c) => c.connect()));
  await server.kill();
  await sleep(300);
  await server.start();
  expect(await allBack(clients, 1_500)).toBe(0);
  expect(breaker.stats().opened).toBe(0);
  expect(errors.filter((m) => m.includes('before the last one was reported'))).toEqual([]);
}

describe('RedisGuard: duplicate() of a guarded client', () => {
  it("node-redis: 4 duplicates and their parent ride a 300 ms restart, each its own client: the breaker never opens, none reports a sibling's dial", async () => {
    await throughRestart((guard, port) => ({
      parent: guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port } }) as unknown as Duplicated['parent'],
      close: (c) => {
        const client = c as unknown as ReturnType<typeof createClient>;
        if (client.isOpen) client.destroy();
      },
    }));
  });

  it('node-redis: duplicates made through withTypeMapping(), withCommandOptions(), asap() are guarded too (was: node-redis builds those proxies on the client underneath, so they copied the parent\'s gate)', async () => {
    const nodeRedis = (guard: RedisGuard, port: number): Duplicated => ({
      parent: guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port } }) as unknown as Duplicated['parent'],
      close: (c) => {
        const client = c as unknown as ReturnType<typeof createClient>;
        if (client.isOpen) client.destroy();
      },
    });
    await throughRestart(nodeRedis, (parent, i) => {
      const p = parent as unknown as ReturnType<typeof createClient>;
      const proxies = [p.withTypeMapping({}), p.withCommandOptions({}), p.asap(), p.withTypeMapping({}).asap()];
      return proxies[i % proxies.length]!.duplicate() as unknown as Duplicated['parent'];
    });
  });

  it('node-redis: a duplicate keeps the command options of the proxy it was made from, as node-redis\'s own does', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const parent = new RedisGuard({ breaker: new HostBreaker() }).nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port } });
    const copies = [parent.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer }).duplicate(), parent.duplicate()];
    cleanups.push(() => copies.forEach((c) => c.isOpen && c.destroy()));
    for (const c of copies) await c.connect();
    await copies[1]!.set('k', 'v');
    expect(Buffer.isBuffer(await copies[0]!.get('k'))).toBe(true);
    expect(await copies[1]!.get('k')).toBe('v');
  });

  it('ioredis: 4 duplicates and their parent ride a 300 ms restart, each its own client: the breaker never opens', async () => {
    await throughRestart((guard, port) => ({
      parent: guard.ioredis(Redis, { host: '127.0.0.1', port, lazyConnect: true }) as unknown as Duplicated['parent'],
      close: (c) => (c as unknown as Redis).disconnect(),
    }));
  });
});

describe('RedisGuard: ioredis retryStrategy that is not a function', () => {
  it('false, 0 or null: the client never reconnects, as ioredis alone (was: the guard reconnected it for false and 0)', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const seen: Record<string, string> = {};
    const clients: Redis[] = [];
    for (const strategy of [false, 0, null] as const) {
      for (const kind of ['raw', 'guarded'] as const) {
        const options = { host: '127.0.0.1', port: server.port, lazyConnect: true, retryStrategy: strategy as never };
        const c = kind === 'raw' ? new Redis(options) : guard.ioredis(Redis, options);
        c.on('error', () => {});
        let reconnecting = 0;
        c.on('reconnecting', () => void reconnecting++);
        clients.push(c);
        await c.connect();
        seen[`${kind} ${String(strategy)}`] = '';
        c.once('end', () => void (seen[`${kind} ${String(strategy)}`] = `end, ${reconnecting} reconnecting`));
      }
    }
    // Not disconnect() on an ended client: ioredis then arms a disconnectTimeout timer (2 s) for a
    // stream already closed, which nothing clears (raw and guarded alike).
    cleanups.push(() => clients.forEach((c) => c.status !== 'end' && c.disconnect()));
    await server.kill();
    await sleep(500);
    expect(seen).toEqual(Object.fromEntries(Object.keys(seen).map((k) => [k, 'end, 0 reconnecting'])));
  });
});
