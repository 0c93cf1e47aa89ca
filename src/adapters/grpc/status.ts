/**
 * The grpc status a caller sees when dialguard ends a call itself, and how it says why.
 *
 * The code is what grpc-js itself would have used (UNAVAILABLE for a host that cannot be reached,
 * DEADLINE_EXCEEDED for a deadline), so code written against grpc-js keeps working. The details
 * start with `dialguard: ` and the status carries the dialguard error as `cause` (grpc-js copies
 * the status onto the `ServiceError` it hands the caller, so `err.cause` is that error), and its
 * stable code in the metadata as `dialguard-code`; a refusal by the breaker adds
 * `dialguard-retry-after-ms`.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import { DIALGUARD_DETAILS_PREFIX } from '../../core/classify-grpc.js';
import { DialguardError, HostUnavailableError } from '../../core/errors.js';
import { ChannelConnectError } from './connect-error.js';
import { isError, thrownText } from '../../core/validate.js';

/** Metadata key carrying the dialguard error's stable code. */
export const METADATA_CODE = 'dialguard-code';
/** Metadata key carrying, for a refused host, the ms until it may be dialled again. */
export const METADATA_RETRY_AFTER = 'dialguard-retry-after-ms';

/** A grpc status that dialguard made up, with the error behind it. */
export interface GuardStatus extends grpc.StatusObject {
  /** The dialguard error (or other failure) that ended the call. */
  cause?: unknown;
}

/** Whether `value` is a status object grpc-js delivered (not an Error). */
export function isStatusObject(value: unknown): value is grpc.StatusObject {
  if (typeof value !== 'object' || value === null || value instanceof Error) return false;
  const v = value as Partial<grpc.StatusObject>;
  return typeof v.code === 'number' && typeof v.details === 'string' && v.metadata instanceof grpc.Metadata;
}

/** Errors a callback of the user's threw (see {@link callbackFailure}). */
const CALLBACK_FAILURES = new WeakSet<object>();

/**
 * Marks `err`, thrown by a callback of the user's (`hostOf`), as the caller's own bug: the call
 * it ends fails INTERNAL, never UNAVAILABLE, which every retry policy reads as an outage and
 * retries (an outside review). Returns it (a thrown non-object is wrapped in an Error).
 */
export function callbackFailure(err: unknown): Error {
  const error = isError(err) ? err : new Error(String(err));
  CALLBACK_FAILURES.add(error);
  return error;
}

/** The status for a failure that ended a call before (or instead of) a server's answer. */
export function statusFor(err: unknown, code: grpc.status = grpc.status.UNAVAILABLE): GuardStatus {
  if (isStatusObject(err)) return err;
  if (typeof err === 'object' && err !== null && CALLBACK_FAILURES.has(err)) code = grpc.status.INTERNAL;
  if (err instanceof ChannelConnectError && typeof err.toStatus === 'function') {
    // grpc-js's own words for the failed connect, as a raw channel would have reported them, with
    // the class's brand and the quoted failure as `cause` (see ChannelConnectError).
    return err.toStatus();
  }
  const metadata = new grpc.Metadata();
  let message: string;
  try {
    if (err instanceof DialguardError) {
      metadata.set(METADATA_CODE, err.code);
      if (err instanceof HostUnavailableError) metadata.set(METADATA_RETRY_AFTER, String(Math.ceil(err.retryAfter)));
    }
    message = isError(err) ? err.message : String(err);
  } catch (thrown) {
    // An error that cannot be read (a getter that throws, a hostile Proxy): the call still ends,
    // with what can be said. Thrown here, it escaped grpc-js's callbacks as an uncaught exception
    // and ended the process (an outside review, r147: a copied refusal's `retryAfter`).
    message = `an error that could not be read (${thrownText(thrown)})`;
  }
  return { code, details: `${DIALGUARD_DETAILS_PREFIX}${message}`, metadata, cause: err };
}
