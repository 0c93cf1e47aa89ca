/**
 * Each error class's `code` is its own literal, not the whole ErrorCode union (an outside review:
 * after `instanceof HostUnavailableError`, `code` was any of the eleven, and a `switch` on it
 * narrowed nothing). Checked by the type-checker (`npm run typecheck` covers the tests) and at
 * run time.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { type AnyDialguardError, ConnectTimeoutError, HostUnavailableError, RetriesExhaustedError } from '../../src/index.js';

describe('error codes are literal types', () => {
  it('after instanceof, code is that class\'s literal', () => {
    const err: unknown = new HostUnavailableError('h:1', 5, 'open');
    if (!(err instanceof HostUnavailableError)) throw new Error('not a refusal');
    const code: 'DIALGUARD_HOST_UNAVAILABLE' = err.code;
    expectTypeOf(err.code).toEqualTypeOf<'DIALGUARD_HOST_UNAVAILABLE'>();
    expectTypeOf(new ConnectTimeoutError('h:1', 5, 'tcp').code).toEqualTypeOf<'DIALGUARD_CONNECT_TIMEOUT'>();
    expect(code).toBe('DIALGUARD_HOST_UNAVAILABLE');
  });

  it('a switch on AnyDialguardError\'s code narrows to the class', () => {
    const describeIt = (err: AnyDialguardError): string => {
      switch (err.code) {
        case 'DIALGUARD_HOST_UNAVAILABLE':
          return `refused, again in ${err.retryAfter} ms`;
        case 'DIALGUARD_RETRIES_EXHAUSTED':
          return `${err.errors.length} attempts`;
        default:
          return err.code;
      }
    };
    expect(describeIt(new HostUnavailableError('h:1', 5, 'open'))).toMatch(/^refused, again in \d+ ms$/);
    expect(describeIt(new RetriesExhaustedError([new Error('a'), new Error('b')], 'attempts'))).toBe('2 attempts');
  });
});
