/**
 * `retry({ deadline })` on the default clock (performance.now()): a deadline decades ahead is a
 * Date.now() time given by mistake and is refused, counted from the call's `start`, with the
 * distance in years in the message. Exactly ten years ahead is still taken.
 */
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { retry } from '../../src/retry/retry.js';

const YEAR = 365.25 * 24 * 3_600_000;
const fn = (): string => 'ok';

describe('retry: a deadline far ahead on the default clock', () => {
  it('is counted from start: ten years after it is taken, a little more is refused', async () => {
    await expect(retry(fn, { budget: null, start: 0, deadline: 10 * YEAR })).resolves.toBe('ok');
    await expect(retry(fn, { budget: null, start: -5 * YEAR, deadline: -5 * YEAR + 9.9 * YEAR })).resolves.toBe('ok');
    await expect(retry(fn, { budget: null, start: -5 * YEAR, deadline: -5 * YEAR + 10.1 * YEAR })).rejects.toThrow(RangeError);
  });

  it('names the distance in years, from start', async () => {
    await expect(retry(fn, { budget: null, start: -5 * YEAR, deadline: 25 * YEAR })).rejects.toThrow(/, 30 years away; /);
  });
});

describe('retry: a start on the wrong clock, or not a time', () => {
  const refusedConnect = (): never => {
    throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });
  };

  // Was accepted: the deadline, counted from a start 56 years ahead, never came, so this loop ran
  // ~480 attempts in 5 s (an outside review); with a performance.now() start it ends at 300 ms.
  it('a Date.now() start on the default clock is a RangeError before any attempt', async () => {
    let attempts = 0;
    const err = await retry(
      () => {
        attempts++;
        refusedConnect();
      },
      { budget: null, start: Date.now(), timeout: 300, maxAttempts: Infinity, backoff: () => 10 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RangeError);
    expect(String(err)).toMatch(/start is on the clock, performance.now\(\) by default, not Date.now\(\): got \d+, 5\d years ahead; pass performance.now\(\)$/);
    expect(attempts).toBe(0);
  });

  it.each([Infinity, -Infinity])('start %s is a RangeError (Infinity dropped the timeout)', async (start) => {
    await expect(retry(fn, { budget: null, start, timeout: 100 })).rejects.toThrow(/start must be a finite time on the clock, got -?Infinity/);
  });

  it('a start in the past or now, on the default clock or a clock of the caller\'s own, is taken', async () => {
    await expect(retry(fn, { budget: null, start: performance.now() - 50, timeout: 1_000 })).resolves.toBe('ok');
    const clock = { now: () => Date.now(), setTimeout: systemClock.setTimeout, clearTimeout: systemClock.clearTimeout };
    await expect(retry(fn, { budget: null, clock, start: Date.now(), timeout: 100 })).resolves.toBe('ok');
    const fixed = { now: () => 1_000, setTimeout: systemClock.setTimeout, clearTimeout: systemClock.clearTimeout };
    await expect(retry(fn, { budget: null, clock: fixed, start: 1_000, timeout: 100 })).resolves.toBe('ok');
  });

  // Was taken: a 1 s timeout with a start 1 s ahead gave the first attempt 1 999 ms and ended at
  // 2 s ("deadline of 1000 ms exceeded"); one 60 s ahead ran on (an outside review).
  it('a start ahead of now is a RangeError before any attempt, on any clock, naming how far ahead', async () => {
    let attempts = 0;
    const counted = (): string => {
      attempts++;
      return 'ok';
    };
    await expect(retry(counted, { budget: null, start: performance.now() + 1_000, timeout: 1_000 })).rejects.toThrow(/start must not be later than the clock's now: got [\d.]+, 99\d(?:\.\d+)? ms ahead/);
    await expect(retry(counted, { budget: null, start: performance.now() + 9.9 * YEAR, timeout: 100 })).rejects.toThrow(/start must not be later than the clock's now/);
    const fixed = { now: () => 1_000, setTimeout: systemClock.setTimeout, clearTimeout: systemClock.clearTimeout };
    await expect(retry(counted, { budget: null, clock: fixed, start: 1_000.5, timeout: 100 })).rejects.toThrow(/got 1000.5, 0.5 ms ahead/);
    expect(attempts).toBe(0);
  });
});
