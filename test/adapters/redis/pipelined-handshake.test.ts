/**
 * node-redis writes the commands queued while it connects behind its handshake, without waiting
 * for the handshake's replies. Against a node that is busy or frozen (a long script, SIGSTOP) the
 * guard's handshake bound ends the dial, but those commands were sent: the node runs them once it
 * is free. They failed with a `ConnectTimeoutError`, which says nothing was sent, so `retry()`
 * sent a non-idempotent INCR again and the node ran it twice. Now they fail with a
 * `TransportClosedError` (the timeout its cause): maybe sent, not retried. The dial still counts
 * as failed for the breaker. Against a real `redis-server`, frozen with SIGSTOP.
 */
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { classify } from '../../../src/core/classify.js';
import { ConnectTimeoutError, TransportClosedError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { retry } from '../../../src/retry/retry.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

describe('RedisGuard + node-redis: commands written behind an unanswered handshake', () => {
  it('an INCR queued while connecting to a frozen node fails as maybe sent; retry() does not resend it, and the node runs it once', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    await server.freeze();
    const client = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port, reconnectStrategy: false as const } });
    client.on('error', () => {});
    cleanups.push(() => {
      if (client.isOpen) client.destroy();
    });
    const connecting = client.connect().catch((e: unknown) => e);
    let attempts = 0;
    const error = await retry(
      () => {
        attempts++;
        return client.incr('counter');
      },
      { timeout: 3_000, maxAttempts: 3, backoff: () => 0, budget: null },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    await connecting;
    expect(error).toBeInstanceOf(TransportClosedError); // was ConnectTimeoutError, "nothing sent"
    expect((error as Error).cause).toBeInstanceOf(ConnectTimeoutError);
    expect((error as { cause: ConnectTimeoutError }).cause.phase).toBe('handshake');
    expect(classify(error)).toMatchObject({ notSent: false });
    expect(attempts).toBe(1); // was 2
    expect(breaker.stats()).toMatchObject({ failed: 1 }); // the dial still failed
    await server.thaw();
    const reader = createClient({ socket: { host: '127.0.0.1', port: server.port } });
    await reader.connect();
    cleanups.push(() => reader.destroy());
    expect(await reader.get('counter')).toBe('1'); // the INCR that was sent ran, once (was 2)
  });
});
