/**
 * RedisGuard against a node whose port was dropped (a veth blackhole: SIGKILLed and gone
 * from the network), in a network namespace of the test's own, where the peer counts every SYN.
 * Each test re-runs itself under unshare, and the parent insists on hearing that the child ran.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { netnsTest } from '../../helpers/netns.js';

const cleanups = leakCheckEach();
const CLIENTS = 5;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('RedisGuard: a blackholed node, in a network namespace of its own (the namespace’s ActiveOpens counts every dial)', () => {
  netnsTest(import.meta.url, 'node-redis and ioredis, 5 guarded clients each for 3 s: their first dials, then one probe per 1 s window', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const guard = new RedisGuard({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 1_000 }), connectTimeout: 200 });
    const a = Array.from({ length: CLIENTS }, () => guard.nodeRedis(createClient, { socket: { host: peer.host, port: peer.port } }));
    const b = Array.from({ length: CLIENTS }, () => guard.ioredis(Redis, { host: peer.host, port: peer.port, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of [...a, ...b]) c.on('error', () => {});
    for (const c of a) c.connect().catch(() => {});
    cleanups.push(() => {
      for (const c of a) if (c.isOpen) c.destroy();
      for (const c of b) c.disconnect();
    });
    await sleep(3_000);
    // 10 first dials (overlapping: one round, which opens the node), then at most one probe per
    // window (3), and one window of slack for timers on a loaded machine.
    expect(peer.attempts).toBeGreaterThanOrEqual(2 * CLIENTS);
    expect(peer.attempts).toBeLessThanOrEqual(2 * CLIENTS + 4);
  });

  netnsTest(import.meta.url, 'default node-redis and ioredis, 5 clients each for 3 s: they redial all along', async () => {
    await using peer = await blackhole({ mode: 'veth' });
    const a = Array.from({ length: CLIENTS }, () => createClient({ socket: { host: peer.host, port: peer.port, connectTimeout: 200 } }));
    const b = Array.from({ length: CLIENTS }, () => new Redis({ host: peer.host, port: peer.port, connectTimeout: 200, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of [...a, ...b]) c.on('error', () => {});
    for (const c of a) c.connect().catch(() => {});
    cleanups.push(() => {
      for (const c of a) if (c.isOpen) c.destroy();
      for (const c of b) c.disconnect();
    });
    await sleep(3_000);
    expect(peer.attempts).toBeGreaterThan(4 * 2 * CLIENTS);
  });
});
