/**
 * refusedAtOnce reads at most 8 links of a cause chain (MAX_DEPTH), as every chain walk here:
 * an ECONNREFUSED 8 wrappers down is a refusal, 9 down is not looked for, and a chain that loops
 * on itself ends the walk with no verdict rather than spinning.
 */
import { describe, expect, it } from 'vitest';
import { refusedAtOnce } from '../../src/guard/dial-outcome.js';

/** ECONNREFUSED under `wrappers` plain errors (no code of their own). */
function wrapped(wrappers: number): Error {
  let e: Error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
  for (let i = 0; i < wrappers; i++) e = new Error(`wrapper ${i}`, { cause: e });
  return e;
}

describe('refusedAtOnce: how deep it reads', () => {
  it('reads 8 links: a refusal 7 wrappers down is one, 8 down is not looked for', () => {
    expect(refusedAtOnce(wrapped(0))).toBe(true);
    expect(refusedAtOnce(wrapped(7))).toBe(true);
    expect(refusedAtOnce(wrapped(8))).toBe(false);
    expect(refusedAtOnce(wrapped(20))).toBe(false);
  });

  it('inside an AggregateError the depth goes on counting', () => {
    expect(refusedAtOnce(new AggregateError([wrapped(6), wrapped(6)]))).toBe(true);
    expect(refusedAtOnce(new AggregateError([wrapped(6), wrapped(7)]))).toBe(false);
  });

  it('a chain that loops on itself: no verdict, and the walk ends', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(refusedAtOnce(a)).toBe(false);
  });
});
