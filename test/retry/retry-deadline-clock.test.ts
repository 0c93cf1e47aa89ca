/**
 * `retry({ deadline })` on the default clock (performance.now()): a deadline decades ahead is a
 * Date.now() time given by mistake and is refused, counted from the call's `start`, with the
 * distance in years in the message. Exactly ten years ahead is still taken.
 */
import { describe, expect, it } from 'vitest';
import { retry } from '../../src/retry/retry.js';

const YEAR = 365.25 * 24 * 3_600_000;
const fn = (): string => 'ok';

describe('retry: a deadline far ahead on the default clock', () => {
  it('is counted from start: ten years after it is taken, a little more is refused', async () => {
    await expect(retry(fn, { budget: null, start: 0, deadline: 10 * YEAR })).resolves.toBe('ok');
    await expect(retry(fn, { budget: null, start: 5 * YEAR, deadline: 5 * YEAR + 9.9 * YEAR })).resolves.toBe('ok');
    await expect(retry(fn, { budget: null, start: 5 * YEAR, deadline: 5 * YEAR + 10.1 * YEAR })).rejects.toThrow(RangeError);
  });

  it('names the distance in years, from start', async () => {
    await expect(retry(fn, { budget: null, start: 20 * YEAR, deadline: 50 * YEAR })).rejects.toThrow(/, 30 years away; /);
  });
});
