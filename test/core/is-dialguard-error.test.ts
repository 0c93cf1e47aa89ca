/**
 * From a `catch` (`unknown`) to a narrowing `switch (err.code)` with no cast (an outside review,
 * r129: `instanceof DialguardError` gives the base class, whose `code` narrows nothing, so
 * `err.retryAfter` did not compile after `case 'DIALGUARD_HOST_UNAVAILABLE'`). Checked by the
 * type-checker (`npm run typecheck` covers the tests) and at run time.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { type AnyDialguardError, ConnectTimeoutError, DialguardError, HostUnavailableError, isDialguardError } from '../../src/index.js';

/** What a caller writes in its catch. */
function handle(err: unknown): string {
  if (!isDialguardError(err)) return 'not ours';
  expectTypeOf(err).toEqualTypeOf<AnyDialguardError>();
  switch (err.code) {
    case 'DIALGUARD_HOST_UNAVAILABLE':
      return `refused, again in ${err.retryAfter} ms`;
    case 'DIALGUARD_CONNECT_TIMEOUT':
      return `timed out in ${err.phase}`;
    default:
      return err.code;
  }
}

describe('isDialguardError', () => {
  it('narrows unknown to the union of dialguard\'s errors, whose code narrows each class', () => {
    expect(handle(new HostUnavailableError('h:1', 250, 'open'))).toBe('refused, again in 250 ms');
    expect(handle(new ConnectTimeoutError('h:1', 5, 'tls'))).toBe('timed out in tls');
  });

  it('is false for anything else, a wrapped dialguard error included (findError looks inside)', () => {
    for (const other of [new Error('x'), new TypeError('fetch failed', { cause: new HostUnavailableError('h:1', 5, 'open') }), undefined, null, 'DIALGUARD_HOST_UNAVAILABLE', { code: 'DIALGUARD_HOST_UNAVAILABLE' }]) {
      expect(isDialguardError(other)).toBe(false);
      expect(handle(other)).toBe('not ours');
    }
  });

  it('agrees with instanceof DialguardError', () => {
    const err = new ConnectTimeoutError('h:1', 5, 'tcp');
    expect(isDialguardError(err)).toBe(err instanceof DialguardError);
  });
});
