/**
 * A refusal's message names the dial error behind it (errors.ts `describe`). An error whose
 * `cause` getter throws must still be named by what was read from it before: its code, or its
 * name. (It used to be dropped for the name of an outer wrapper, or for 'unknown'.)
 */
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';

/** The "last error ..." part of an open refusal's message whose cause is `cause`. */
function lastError(cause: unknown): string {
  const { message } = new HostUnavailableError('a:1', 100, 'open', undefined, { failures: 1, cause });
  const m = /last error (.*)\); refused without dialling/.exec(message);
  if (m === null) throw new Error(`unexpected message: ${message}`);
  return m[1] as string;
}

/** `err` with a `cause` getter that throws. */
function hostileCause<T extends object>(err: T): T {
  return Object.defineProperty(err, 'cause', {
    get() {
      throw new Error('no cause for you');
    },
  });
}

describe('describe keeps what it read when a cause getter throws', () => {
  it('an errno whose cause getter throws is named by its code', () => {
    const err = hostileCause(Object.assign(new Error('connect ECONNRESET'), { code: 'ECONNRESET' }));
    expect(lastError(err)).toBe('ECONNRESET');
    expect(lastError(new TypeError('fetch failed', { cause: err }))).toBe('ECONNRESET');
  });

  it('a gRPC status whose cause getter throws is named by its name and numeric code', () => {
    expect(lastError(hostileCause(Object.assign(new Error('14 UNAVAILABLE'), { code: 14 })))).toBe('Error 14');
  });

  it('an error without a code whose cause getter throws is named by its name', () => {
    expect(lastError(hostileCause(new RangeError('x')))).toBe('RangeError');
  });

  it('a code getter that throws loses only the code: the name and the cause still count', () => {
    const err = Object.defineProperty(new TypeError('x', { cause: Object.assign(new Error('y'), { code: 'EPIPE' }) }), 'code', {
      get() {
        throw new Error('no code');
      },
    });
    expect(lastError(err)).toBe('EPIPE');
    const bare = Object.defineProperty(new SyntaxError('x'), 'code', {
      get() {
        throw new Error('no code');
      },
    });
    expect(lastError(bare)).toBe('SyntaxError');
  });

  it('an object whose every read throws is unknown, and the refusal is still built', () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    expect(lastError(revoked.proxy)).toBe('unknown');
  });
});
