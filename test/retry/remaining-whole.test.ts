/**
 * `attempt.remaining` is whole milliseconds, so the pattern the docs give, passing it on as an
 * attempt's own timeout, works with `AbortSignal.timeout`: on the real clock it read 299999.85,
 * and AbortSignal.timeout threw a RangeError that ended the call after one attempt.
 */
import { describe, expect, it } from 'vitest';
import { retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

describe('retry: attempt.remaining', () => {
  it('is an integer on the real clock, and AbortSignal.timeout takes it', async () => {
    const seen: number[] = [];
    const result = await retry(
      (attempt) => {
        seen.push(attempt.remaining);
        const signal = AbortSignal.timeout(attempt.remaining);
        return signal.aborted ? 'aborted' : 'ok';
      },
      { timeout: 300_000 },
    );
    expect(result).toBe('ok');
    expect(Number.isInteger(seen[0])).toBe(true);
    expect(seen[0]).toBeLessThanOrEqual(300_000);
    expect(seen[0]).toBeGreaterThan(299_000);
  });
});

describe('retry: attempt.remaining below one millisecond', () => {
  it('is 1, not 0 (passed on as a timeout, 0 means none to axios, undici and req.setTimeout)', async () => {
    const clock = new ManualClock(0);
    const seen: number[] = [];
    await retry(
      (attempt) => {
        seen.push(attempt.remaining);
        return 'ok';
      },
      { clock, deadline: 0.4 },
    );
    expect(seen).toEqual([1]);
  });
});
