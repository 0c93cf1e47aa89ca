/**
 * `guard.ioredis(Redis, ...args)` takes what `new Redis(...args)` takes, read as ioredis reads it,
 * and a unix socket client is filed by its path. Before (an outside review): a URL or a port was
 * spread as options, so `guard.ioredis(Redis, 'redis://127.0.0.1:P/0')` and
 * `guard.ioredis(Redis, P)` dialled localhost:6379, a server the user never named; and a
 * `{ path }` client was filed under localhost:6379, refused while that TCP node was open, with an
 * error naming an address it never dials. Real `redis-server`s, each answering with its own port.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

/** The port the server a client reaches says it listens on, or the error's message. */
async function servedBy(client: Redis): Promise<string> {
  try {
    const info = await client.info('server');
    return /tcp_port:(\d+)/.exec(info)?.[1] ?? 'no tcp_port';
  } catch (err) {
    return `failed: ${(err as Error).message}`;
  }
}

function closing(client: Redis): Redis {
  client.on('error', () => {});
  cleanups.push(() => client.disconnect());
  return client;
}

describe('RedisGuard.ioredis: the arguments new Redis() takes', () => {
  it('a URL, a port, a port and a host, each with options after it: the node ioredis itself dials, filed under it', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const p = server.port;
    const forms: Array<[string, unknown[]]> = [
      ['url', [`redis://127.0.0.1:${p}/2`]],
      ['url + options', [`redis://127.0.0.1:${p}`, { db: 3, maxRetriesPerRequest: 1 }]],
      ['port', [p]],
      ['port + options', [p, { maxRetriesPerRequest: 1 }]],
      ['port + host', [p, '127.0.0.1']],
      ['port + host + options', [p, '127.0.0.1', { db: 1 }]],
      ['host:port without a scheme', [`127.0.0.1:${p}`]],
    ];
    for (const [form, args] of forms) {
      const breaker = new HostBreaker();
      const guard = new RedisGuard({ breaker });
      const plain = closing(new (Redis as unknown as new (...a: unknown[]) => Redis)(...args));
      const guarded = closing(guard.ioredis(Redis, ...(args as [number])));
      // What ioredis made of the arguments, the same for both.
      for (const key of ['host', 'port', 'db', 'maxRetriesPerRequest'] as const) expect([form, key, guarded.options[key]]).toEqual([form, key, plain.options[key]]);
      expect([form, await servedBy(guarded)]).toEqual([form, String(p)]);
      expect([form, await servedBy(plain)]).toEqual([form, String(p)]);
      // Its dial was filed under the node it reached (a port alone: localhost, as ioredis dials
      // it), never under localhost:6379.
      expect([form, breaker.state(guarded.options.host!, p)?.state]).toEqual([form, 'closed']);
      expect(breaker.state('localhost', 6379)).toBeUndefined();
      // A duplicate reaches the same node (ioredis builds it from the client's options).
      const copy = closing(guarded.duplicate());
      expect([form, 'duplicate', await servedBy(copy)]).toEqual([form, 'duplicate', String(p)]);
    }
  });

  it('a unix socket client is filed by its path: localhost:6379 open does not refuse it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dialguard-redis-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const sock = join(dir, 'redis.sock');
    const server = await new RedisServer(await freePort(), ['--unixsocket', sock, '--unixsocketperm', '700']).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker });
    cleanups.push(breaker.isolate('localhost:6379')); // the TCP node the old key named: refused
    for (const args of [[{ path: sock, maxRetriesPerRequest: 1 }], [sock]] as const) {
      const client = closing(guard.ioredis(Redis, ...(args as [string])));
      expect(await client.ping()).toBe('PONG');
      expect(breaker.state(sock)?.state).toBe('closed');
    }
  });

  it('an argument ioredis does not take is a TypeError naming it, before anything is made', () => {
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    expect(() => guard.ioredis(Redis, true as never)).toThrow(new TypeError('an ioredis argument must be a port, a URL or path, a host or an options object, got true'));
    expect(() => (guard.ioredis as (...a: unknown[]) => unknown)(Redis, 1, 'h', {}, {})).toThrow(/at most three arguments/);
  });
});
