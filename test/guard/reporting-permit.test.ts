/**
 * reportingPermit: a permit an adapter took itself (RedisGuard) reports its dial as dial() reports
 * its own: one dial:settled event and one dial trace, each only when someone listens, the breaker
 * settled first, a second settle neither re-settling nor re-reporting.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { reportingPermit } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import type { DialPermit } from '../../src/guard/host-breaker.js';

const undo: (() => void)[] = [];
afterEach(() => undo.splice(0).forEach((f) => f()));

interface Seen {
  settled: { host: string; outcome: string; duration: number; phase: string }[];
  starts: { host: string; probe: boolean; kind: string }[];
  ends: { outcome?: string; phase?: string }[];
  errors: unknown[];
}

function listen(events: boolean, traces: boolean): Seen {
  const seen: Seen = { settled: [], starts: [], ends: [], errors: [] };
  if (events) {
    const on = (m: unknown): void => void seen.settled.push(m as Seen['settled'][number]);
    diagnosticsChannel.subscribe('dialguard:dial:settled', on);
    undo.push(() => diagnosticsChannel.unsubscribe('dialguard:dial:settled', on));
  }
  if (traces) {
    const trace = diagnosticsChannel.tracingChannel('dialguard:dial');
    const handlers = {
      start: (m: unknown) => void seen.starts.push({ ...(m as Seen['starts'][number]) }),
      end: () => {},
      asyncStart: () => {},
      asyncEnd: (m: unknown) => void seen.ends.push({ outcome: (m as { outcome?: string }).outcome, phase: (m as { phase?: string }).phase }),
      error: (m: unknown) => void seen.errors.push((m as { error: unknown }).error),
    };
    trace.subscribe(handlers);
    undo.push(() => trace.unsubscribe(handlers));
  }
  return seen;
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function permitOf(breaker: HostBreaker, host = 'a.test:1'): DialPermit {
  const p = breaker.tryAdmit(host);
  if (!('succeeded' in p)) throw new Error('refused');
  return p;
}

describe('reportingPermit', () => {
  it('nobody listening: the permit itself, unwrapped (costs nothing)', () => {
    const permit = permitOf(new HostBreaker());
    expect(reportingPermit(permit, () => 0, () => 'tcp')).toBe(permit);
  });

  it.each([
    ['succeeded', (p: DialPermit) => p.succeeded(), { succeeded: 1, failed: 0, abandoned: 0 }, false],
    ['failed', (p: DialPermit) => p.failed(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })), { succeeded: 0, failed: 1, abandoned: 0 }, true],
    ['abandoned', (p: DialPermit) => p.abandoned(), { succeeded: 0, failed: 0, abandoned: 1 }, false],
  ] as const)('%s: the breaker settled once, one event with its duration and phase, one trace', async (outcome, settle, stats, error) => {
    const seen = listen(true, true);
    const breaker = new HostBreaker({ failureThreshold: 5 });
    let now = 100;
    let phase = 'tcp';
    const permit = reportingPermit(permitOf(breaker), () => now, () => phase);
    expect([permit.host, permit.probe, permit.settled]).toEqual(['a.test:1', false, false]);
    expect(seen.starts).toEqual([{ host: 'a.test:1', probe: false, kind: 'dial' }]);
    now = 142;
    phase = 'handshake';
    permit.progressed();
    settle(permit);
    expect(permit.settled).toBe(true);
    settle(permit); // again: nothing new
    permit.failed(new Error('late'));
    await flush();
    expect(breaker.stats()).toMatchObject(stats);
    expect(seen.settled).toEqual([{ host: 'a.test:1', outcome, duration: 42, phase: 'handshake' }]);
    expect(seen.ends).toEqual([{ outcome, phase: 'handshake' }]);
    expect(seen.errors.length).toBe(error ? 1 : 0);
  });

  it('a failure with no error still ends its trace as an error', async () => {
    const seen = listen(false, true);
    const permit = reportingPermit(permitOf(new HostBreaker()), () => 0, () => 'tcp');
    permit.failed();
    await flush();
    expect(seen.errors).toHaveLength(1);
    expect(seen.ends).toEqual([{ outcome: 'failed', phase: 'tcp' }]);
  });

  it('events only: no trace started; traces only: no event', async () => {
    const onlyEvents = listen(true, false);
    reportingPermit(permitOf(new HostBreaker()), () => 0, () => 'tcp').succeeded();
    expect(onlyEvents.settled).toHaveLength(1);
    undo.splice(0).forEach((f) => f());
    const onlyTraces = listen(false, true);
    reportingPermit(permitOf(new HostBreaker()), () => 0, () => 'tcp').succeeded();
    await flush();
    expect([onlyTraces.settled.length, onlyTraces.starts.length, onlyTraces.ends.length]).toEqual([0, 1, 1]);
  });

  it('a probe is reported as one', () => {
    const seen = listen(false, true);
    let t = 0;
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 10, clock: { now: () => t, setTimeout: () => 0 as never, clearTimeout: () => {} } as never });
    permitOf(breaker).failed(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
    t = 1_000; // past the 10 ms window (not so far that the idle sweep forgot the host)
    const permit = reportingPermit(permitOf(breaker), () => 0, () => 'tcp');
    expect(permit.probe).toBe(true);
    expect(seen.starts[0]?.probe).toBe(true);
    permit.abandoned();
  });
});
