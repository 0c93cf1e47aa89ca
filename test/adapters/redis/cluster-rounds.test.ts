/**
 * RedisGuard's cluster factories during the first 1.5 s of a node's outage (breaker defaults:
 * minOutage 1 500 ms, so the breaker cannot open yet). A process with several cluster clients has
 * one connection per node per cluster, each with its own redials (node-redis: a reconnect loop per
 * node client; ioredis: a new connection per command batch to a node the slots still name). The
 * guard puts them in the same redial rounds as single-node clients, keyed by the node's address:
 * one dial per round whatever the number of clusters. Real 3-master `redis-server` cluster on
 * loopback; one master SIGKILLed; refused dials to its port counted from net's client-socket channel.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { mkdtempSync, rmSync } from 'node:fs';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { createCluster } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { freePort, nodeOf, startCluster } from './redis-server.js';

const cleanups = leakCheckEach();
const CLUSTERS = 5;
/** The breaker's default minimum outage: the window in which it cannot open yet. */
const MIN_OUTAGE = 1_500;
/** As for single-node clients (outage.test.ts): at most 10 rounds fit in 1.5 s, 2 of slack. */
const MOST_DIALS = 12;

/**
 * Counts refused dials per port, from every TCP socket this process opens. A refused dial's error
 * is a new object; a socket failed by the guard with the last round's error (no I/O) carries that
 * same object again, and is not a dial.
 */
function refusedDials(): { count(port: number): number } {
  const counts = new Map<number, number>();
  const seen = new WeakSet<Error>();
  const onSocket = (message: unknown): void => {
    const { socket } = message as { socket: net.Socket };
    socket.once('error', (err: Error & { code?: string; port?: number }) => {
      if (seen.has(err)) return;
      seen.add(err);
      if (err.code === 'ECONNREFUSED' && err.port !== undefined) counts.set(err.port, (counts.get(err.port) ?? 0) + 1);
    });
  };
  diagnosticsChannel.subscribe('net.client.socket', onSocket);
  cleanups.push(() => diagnosticsChannel.unsubscribe('net.client.socket', onSocket));
  return { count: (port) => counts.get(port) ?? 0 };
}

/** Reads every key from every cluster each 50 ms for `ms`; counts the reads that succeeded. */
async function readFor(clusters: ReadonlyArray<{ get(key: string): Promise<unknown> }>, keys: readonly string[], ms: number): Promise<number> {
  let ok = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const results = await Promise.allSettled(clusters.flatMap((c) => keys.map((k) => c.get(k))));
    ok += results.filter((r) => r.status === 'fulfilled').length;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return ok;
}

/**
 * Kills the node and reads for the first MIN_OUTAGE of its outage. Dials are counted from the
 * kill itself: a client may redial while the kill is still being awaited (on a loaded machine that
 * first round was all there was to see, and the count read 0).
 */
async function killAndRead(
  clusters: ReadonlyArray<{ get(key: string): Promise<unknown> }>,
  keys: readonly string[],
  kill: () => Promise<void>,
): Promise<{ dials: { count(port: number): number }; ok: number }> {
  const dials = refusedDials();
  await kill();
  return { dials, ok: await readFor(clusters, keys, MIN_OUTAGE) };
}

async function cluster3(): Promise<{ ports: number[]; dead: number; keys: string[]; live: string[]; kill(): Promise<void>; restart(): Promise<unknown> }> {
  const dir = mkdtempSync(join(tmpdir(), 'dialguard-redis-cluster-'));
  const ports = [await freePort(), await freePort(), await freePort()];
  const servers = await startCluster(ports, dir);
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }), () => Promise.all(servers.map((s) => s.kill())));
  const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
  const dead = ports[2]!;
  const live = keys.filter((k) => nodeOf(k, ports[0]!) !== dead);
  expect(live.length).toBeLessThan(keys.length);
  return { ports, dead, keys, live, kill: () => servers[2]!.kill(), restart: () => servers[2]!.start() };
}

describe('RedisGuard clusters, the first 1.5 s of a node outage: one redial per round per process, not one per cluster connection', () => {
  it(`ioredis: ${CLUSTERS} guarded Clusters reading a killed node's keys dial it at most ${MOST_DIALS} times in the first 1.5 s; the live nodes serve every read`, async () => {
    const { ports, dead, keys, live, kill } = await cluster3();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const clusters = Array.from({ length: CLUSTERS }, () => new Cluster([{ host: '127.0.0.1', port: ports[0]! }], guard.ioredisCluster(Redis, { clusterRetryStrategy: () => 100, redisOptions: { disconnectTimeout: 50 } })));
    for (const c of clusters) c.on('error', () => {});
    cleanups.push(() => clusters.forEach((c) => c.disconnect()));
    await Promise.all(clusters.flatMap((c) => keys.map((k) => c.set(k, 'v'))));
    const { dials, ok } = await killAndRead(clusters, keys, kill);
    expect(dials.count(dead)).toBeGreaterThanOrEqual(1);
    expect(dials.count(dead)).toBeLessThanOrEqual(MOST_DIALS);
    expect(ok % (CLUSTERS * live.length)).toBe(0);
    expect(ok).toBeGreaterThan(0);
  }, 60_000);

  it(`node-redis: ${CLUSTERS} guarded createCluster clients, a killed node: its node clients dial it at most ${MOST_DIALS} times in the first 1.5 s; the live nodes serve every read`, async () => {
    const { ports, dead, keys, live, kill } = await cluster3();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const options = { rootNodes: [{ socket: { host: '127.0.0.1', port: ports[0]! } }], defaults: { disableOfflineQueue: true } };
    const clusters = Array.from({ length: CLUSTERS }, () => guard.nodeRedisCluster(createCluster, options));
    for (const c of clusters) c.on('error', () => {});
    cleanups.push(() => clusters.forEach((c) => c.destroy()));
    await Promise.all(clusters.map((c) => c.connect()));
    await Promise.all(clusters.flatMap((c) => keys.map((k) => c.set(k, 'v'))));
    const { dials, ok } = await killAndRead(clusters, keys, kill);
    expect(dials.count(dead)).toBeGreaterThanOrEqual(1);
    expect(dials.count(dead)).toBeLessThanOrEqual(MOST_DIALS);
    expect(ok % (CLUSTERS * live.length)).toBe(0);
    expect(ok).toBeGreaterThan(0);
  }, 60_000);

  it(`node-redis: ${CLUSTERS} guarded createCluster clients, a node killed for 1.5 s and restarted: every cluster reads its keys again within 3.5 s (unguarded: ~2 s, the node rejoining its cluster)`, async () => {
    const { ports, dead, keys, kill, restart } = await cluster3();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const options = { rootNodes: [{ socket: { host: '127.0.0.1', port: ports[0]! } }], defaults: { disableOfflineQueue: true } };
    const clusters = Array.from({ length: CLUSTERS }, () => guard.nodeRedisCluster(createCluster, options));
    for (const c of clusters) c.on('error', () => {});
    cleanups.push(() => clusters.forEach((c) => c.destroy()));
    await Promise.all(clusters.map((c) => c.connect()));
    const onDead = keys.filter((k) => nodeOf(k, ports[0]!) === dead);
    await kill();
    await readFor(clusters, keys, MIN_OUTAGE);
    await restart();
    const back = performance.now();
    await expect
      .poll(async () => (await Promise.allSettled(clusters.flatMap((c) => onDead.map((k) => c.get(k))))).every((r) => r.status === 'fulfilled'), { timeout: 10_000, interval: 50 })
      .toBe(true);
    const ms = performance.now() - back;
    expect(ms).toBeLessThan(3_500);
  }, 60_000);
});
