/**
 * A TLS `checkServerIdentity` that cannot throw.
 *
 * Node calls the check inside the socket's handshake event: what it throws escapes as an
 * uncaughtException, the socket never reports 'secureConnect' nor an error, and a guarded dial
 * waited out its whole connect timeout and counted that as the host's failure. One client's
 * broken callback then opened the breaker every client shares. Returned instead, the error fails
 * the handshake as a rejected certificate does: that dial fails at once with the callback's own
 * error, and the host, which answered, is not blamed.
 *
 * @internal
 * @module
 */
import type tls from 'node:tls';
import { asError } from '../core/validate.js';

type IdentityCheck = NonNullable<tls.ConnectionOptions['checkServerIdentity']>;

/** `check`, with what it throws returned as its verdict (an Error: the certificate is rejected). */
export function caughtIdentityCheck(check: IdentityCheck): IdentityCheck {
  return function checkServerIdentity(this: unknown, host, cert) {
    try {
      return check.call(this, host, cert);
    } catch (err) {
      return asError(err);
    }
  };
}
