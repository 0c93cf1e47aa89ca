/**
 * node-redis gives up on a socket timeout by default (`socketTimeout` passed with no reply: its
 * default strategy answers false, and the client closes). A guarded client with no strategy of
 * its own always answered a delay, so it redialled, stayed open and served later commands where
 * the plain client had closed (an outside review: 4 reconnects against a node frozen 4 s, 0 for
 * plain). Pool members and cluster nodes take the same rule. Against a real `redis-server`.
 */
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe('RedisGuard (node-redis): a socket timeout with no strategy of its own', () => {
  it.each(['plain', 'guarded'] as const)('%s: BLPOP past socketTimeout fails with SocketTimeoutError, the client closes, and a later command gets ClientClosedError', { timeout: 10_000 }, async (lane) => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const options = { socket: { host: '127.0.0.1', port: server.port, socketTimeout: 300 } };
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const client = lane === 'plain' ? createClient(options) : guard.nodeRedis(createClient, options);
    let reconnecting = 0;
    client.on('error', () => {});
    client.on('reconnecting', () => void reconnecting++);
    cleanups.push(() => client.isOpen && client.destroy());
    await client.connect();
    const err = await client.blPop('q', 2).catch((e: unknown) => e);
    expect((err as Error).constructor.name).toBe('SocketTimeoutError');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(client.isOpen).toBe(false); // guarded was: true, redialled
    expect(reconnecting).toBe(0);
    const later = await client.incr('k').catch((e: unknown) => e);
    expect((later as Error).constructor.name).toBe('ClientClosedError'); // guarded was: 1
  });
});
