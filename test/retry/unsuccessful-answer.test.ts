/**
 * An attempt may resolve with an answer its call could not get past (an adapter's marker: undici's
 * 503 handed over once no retry could follow). The caller gets that value; the loop reports the
 * call failed, with the answer's classification, on onResult and retry:settled.
 */
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { subscribe } from '../../src/observe/channels.js';
import { unsuccessfulAnswer, unsuccessfulOf } from '../../src/observe/tracing.js';
import { type RetryResult, retry } from '../../src/retry/retry.js';

describe('retry: an unsuccessful answer', () => {
  it('resolves with the answer, and reports the call failed with its classification', async () => {
    const classification = classify({ statusCode: 503 });
    expect(classification).toMatchObject({ kind: 'application', code: 'HTTP_503' });
    const answer = unsuccessfulAnswer(classification);
    const results: RetryResult[] = [];
    const events: unknown[] = [];
    const off = subscribe('dialguard:retry:settled', (e) => void events.push(e));
    try {
      let n = 0;
      const value = await retry(
        () => {
          if (++n === 1) return Promise.reject(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
          return Promise.resolve(answer);
        },
        { backoff: () => 0, budget: null, onResult: (r) => results.push(r) },
      );
      expect(value).toBe(answer);
      expect(await retry(() => Promise.resolve('fine'), { budget: null, onResult: (r) => results.push(r) })).toBe('fine');
    } finally {
      off();
    }
    expect(results.map((r) => [r.ok, r.attempts, r.classification, 'error' in r])).toEqual([
      [false, 2, classification, false],
      [true, 1, undefined, false],
    ]);
    expect(events).toEqual([
      { ok: false, attempts: 2, elapsed: expect.any(Number), kind: 'application' },
      { ok: true, attempts: 1, elapsed: expect.any(Number), kind: undefined },
    ]);
  });

  it('only the marker is one: any other value, null, or a primitive is not', () => {
    const c = classify({ statusCode: 502 });
    expect(unsuccessfulOf(unsuccessfulAnswer(c))).toBe(c);
    for (const v of [undefined, null, 0, 'HTTP_503', {}, { statusCode: 503 }]) expect(unsuccessfulOf(v)).toBeUndefined();
  });
});
