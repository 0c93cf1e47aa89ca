/**
 * RedisGuard's cluster node connections on src/testing's accept-and-hold peer (TCP connects,
 * nothing is ever answered), as a cluster's seed node. TCP connected is not a live node: a node
 * connection that received nothing `connectTimeout` after its dial began is a failed dial
 * (`ConnectTimeoutError`, phase 'handshake'), as for single-node clients (`handshake.ts`).
 */
import { Cluster, Redis } from 'ioredis';
import { createCluster } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { ConnectTimeoutError, TransportClosedError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();

describe('RedisGuard clusters, a seed node that accepts and holds: a held handshake is a failed dial', () => {
  it('ioredis Cluster: its held node connection is a failed dial after connectTimeout, never a success', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const cluster = new Cluster(
      [{ host: '127.0.0.1', port: peer.port }],
      guard.ioredisCluster(Redis, { slotsRefreshTimeout: 5_000, clusterRetryStrategy: () => null, lazyConnect: true }),
    );
    cluster.on('error', () => {});
    const started = performance.now();
    cluster.connect().catch(() => {});
    cleanups.push(() => cluster.disconnect());
    await expect.poll(() => breaker.stats().failed, { timeout: 3_000, interval: 20 }).toBeGreaterThanOrEqual(1);
    expect(breaker.stats().succeeded).toBe(0);
    expect(peer.attempts).toBeGreaterThanOrEqual(1);
    // Not before the bound: the node connected at once, and nothing else (ioredis's own
    // slotsRefreshTimeout is 5 s) ends the held connection.
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('node-redis createCluster: its held root node client is a failed dial after connectTimeout (ConnectTimeoutError, handshake), never a success', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const cluster = guard.nodeRedisCluster(createCluster, { rootNodes: [{ url: `redis://127.0.0.1:${peer.port}` }] });
    const errors: unknown[] = [];
    cluster.on('error', (err: unknown) => errors.push(err));
    const connecting = cluster.connect().catch((err: unknown) => errors.push(err));
    cleanups.push(async () => {
      cluster.destroy();
      await connecting;
    });
    await expect.poll(() => breaker.stats().failed, { timeout: 3_000, interval: 20 }).toBeGreaterThanOrEqual(1);
    expect(breaker.stats().succeeded).toBe(0);
    // node-redis wrote its queued commands behind the handshake: maybe sent, the timeout the cause.
    const timeouts = errors.map((e) => (e instanceof TransportClosedError ? e.cause : e)).filter((e): e is ConnectTimeoutError => e instanceof ConnectTimeoutError);
    expect(timeouts.length).toBeGreaterThanOrEqual(1);
    expect(timeouts[0]!.phase).toBe('handshake');
  });
});
