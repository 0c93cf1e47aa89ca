/**
 * Whose failure a failed dial was: the host's (it did not answer), nobody's against the host (it
 * answered, so it is alive), or this process's own (out of sockets or ports). Only the first may
 * count against a host (DESIGN.md rule 1): one client's wrong CA, hostname or ALPN must never
 * make a shared breaker refuse another client, and an EMFILE says nothing about the host.
 *
 * @module
 */
import { CERT_CODES, TLS_MISMATCH_ALERT } from '../core/tls-codes.js';
import { copiedFrom } from '../core/classify.js';
import { ErrorCodes, MAX_CHAIN_MEMBERS } from '../core/errors.js';

/** What a failed dial tells the breaker: settle the permit with this outcome. */
export type DialFailureOutcome = 'failed' | 'succeeded' | 'abandoned';

/**
 * Failures of this process, not of the host: no file descriptors, ports or buffers left, or its
 * own socket could not be bound as asked (a pinned `localPort` taken, a `localAddress` of the
 * other family or not allowed, a family this machine lacks). Nothing was sent: one job's
 * socket options opened a live host for every client of the shared breaker (an outside review).
 */
const LOCAL_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'EADDRNOTAVAIL', 'ENOBUFS', 'EADDRINUSE', 'EINVAL', 'EACCES', 'EAFNOSUPPORT']);

/**
 * Errors thrown before any I/O by this process's own setup (a TLS key that does not parse, a
 * `pfx` that is not one, an `establish` that throws at once): see {@link localFailure}.
 */
const LOCAL_FAILURES = new WeakSet<object>();

/**
 * Marks `err` as this process's own failure, met before anything was sent: a dial that fails
 * with it is abandoned, never counted against the host. Returns `err`.
 */
export function localFailure(err: unknown): unknown {
  if (typeof err === 'object' && err !== null) LOCAL_FAILURES.add(err);
  return err;
}

/**
 * A lookup of a caller restricted to one address family (or by non-zero `hints`) found no address
 * (`ENOTFOUND`): that is the caller's own choice, not the name's failure. Marks `err` as a
 * {@link localFailure} then; returns `err` either way.
 */
export function noAddressOfOwnChoice(err: unknown, family: number | undefined, hints: number | undefined): unknown {
  // 0 is Node's own default for both, spelled out: no restriction.
  const restricted = (family ?? 0) !== 0 || (hints ?? 0) !== 0;
  return restricted && (err as { code?: unknown } | null)?.code === 'ENOTFOUND' ? localFailure(err) : err;
}

/** How deep the cause chain is searched for a code. */
const MAX_DEPTH = 8;

/** The string `code` of `err` or of the first error in its cause chain that has one. */
function codeOf(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < MAX_DEPTH && typeof e === 'object' && e !== null; depth++) {
    let code: unknown;
    let cause: unknown;
    try {
      code = (e as { code?: unknown }).code;
      cause = (e as { cause?: unknown }).cause;
    } catch {
      return undefined; // a hostile getter: no verdict from it
    }
    if (typeof code === 'string') return code;
    e = cause;
  }
  return undefined;
}

/**
 * Decides how a failed dial settles its permit.
 *
 * - `succeeded`: the host answered, so it is alive; the caller still gets the error unchanged.
 *   A certificate or hostname verdict (the peer presented a certificate), a TLS alert the peer
 *   sent, a non-TLS answer (`ERR_SSL_WRONG_VERSION_NUMBER`), or any failure after the peer sent
 *   at least one byte (`answered`).
 * - `abandoned`: nobody's failure against the host: this process ran out of something (EMFILE,
 *   ENFILE, EADDRNOTAVAIL, ENOBUFS) or could not bind its socket as asked (EADDRINUSE, EINVAL,
 *   EACCES, EAFNOSUPPORT), the TLS layer refused our own configuration before the
 *   peer said anything (another `ERR_SSL_*` / `ERR_TLS_*`), the dial's own setup threw before
 *   any I/O ({@link localFailure}), JavaScript's own error for a bug with no code on its chain
 *   (a TypeError an `async` connector rejects with), or a breaker refused a dial made inside it
 *   (no I/O).
 * - `failed`: the host did not answer (refused, reset, unreachable, timed out...).
 *
 * @param answered - whether the peer sent anything before the failure (see `DialContext.answered`).
 */
export function dialFailureOutcome(err: unknown, answered = false): DialFailureOutcome {
  if (typeof err === 'object' && err !== null && LOCAL_FAILURES.has(copiedFrom(err))) return 'abandoned';
  const code = codeOf(err);
  if (code !== undefined) {
    // A breaker's refusal (a dial made inside this one, refused): no I/O, nothing of the host.
    if (LOCAL_CODES.has(code) || code === ErrorCodes.HOST_UNAVAILABLE) return 'abandoned';
    // A certificate the peer presented, or ours it asked for and then refused: it answered.
    if (CERT_CODES.has(code) || code === ErrorCodes.CLIENT_CERTIFICATE_REJECTED) return 'succeeded';
    if (code.startsWith('ERR_SSL_') && (/ALERT|WRONG_VERSION_NUMBER/.test(code) || TLS_MISMATCH_ALERT.test(code) || answered)) return 'succeeded';
  }
  if (answered) return 'succeeded';
  if (code !== undefined && (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_'))) return 'abandoned';
  if (code === undefined && programmingError(err)) return 'abandoned';
  return 'failed';
}

/**
 * Whether `err` is JavaScript's own error for a bug (TypeError, ReferenceError, SyntaxError,
 * RangeError, EvalError) with no code on its chain: this process's failure, whenever it is
 * thrown. A connector that throws synchronously is marked a {@link localFailure}; an `async` one
 * rejects instead, and its `TypeError('CONFIG is not set')` counted as the host's: 31 failed
 * rounds opened a healthy memcached node for every other client on the breaker (an outside
 * review). A network failure always carries a code (fetch's `TypeError: fetch failed` on its
 * cause), which keeps it the host's.
 */
function programmingError(err: unknown): boolean {
  return err instanceof TypeError || err instanceof ReferenceError || err instanceof SyntaxError || err instanceof RangeError || err instanceof EvalError;
}

/**
 * Whether a failed dial was refused by the host's kernel (`ECONNREFUSED`): the host's machine
 * answered at once that nothing listens on the port, as during a restart. Such a failure cost
 * one round trip, so probing it again soon costs nearly nothing. Read from the first code on the
 * error's cause chain; where the chain reaches an AggregateError with no code of its own before
 * any code (a connector of the user's racing addresses with `Promise.any`), refused when every
 * one of its members is (at most `MAX_CHAIN_MEMBERS` of them, as `findError` reads): such a dial was taken for a silent host's, its windows doubling (an
 * outside review: a 6 s restart still refused 3.3-4 s after, a single address 0.02-0.3 s).
 */
export function refusedAtOnce(err: unknown, depth = 0): boolean {
  let e: unknown = err;
  for (; depth < MAX_DEPTH && typeof e === 'object' && e !== null; depth++) {
    let code: unknown;
    let members: unknown;
    let cause: unknown;
    try {
      code = (e as { code?: unknown }).code;
      members = e instanceof AggregateError ? e.errors : undefined;
      cause = (e as { cause?: unknown }).cause;
    } catch {
      return false; // a hostile getter: no verdict from it
    }
    if (typeof code === 'string') return code === 'ECONNREFUSED';
    if (Array.isArray(members)) {
      const next = depth + 1;
      return members.length > 0 && members.length <= MAX_CHAIN_MEMBERS && members.every((m) => refusedAtOnce(m, next));
    }
    e = cause;
  }
  return false;
}
