import { type DataPoint, type HistogramMetricData, MeterProvider, MetricReader, type SumMetricData } from '@opentelemetry/sdk-metrics';
import { afterEach, describe, expect, it } from 'vitest';
import { instrument } from '../../src/adapters/otel/index.js';
import { constant } from '../../src/core/backoff.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { retry } from '../../src/retry/retry.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { DeadError, FakeConnector, NotSentError, testClassify } from '../pool/fake-connector.js';

class TestReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** The closed set each attribute may take: anything else would be an unbounded label. */
const ALLOWED: Record<string, ReadonlySet<unknown>> = {
  reopened: new Set([true, false]),
  state: new Set(['open', 'half-open']),
  outcome: new Set(['succeeded', 'failed', 'abandoned', 'ok', 'error']),
  phase: new Set(['lookup', 'tcp', 'tls', 'handshake', 'other']),
  kind: new Set(['refused', 'dial', 'connection', 'timeout', 'stream', 'cancelled', 'application', 'unknown', 'none']),
  component: new Set(['retry', 'http2']),
};

const refusedErr = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

describe('dialguard/otel', () => {
  it('a meter instrumented twice counts each event once, until every caller has stopped (was: twice)', async () => {
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    const opened = async (): Promise<number> => {
      const { resourceMetrics } = await reader.collect();
      const m = resourceMetrics.scopeMetrics.flatMap((sm) => sm.metrics).find((x) => x.descriptor.name === 'dialguard.breaker.opened');
      return ((m as SumMetricData | undefined)?.dataPoints ?? []).reduce((a, p) => a + (p.value as number), 0);
    };
    const trip = (host: string): void => new HostBreaker({ failureThreshold: 1, minOutage: 0 }).admit(host).failed(refusedErr());
    const first = instrument({ meterProvider: provider });
    const second = instrument({ meterProvider: provider });
    try {
      trip('a:1');
      expect(await opened()).toBe(1);
      first();
      first(); // twice: harmless, and not a second holder's stop
      trip('b:1');
      expect(await opened()).toBe(2); // the second still feeds it
    } finally {
      second();
    }
    trip('c:1');
    expect(await opened()).toBe(2); // nobody feeds it now
  });

  it('counts and times what the guard does, with bounded attributes only', async () => {
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    stop = instrument({ meterProvider: provider });

    // Breaker: two failed dials trip it (one of them in an unusual phase), refusals, a probe closes it.
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: 2, openDuration: 1_000 });
    const host = 'db-7.internal:5432';
    await dial(host, () => Promise.reject(refusedErr()), { breaker, clock }).catch(() => {});
    await dial(
      host,
      (ctx) => {
        ctx.phase = `custom-${Math.random()}`; // an unbounded phase name must not become a label
        return Promise.reject(refusedErr());
      },
      { breaker, clock },
    ).catch(() => {});
    for (let i = 0; i < 5; i++) await dial(host, () => Promise.resolve(1), { breaker, clock }).catch(() => {});
    clock.advance(1_000);
    await dial(host, () => Promise.resolve(1), { breaker, clock });

    // Pool: a connection opened, found dead, closed.
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    const pool = new ConnectionPool({ connector, breaker: null, classify: testClassify });
    await pool.use('svc-9:443', () => Promise.reject(new DeadError('x'))).catch(() => {});
    // Then a request its retired connection refused unsent: the pool resends it at once (a retry).
    await pool.use('svc-9:443', async (lease) => {
      if (lease.turn > 1) return 'ok';
      connector.opened[connector.opened.length - 1]!.watch!.retire('goaway');
      throw new NotSentError('new streams cannot be created after GOAWAY');
    });
    await pool.close();

    // Retry: one retry then success; then a call whose retry the budget refuses.
    let n = 0;
    await retry(
      () => {
        n++;
        if (n === 1) throw refusedErr();
        return 'ok';
      },
      { backoff: constant(0), budget: null },
    );
    const empty = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 0 });
    await retry(() => Promise.reject(refusedErr()), { backoff: constant(0), budget: empty }).catch(() => {});

    // HTTP/2: one request, whole-call latency.
    await using peer = await http2Peer();
    const client = new Http2Client({ breaker: new HostBreaker() });
    await client.request(`${peer.origin}/`);
    await client.close();

    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).toEqual([]);
    const metrics = new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
    const sum = (name: string, attrs: Record<string, unknown> = {}): number =>
      ((metrics.get(name) as SumMetricData | undefined)?.dataPoints ?? [])
        .filter((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v))
        .reduce((a, p) => a + (p.value as number), 0);
    const count = (name: string, attrs: Record<string, unknown> = {}): number =>
      ((metrics.get(name) as HistogramMetricData | undefined)?.dataPoints ?? [])
        .filter((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v))
        .reduce((a, p) => a + p.value.count, 0);

    expect(sum('dialguard.breaker.opened', { reopened: false })).toBe(1);
    expect(sum('dialguard.breaker.closed')).toBe(1);
    expect(sum('dialguard.breaker.refused', { state: 'open' })).toBe(5);
    expect(sum('dialguard.dials', { outcome: 'failed' })).toBe(2);
    expect(sum('dialguard.dials', { outcome: 'succeeded' })).toBeGreaterThanOrEqual(3); // probe, pool, http2
    expect(count('dialguard.dial.duration', { phase: 'other' })).toBe(1);
    expect(sum('dialguard.connections.opened')).toBeGreaterThanOrEqual(2);
    expect(sum('dialguard.connections.gone')).toBe(1);
    expect(sum('dialguard.connections.closed')).toBeGreaterThanOrEqual(2);
    expect(sum('dialguard.retries', { kind: 'dial' })).toBe(1);
    expect(sum('dialguard.retries')).toBe(2); // the retry loop's one and the pool's resend
    expect(sum('dialguard.retry_budget.refused')).toBe(1);
    expect(count('dialguard.call.duration', { component: 'retry', outcome: 'ok' })).toBe(1);
    expect(count('dialguard.call.duration', { component: 'retry', outcome: 'error', kind: 'dial' })).toBe(1);
    expect(count('dialguard.call.duration', { component: 'http2', outcome: 'ok' })).toBe(1);

    // Every attribute of every point is from a closed set: no host, address, target or id.
    const points: Array<DataPoint<unknown>> = [...metrics.values()].flatMap((m) => m.dataPoints as Array<DataPoint<unknown>>);
    expect(points.length).toBeGreaterThan(10);
    for (const p of points) {
      for (const [key, value] of Object.entries(p.attributes)) {
        expect(ALLOWED[key], `attribute ${key}`).toBeDefined();
        expect(ALLOWED[key]!.has(value), `${key}=${String(value)}`).toBe(true);
      }
    }
    await provider.shutdown();
  });

  it('stops feeding the instruments when unsubscribed', async () => {
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    instrument({ meterProvider: provider })();
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 1 });
    await dial('x:1', () => Promise.reject(refusedErr()), { breaker }).catch(() => {});
    const { resourceMetrics } = await reader.collect();
    const points = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).flatMap((m) => m.dataPoints as unknown[]);
    expect(points).toEqual([]);
    await provider.shutdown();
  });
});
