/**
 * node-redis reads a `url` over the explicit options (it assigns what it parsed over them): the
 * url's password and database win. The guard, which moves the url into options to keep its own
 * `socket.host`, let the explicit ones win: `{ url: '.../3', database: 0 }` wrote to db 0, and a
 * url's password lost to a stale `password` (WRONGPASS where the plain client connects). Now as
 * node-redis, and its TypeErrors for a `socket.tls` contradicting the scheme and for a bad scheme.
 * Against a real `redis-server` with a password.
 */
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe('RedisGuard + node-redis: the url over explicit options, as node-redis reads it', () => {
  it("the url's password and database win over stale explicit ones, for the plain and the guarded client alike", async () => {
    const server = await new RedisServer(await freePort(), ['--requirepass', 'right']).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const options = { url: `redis://:right@127.0.0.1:${server.port}/3`, password: 'old', database: 0, socket: { reconnectStrategy: false as const } };
    const seen: Record<string, string | undefined> = {};
    for (const [name, client] of [
      ['plain', createClient({ ...options, socket: { ...options.socket } })],
      ['guarded', guard.nodeRedis(createClient, { ...options, socket: { ...options.socket } })],
    ] as const) {
      client.on('error', () => {});
      await client.connect(); // guarded was: WRONGPASS
      cleanups.push(() => client.isOpen && client.destroy());
      seen[name] = / db=(\d+)/.exec(String(await client.sendCommand(['CLIENT', 'INFO'])))?.[1];
    }
    expect(seen).toEqual({ plain: '3', guarded: '3' });
  });

  it('a socket.tls contradicting the scheme, and a scheme that is not redis, are the TypeErrors node-redis throws', () => {
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    for (const options of [
      { url: 'rediss://127.0.0.1:6390', socket: { tls: false } },
      { url: 'redis://127.0.0.1:6390', socket: { tls: true } },
      { url: 'http://127.0.0.1:6390' },
      { url: 'redis://127.0.0.1:6390/x' },
    ]) {
      let plain: unknown;
      try {
        createClient(options as never);
      } catch (e) {
        plain = e;
      }
      expect(plain).toBeInstanceOf(TypeError);
      expect(() => guard.nodeRedis(createClient, options as never)).toThrow((plain as Error).message);
    }
  });
});
