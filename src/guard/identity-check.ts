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

/** The wrapper made for each check, and the wrappers themselves (wrapping one again is itself). */
const wrapped = new WeakMap<IdentityCheck, IdentityCheck>();
const wrappers = new WeakSet<IdentityCheck>();

/**
 * `check`, with what it throws returned as its verdict (an Error: the certificate is rejected).
 * One wrapper per check: requests passing the same function get the same wrapper, so they still
 * compare equal where a dial is shared by requests with the same options (got passes Node's own
 * `tls.checkServerIdentity` on every https request; wrapped anew each time, no two of them shared
 * a scout: 20 requests to a hung host, 20 dials; an outside review).
 */
export function caughtIdentityCheck(check: IdentityCheck): IdentityCheck {
  if (wrappers.has(check)) return check;
  let caught = wrapped.get(check);
  if (caught === undefined) {
    caught = function checkServerIdentity(this: unknown, host, cert) {
      try {
        return check.call(this, host, cert);
      } catch (err) {
        return asError(err);
      }
    } as IdentityCheck;
    wrapped.set(check, caught);
    wrappers.add(caught);
  }
  return caught;
}
