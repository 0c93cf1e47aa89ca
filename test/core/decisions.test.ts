/**
 * Issue 12's "also looked at, not confirmed" items about classify and backoff, each decided and
 * pinned here:
 * - text never overrides an explicit HTTP 4xx (fixed: it did);
 * - no schedule can produce a NaN, negative or endless wait, nor make a host unblockable
 *   (fixed: `exponential({ base: 0 })` gave NaN at a large step, and a breaker kept a NaN window);
 * - a chain deeper than 32 causes classifies as 'unknown' (kept, documented: the bound is what
 *   keeps a hostile chain cheap, and 'unknown' is the safe answer: not retried, not counted).
 */
import { describe, expect, it } from 'vitest';
import { constant, decorrelatedJitter, exponential, fullJitter, proportionalJitter, safeDelay } from '../../src/core/backoff.js';
import { classify } from '../../src/core/classify.js';
import { MAX_CHAIN_DEPTH } from '../../src/core/errors.js';
import { MAX_DURATION } from '../../src/core/validate.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const withStatus = (message: string, statusCode: number): Error => Object.assign(new Error(message), { statusCode });

describe('classify: an explicit 4xx is final, whatever its text says', () => {
  it('a 403 whose message says "connection reset by peer" stays application HTTP_403, not transient', () => {
    expect(classify(withStatus('connection reset by peer', 403))).toMatchObject({ kind: 'application', code: 'HTTP_403', transient: false, connectionDead: false });
    expect(classify(withStatus('rpc error: EOF', 404))).toMatchObject({ kind: 'application', code: 'HTTP_404', transient: false });
  });

  it('the bounds of 4xx: 400 and 499 stay, 500 is upgraded', () => {
    for (const status of [400, 499]) expect(classify(withStatus('connection reset by peer', status)), String(status)).toMatchObject({ kind: 'application' });
    expect(classify(withStatus('connection reset by peer', 500))).toMatchObject({ kind: 'connection', code: 'ECONNRESET' });
  });

  it('a 4xx status line still lets a cause below it speak (it is not final), as a 5xx one does', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });
    expect(classify(new Error('Unexpected response code: 403 (connection reset by peer)', { cause: refused }))).toMatchObject({ kind: 'dial', code: 'ECONNREFUSED' });
  });

  it('a 4xx status line with transport words after it stays that status', () => {
    expect(classify(new Error('Unexpected response code: 403 (rpc error: EOF)'))).toMatchObject({ kind: 'application', code: 'HTTP_403', transient: false });
  });

  it('a 5xx carrying a remote EOF is still upgraded (seed 004): text may upgrade a server error, not a client error', () => {
    expect(classify(withStatus('rpc error: EOF', 500))).toMatchObject({ kind: 'connection', code: 'EOF', transient: true, connectionDead: false });
    expect(classify(new Error('Unexpected response code: 500 (rpc error: EOF)'))).toMatchObject({ kind: 'connection', code: 'EOF' });
  });
});

describe('backoff: no schedule makes a wait NaN, negative or endless', () => {
  it('exponential({ base: 0 }) at any step is 0, never NaN (0 * Infinity)', () => {
    const s = exponential({ base: 0, max: 1_000 });
    for (const n of [1, 2, 1_100, 1e6, Number.MAX_SAFE_INTEGER]) expect(s(n, 0, Math.random)).toBe(0);
    expect(fullJitter({ base: 0, max: 1_000 })(5_000, 0, () => 0.5)).toBe(0);
    expect(proportionalJitter({ base: 0, max: 1_000 })(5_000, 0, () => 0.5)).toBe(0);
  });

  it('every built-in schedule, at every step and draw, is a finite number >= 0', () => {
    const schedules = [
      exponential({ base: 1, max: 1_000 }),
      exponential({ base: 10, max: MAX_DURATION, multiplier: 1e300 }),
      proportionalJitter({ base: 100, max: 1_000 }),
      fullJitter({ base: 100, max: 1_000 }),
      decorrelatedJitter({ base: 100, max: 1_000 }),
      constant(5),
    ];
    for (const s of schedules) {
      let previous = 0;
      for (const n of [1, 2, 10, 1_100, 1e9, Number.MAX_SAFE_INTEGER]) {
        for (const r of [0, 0.5, 0.999]) {
          const d = s(n, previous, () => r);
          expect(Number.isFinite(d), `${n} ${r}`).toBe(true);
          expect(d).toBeGreaterThanOrEqual(0);
          previous = d;
        }
      }
    }
  });

  it('exponential at a NaN step waits the cap, never NaN', () => {
    expect(exponential({ base: 10, max: 1_000 })(Number.NaN, 0, Math.random)).toBe(1_000);
  });

  it('a breaker schedule that throws after answering once reuses its last window, and is warned about once', async () => {
    const clock = new ManualClock();
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      const schedule = (n: number): number => {
        if (n === 1) return 100;
        throw new Error('schedule down');
      };
      const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: schedule, idleRetention: Infinity }); // opens on one failure (issue 11: minOutage would hold it closed)
      breaker.admit('h:1').failed(); // window 100
      clock.advance(100);
      for (let reopen = 0; reopen < 2; reopen++) {
        breaker.admit('h:1').failed(); // the probe fails: reopened, the schedule throwing
        clock.advance(99);
        expect(() => breaker.admit('h:1')).toThrow(/unavailable/);
        clock.advance(1);
        expect(breaker.state('h:1')).toMatchObject({ state: 'half-open' });
      }
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.includes('schedule down'))).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('safeDelay: what every consumer does with any answer (a user schedule may return anything)', () => {
    expect([Number.NaN, -5, -0, 'x', '5', undefined].map((v) => safeDelay(v))).toEqual([0, 0, 0, 0, 0, 0]);
    expect(safeDelay(Number.POSITIVE_INFINITY)).toBe(MAX_DURATION);
    expect(safeDelay(2 ** 40)).toBe(MAX_DURATION);
    expect(safeDelay(250)).toBe(250);
  });

  it('a breaker whose schedule answers NaN, a negative, Infinity or a huge number still lets a probe through in time', () => {
    for (const [answer, probeAfter] of [
      [Number.NaN, 0],
      [-5, 0],
      [Number.POSITIVE_INFINITY, MAX_DURATION],
      [1e300, MAX_DURATION],
    ] as const) {
      const clock = new ManualClock();
      const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: () => answer, idleRetention: Infinity });
      breaker.admit('h:1').failed();
      expect(breaker.stats().opened, String(answer)).toBe(1);
      if (probeAfter > 0) {
        clock.advance(probeAfter - 1);
        expect(() => breaker.admit('h:1'), String(answer)).toThrow(/unavailable/);
        clock.advance(1);
      }
      const probe = breaker.admit('h:1'); // not unblockable: the probe is granted
      probe.succeeded();
      expect(breaker.state('h:1')?.state, String(answer)).toBe('closed');
    }
  });

  it("retry: a user schedule answering NaN waits the default schedule's wait; Infinity ends the retries (no timer holds it), never NaN", async () => {
    const clock = new ManualClock();
    let attempts = 0;
    const call = retry(
      () => {
        attempts++;
        throw Object.assign(new Error('refused'), { code: 'ECONNREFUSED', syscall: 'connect' });
      },
      { clock, budget: null, maxAttempts: 3, backoff: (n) => (n === 1 ? Number.NaN : Number.POSITIVE_INFINITY), timeout: Infinity },
    ).catch((err: unknown) => err);
    await clock.tick(0);
    expect(attempts).toBe(1); // NaN: not no wait, but the default schedule's (400-600 ms)
    await clock.tick(600);
    expect(attempts).toBe(2);
    // Infinity: the longest a timer holds, 2^31-1 ms, is no wait for a retry; the call ends now
    // (it waited 24.8 days for its third attempt).
    expect(await call).toMatchObject({ code: 'DIALGUARD_RETRIES_EXHAUSTED' });
    expect((await call as Error).message).toContain(`${MAX_DURATION} ms or more`);
    expect(attempts).toBe(2);
    expect(clock.pending).toBe(0);
  });
});

describe('classify: chains deeper than 32 causes (kept: bounded, and unknown is the safe answer)', () => {
  const wrapped = (depth: number): unknown => {
    let err: unknown = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', syscall: 'connect' });
    for (let i = 0; i < depth; i++) err = new Error(`layer ${i}`, { cause: err });
    return err;
  };

  it(`an errno under ${MAX_CHAIN_DEPTH - 1} wrappers decides; under ${MAX_CHAIN_DEPTH} it is out of reach: unknown, not transient, never \'not sent\'`, () => {
    expect(classify(wrapped(MAX_CHAIN_DEPTH - 1))).toMatchObject({ kind: 'dial', code: 'ECONNREFUSED', transient: true });
    expect(classify(wrapped(MAX_CHAIN_DEPTH))).toMatchObject({ kind: 'unknown', transient: false, notSent: false, connectionDead: false });
    expect(classify(wrapped(10_000))).toMatchObject({ kind: 'unknown', transient: false });
  });

  it('retry makes one attempt for such a chain and spends no backoff', async () => {
    let attempts = 0;
    const err = await retry(
      () => {
        attempts++;
        throw wrapped(MAX_CHAIN_DEPTH);
      },
      { budget: null, maxAttempts: 5, idempotent: true },
    ).catch((e: unknown) => e);
    expect(attempts).toBe(1);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe(`layer ${MAX_CHAIN_DEPTH - 1}`); // the attempt's own error, as is
  });
});
