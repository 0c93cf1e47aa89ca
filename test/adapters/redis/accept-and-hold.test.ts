/**
 * RedisGuard with ioredis against src/testing's accept-and-hold peer: TCP connects, nothing is
 * ever answered. ioredis's own `connectTimeout` ends at TCP connect and its ready check (INFO) has
 * no bound, so a plain client sits in 'connect' and its commands wait forever. The guard bounds
 * the whole dial: a held connection is a failed dial after `connectTimeout`, and ioredis's own
 * retry settings then decide when a waiting command fails. node-redis's handshake (CLIENT SETINFO)
 * is likewise unbounded, and likewise bounded by the guard.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { ConnectTimeoutError, TransportClosedError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Settles to 'ok', the rejection, or 'pending' if neither came within `ms`. */
function within(p: Promise<unknown>, ms: number): Promise<unknown> {
  return Promise.race([p.then(() => 'ok', (err: unknown) => err), sleep(ms).then(() => 'pending')]);
}

describe('RedisGuard with ioredis on an accept-and-hold node (ready check never answered)', () => {
  it('a command with maxRetriesPerRequest 1 fails within 3 s instead of waiting forever; each held dial is one failed dial for the breaker, a ConnectTimeoutError in the handshake phase', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const errors: unknown[] = [];
    const plain = new Redis({ host: '127.0.0.1', port: peer.port, connectTimeout: 300, maxRetriesPerRequest: 1 });
    plain.on('error', () => {});
    cleanups.push(() => plain.disconnect());
    await expect.poll(() => peer.attempts, { timeout: 2_000, interval: 10 }).toBe(1); // the plain client's dial
    const client = guard.ioredis(Redis, { host: '127.0.0.1', port: peer.port, maxRetriesPerRequest: 1 });
    client.on('error', (err: unknown) => errors.push(err));
    cleanups.push(() => client.disconnect());
    let dialsAtFailure = 0;
    const guardedPing = client.ping().finally(() => {
      dialsAtFailure = peer.attempts - 1;
    });
    const [guarded, unguarded] = await Promise.all([within(guardedPing, 3_000), within(plain.ping(), 3_000)]);
    // Unguarded, the same settings: the ping still waits, on the one dial it ever made.
    expect(unguarded).toBe('pending');
    expect(plain.status).toBe('connect');
    expect((guarded as Error).name).toBe('MaxRetriesPerRequestError');
    // node-redis wrote its queued commands behind the handshake: maybe sent, the timeout the cause.
    const timeouts = errors.map((e) => (e instanceof TransportClosedError ? e.cause : e)).filter((e): e is ConnectTimeoutError => e instanceof ConnectTimeoutError);
    expect(timeouts.length).toBeGreaterThanOrEqual(1);
    expect(timeouts[0]!.phase).toBe('handshake');
    expect(timeouts[0]!.host).toBe(`127.0.0.1:${peer.port}`);
    // The guarded client's dials when its ping failed: the first and its one retry, each held
    // until the guard's bound and counted by the breaker as failed.
    expect(dialsAtFailure).toBe(2);
    expect(breaker.stats().failed).toBeGreaterThanOrEqual(2);
    expect(breaker.stats().succeeded).toBe(0);
  });
});

describe('RedisGuard with node-redis on an accept-and-hold node (handshake never answered)', () => {
  it('each guarded dial fails after connectTimeout (ConnectTimeoutError, handshake, counted by the breaker) and the client redials; a plain client sits on its one dial; after 1.5 s neither is ready', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const plain = createClient({ socket: { host: '127.0.0.1', port: peer.port, connectTimeout: 300 } });
    plain.on('error', () => {});
    cleanups.push(() => plain.isOpen && plain.destroy());
    plain.connect().catch(() => {});
    await expect.poll(() => peer.attempts, { timeout: 2_000, interval: 10 }).toBe(1); // the plain client's dial
    const errors: unknown[] = [];
    const client = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: peer.port } });
    client.on('error', (err: unknown) => errors.push(err));
    cleanups.push(() => client.isOpen && client.destroy());
    client.connect().catch(() => {});
    await sleep(1_500);
    expect([plain.isReady, client.isReady]).toEqual([false, false]);
    // node-redis wrote its queued commands behind the handshake: maybe sent, the timeout the cause.
    const timeouts = errors.map((e) => (e instanceof TransportClosedError ? e.cause : e)).filter((e): e is ConnectTimeoutError => e instanceof ConnectTimeoutError);
    expect(timeouts.length).toBeGreaterThanOrEqual(2);
    expect(timeouts[0]!.phase).toBe('handshake');
    // Every guarded dial but the one in flight was reported failed; the plain one never redials.
    const guardedDials = peer.attempts - 1;
    expect(guardedDials).toBeGreaterThanOrEqual(2);
    expect(breaker.stats().failed).toBeGreaterThanOrEqual(guardedDials - 1);
    expect(breaker.stats().succeeded).toBe(0);
  });
});
