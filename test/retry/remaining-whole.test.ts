/**
 * `attempt.remaining` is whole milliseconds, so the pattern the docs give, passing it on as an
 * attempt's own timeout, works with `AbortSignal.timeout`: on the real clock it read 299999.85,
 * and AbortSignal.timeout threw a RangeError that ended the call after one attempt.
 */
import { describe, expect, it } from 'vitest';
import { retry } from '../../src/retry/retry.js';

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
