/**
 * RedisGuard's dials are reported as every other guarded dial is: one `dialguard:dial:settled`
 * event and one `dialguard:dial` trace per dial the guard admitted, with its outcome. They were on
 * neither (the guard takes permits itself, not through `dial()`): a service's dial metric and its
 * spans saw no Redis dial at all (an outside review). Real redis-server, node-redis and ioredis.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, connectedPair, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

interface Settled {
  host: string;
  outcome: string;
  phase: string;
  duration: number;
}

/** Collects dial:settled events and the trace's ends while the test runs. */
function listen(): { settled: Settled[]; traced: { outcome?: string; error: boolean }[] } {
  const settled: Settled[] = [];
  const traced: { outcome?: string; error: boolean }[] = [];
  const errored = new WeakSet<object>();
  const onSettled = (m: unknown): void => {
    settled.push(m as Settled);
  };
  const trace = diagnosticsChannel.tracingChannel('dialguard:dial');
  const handlers = {
    error: (m: unknown) => errored.add(m as object),
    asyncEnd: (m: unknown) => traced.push({ outcome: (m as { outcome?: string }).outcome, error: errored.has(m as object) }),
  };
  diagnosticsChannel.subscribe('dialguard:dial:settled', onSettled);
  trace.subscribe(handlers as never);
  cleanups.push(() => {
    diagnosticsChannel.unsubscribe('dialguard:dial:settled', onSettled);
    trace.unsubscribe(handlers as never);
  });
  return { settled, traced };
}

describe('RedisGuard: each admitted dial on dial:settled and the dial trace', () => {
  it('a live node: one succeeded dial per client, past tcp, traced without error', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const seen = listen();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    await connectedPair(guard, server.port, cleanups);
    const host = `127.0.0.1:${server.port}`;
    expect(seen.settled.map((e) => [e.host, e.outcome, e.phase])).toEqual([
      [host, 'succeeded', 'handshake'],
      [host, 'succeeded', 'handshake'],
    ]);
    expect(seen.settled.every((e) => e.duration >= 0 && e.duration < 5_000)).toBe(true);
    expect(seen.traced).toEqual([
      { outcome: 'succeeded', error: false },
      { outcome: 'succeeded', error: false },
    ]);
    expect(guard.breaker.stats().succeeded).toBe(2);
  });

  it('a refused port: each dial the guard let go is one failed event in tcp; its refusals are none', async () => {
    const port = await freePort();
    const seen = listen();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const guard = new RedisGuard({ breaker });
    const clients = Array.from({ length: 3 }, () => guard.ioredis(Redis, { host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 50 }));
    for (const c of clients) c.on('error', () => {});
    cleanups.push(() => clients.forEach((c) => c.disconnect()));
    await Promise.all(clients.map((c) => c.ping().catch(() => 'failed')));
    await expect.poll(() => breaker.stats().failed, { timeout: 3_000, interval: 20 }).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 300)); // redials in that time: refused, never dialled
    // Each dial let go failed: the first opened the host, the two racing it ended stale there.
    const { failed, stale, succeeded } = breaker.stats();
    expect([failed, stale, succeeded]).toEqual([1, 2, 0]);
    expect(seen.settled.length).toBe(failed + stale);
    expect(seen.settled.every((e) => e.outcome === 'failed' && e.phase === 'tcp' && e.host === `127.0.0.1:${port}`)).toBe(true);
    expect(seen.traced.length).toBe(failed + stale);
    expect(seen.traced.every((t) => t.outcome === 'failed' && t.error)).toBe(true);
  });
});
