/**
 * A redis node whose SYNs vanish (src/testing's accept-queue blackhole): the dial never gets a
 * TCP connection, so nothing was sent. The guard's handshake bound (armed when the dial begins)
 * fired first and called it a timeout in the 'handshake' phase, and for node-redis a maybe-sent
 * `TransportClosedError` ("commands sent behind it may run"): an outside review, where undici's
 * adapter on the same port said 'tcp'. A client's queued writes count in `bytesWritten` before
 * they leave, which also made the breaker's dial report say 'handshake'. Now 'tcp', not sent.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { classify } from '../../../src/core/classify.js';
import { ConnectTimeoutError, TransportClosedError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();

/** The phases of the failed dials to `host` reported on `dialguard:dial:settled` while the test runs. */
function failedPhases(host: string): string[] {
  const phases: string[] = [];
  const onSettled = (m: unknown): void => {
    const e = m as { host: string; outcome: string; phase: string };
    if (e.host === host && e.outcome === 'failed') phases.push(e.phase);
  };
  diagnosticsChannel.subscribe('dialguard:dial:settled', onSettled);
  cleanups.push(() => diagnosticsChannel.unsubscribe('dialguard:dial:settled', onSettled));
  return phases;
}

describe('RedisGuard on a blackholed node (the TCP connect never completes)', () => {
  it('node-redis: the dial fails as a ConnectTimeoutError in the tcp phase, not sent; its dial is reported failed at tcp', async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const phases = failedPhases(`${hole.host}:${hole.port}`);
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const client = guard.nodeRedis(createClient, { socket: { host: hole.host, port: hole.port, connectTimeout: 300, reconnectStrategy: false as const } });
    client.on('error', () => {});
    cleanups.push(() => client.isOpen && client.destroy());
    const error = await client.connect().then(() => undefined, (err: unknown) => err);
    expect(error).not.toBeInstanceOf(TransportClosedError); // was: "commands sent behind it may run"
    const timeout = error instanceof ConnectTimeoutError ? error : (error as { cause?: unknown }).cause;
    expect(timeout).toBeInstanceOf(ConnectTimeoutError);
    expect((timeout as ConnectTimeoutError).phase).toBe('tcp');
    expect(classify(error).notSent).toBe(true);
    expect(phases).toEqual(['tcp']);
  });

  it('ioredis: likewise tcp, not handshake', async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const errors: unknown[] = [];
    const client = guard.ioredis(Redis, { host: hole.host, port: hole.port, connectTimeout: 300, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', (err: unknown) => errors.push(err));
    cleanups.push(() => client.disconnect());
    await client.ping().catch(() => {});
    const timeouts = errors.filter((e): e is ConnectTimeoutError => e instanceof ConnectTimeoutError);
    expect(timeouts.length).toBe(1);
    expect(timeouts[0]!.phase).toBe('tcp');
    expect(classify(timeouts[0]).notSent).toBe(true);
  });
});

describe('RedisGuard, ioredis with tls, on an accept-and-hold node (TCP up, the TLS handshake never answered)', () => {
  it('the dial times out in the tls phase, not sent, and is reported failed at tls (was: handshake, and tcp)', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const phases = failedPhases(`127.0.0.1:${peer.port}`);
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const errors: unknown[] = [];
    const client = guard.ioredis(Redis, { host: '127.0.0.1', port: peer.port, tls: {}, connectTimeout: 300, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', (err: unknown) => errors.push(err));
    cleanups.push(() => client.disconnect());
    await client.ping().catch(() => {});
    const timeouts = errors.filter((e): e is ConnectTimeoutError => e instanceof ConnectTimeoutError);
    expect(timeouts.length).toBe(1);
    expect(timeouts[0]!.phase).toBe('tls');
    expect(classify(timeouts[0]).notSent).toBe(true);
    expect(phases).toEqual(['tls']);
  });
});
