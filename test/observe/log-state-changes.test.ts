import { afterEach, describe, expect, it, vi } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { logStateChanges } from '../../src/observe/log-state-changes.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { DeadError, FakeConnector, testClassify } from '../pool/fake-connector.js';

type Line = { level: 'warn' | 'info'; fields: Record<string, unknown>; message: string };

function recorder(): { lines: Line[]; logger: { warn: (f: object, m: string) => void; info: (f: object, m: string) => void } } {
  const lines: Line[] = [];
  return {
    lines,
    logger: {
      warn: (fields, message) => lines.push({ level: 'warn', fields: fields as Record<string, unknown>, message }),
      info: (fields, message) => lines.push({ level: 'info', fields: fields as Record<string, unknown>, message }),
    },
  };
}

const refusedErr = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

describe('logStateChanges', () => {
  it('logs a dead host once when it opens and once when it closes, never per refusal', async () => {
    const { lines, logger } = recorder();
    stop = logStateChanges(logger);
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: 3, openDuration: 30_000 });
    const host = 'proxy-3:443';
    for (let i = 0; i < 3; i++) await dial(host, () => Promise.reject(refusedErr()), { breaker, clock }).catch(() => {});
    for (let i = 0; i < 10_000; i++) await dial(host, () => Promise.resolve(1), { breaker, clock }).catch(() => {});
    clock.advance(30_000);
    await dial(host, () => Promise.resolve(1), { breaker, clock });
    expect(lines).toEqual([
      { level: 'warn', fields: { host, failures: 3, openForMs: 30_000, reopened: false }, message: expect.stringContaining('no longer dialling') },
      { level: 'info', fields: { host, openedForMs: 30_000 }, message: expect.stringContaining('dialling resumed') },
    ]);
  });

  it('a host that stays down reopens after every failed probe: one line for the outage, then a reopen at most once per reopenInterval with the count held back (was: a line per probe, ~100 in 30 s; an outside review)', async () => {
    const { lines, logger } = recorder();
    const clock = new ManualClock();
    stop = logStateChanges(logger, { reopenInterval: 60_000, now: () => clock.now() });
    // Every window 300 ms (a number: a constant window).
    const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: 1, openDuration: 300 });
    const host = 'cache-7:11211';
    const failProbe = () => dial(host, () => Promise.reject(refusedErr()), { breaker, clock }).catch(() => {});
    await failProbe(); // opens
    for (let i = 0; i < 99; i++) {
      clock.advance(300);
      await failProbe(); // the probe fails: reopened
    }
    expect(lines.length).toBe(1); // 29.7 s of reopens: the outage's first line only
    clock.advance(60_000);
    await failProbe();
    expect(lines.length).toBe(2);
    expect(lines[1]!.fields).toMatchObject({ host, reopened: true, reopens: 100 });
    clock.advance(300);
    await dial(host, () => Promise.resolve(1), { breaker, clock });
    expect(lines.map((l) => l.level)).toEqual(['warn', 'warn', 'info']);
    // Down again later: its first line is written at once.
    await failProbe();
    expect(lines.length).toBe(4);
    expect(lines[3]!.fields).toMatchObject({ host, reopened: false });
  });

  it('logs a lost probe and a dead connection', async () => {
    const { lines, logger } = recorder();
    stop = logStateChanges(logger);
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: 1, openDuration: 1_000, probeTimeout: 100 });
    breaker.admit('h:1').failed();
    clock.advance(1_000);
    breaker.admit('h:1'); // a probe whose report never comes
    clock.advance(100);
    breaker.admit('h:1').succeeded();
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    const pool = new ConnectionPool({ connector, breaker: null, classify: testClassify });
    await pool.use('svc:1', () => Promise.reject(new DeadError('x'))).catch(() => {});
    await pool.close();
    expect(lines.map((l) => l.message.replace(/^dialguard: /, ''))).toEqual([
      'host unreachable: no longer dialling it',
      'probe dial went unreported: allowing another',
      'host accepting connections again: dialling resumed',
      'connection dead: released the requests riding it',
    ]);
    expect(lines[3]!.fields).toEqual({ target: 'svc:1', connectionId: 1, released: 0 }); // the failing request had already left
  });

  it('reports the retry budget running dry at most once per interval, with a count', async () => {
    const { lines, logger } = recorder();
    let t = 0;
    stop = logStateChanges(logger, { budgetInterval: 60_000, now: () => t });
    const empty = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 0 });
    const call = () => retry(() => Promise.reject(refusedErr()), { backoff: constant(0), budget: empty }).catch(() => {});
    for (let i = 0; i < 50; i++) await call();
    t = 60_000;
    for (let i = 0; i < 7; i++) await call();
    expect(lines.map((l) => l.fields)).toEqual([
      { refused: 1, sinceMs: 0 },
      { refused: 50, sinceMs: 60_000 },
    ]);
  });

  it('writes a burst\'s held-back refusals when the interval ends, and what is held at stop (was: never, or with the next burst; an outside review)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { lines, logger } = recorder();
      let t = 0;
      const unsubscribe = logStateChanges(logger, { budgetInterval: 1_000, now: () => t });
      const empty = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 0 });
      const call = () => retry(() => Promise.reject(refusedErr()), { backoff: constant(0), budget: empty }).catch(() => {});
      for (let i = 0; i < 60; i++) await call();
      expect(lines.map((l) => l.fields)).toEqual([{ refused: 1, sinceMs: 0 }]);
      t = 999;
      vi.advanceTimersByTime(999);
      expect(lines).toHaveLength(1);
      t = 1_000;
      vi.advanceTimersByTime(1);
      expect(lines.map((l) => l.fields)).toEqual([{ refused: 1, sinceMs: 0 }, { refused: 59, sinceMs: 1_000 }]);
      t = 1_500;
      for (let i = 0; i < 5; i++) await call(); // within the interval of the last line: held
      expect(lines).toHaveLength(2);
      unsubscribe(); // stopped before its interval ends: written now
      expect(lines.map((l) => l.fields)[2]).toEqual({ refused: 5, sinceMs: 500 });
      t = 5_000;
      vi.advanceTimersByTime(5_000);
      expect(lines).toHaveLength(3);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('stops when told, and survives a logger that throws', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    const unsubscribe = logStateChanges({
      warn: () => {
        throw new Error('logger down');
      },
      info: () => {},
    });
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 1 });
    breaker.admit('a:1').failed();
    expect(breaker.state('a:1')?.state).toBe('open');
    unsubscribe();
    breaker.admit('b:1').failed();
    await new Promise((r) => setImmediate(r));
    process.off('warning', onWarning);
    expect(warnings).toEqual([expect.stringContaining('logger down')]);
  });

  it('rejects a logger without warn/info', () => {
    expect(() => logStateChanges({} as never)).toThrow(/logger.warn must be a function/);
  });
});
