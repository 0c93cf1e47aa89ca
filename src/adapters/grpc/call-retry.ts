/**
 * How a guarded call is retried, and the small rules around it: what `retry()` would retry, the
 * failure a caller sees when the retry loop ends, and grpc's wall-clock deadlines.
 *
 * A call runs its first attempt outside `retry()`; only a failure `retry()` would retry enters
 * it, handed that failure as its own first attempt (classified, counted in the budget, backed off
 * from, exactly as if it had run it). A call that succeeds first time, or fails in a way no
 * retry can help, costs no retry machinery: only its deposit in the budget.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import type { Schedule } from '../../core/backoff.js';
import { classify, leftHostRefusing } from '../../core/classify.js';
import type { Clock } from '../../core/clock.js';
import { DeadlineExceededError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../core/errors.js';
import { dialFailureOutcome } from '../../guard/dial-outcome.js';
import type { RetryBudget } from '../../retry/budget.js';
import { answeredByServer } from '../../core/classify-grpc.js';
import { ChannelConnectError, clientVerdict, notHttp2 } from './connect-error.js';
import { isStatusObject } from './status.js';

/** A guarded call's retry settings, resolved. */
export interface CallRetry {
  /** Most attempts, the first included (1: no retry). */
  readonly maxAttempts: number;
  /** Wait before each retry; undefined: `retry()`'s default. */
  readonly backoff: Schedule | undefined;
  /** The budget every call deposits into and every retry withdraws from; null: none. */
  readonly budget: RetryBudget | null;
  readonly clock: Clock;
  /** Status codes the server sent that an idempotent method is retried on (see retryableStatusCodes). */
  readonly statuses: ReadonlySet<number>;
  /** Aborted when the guard closes: a retry waiting out its backoff ends at once. */
  readonly shutdown: AbortSignal;
}

/** The trailer in which a server vetoes or paces a retry (grpc's retry design, A6). */
export const PUSHBACK = 'grpc-retry-pushback-ms';

/**
 * Whether `err` is a status the server sent (trailers-only: the caller checks the call was not
 * committed) whose code is in `statuses`, for an idempotent method, and the server did not veto a
 * retry. The pushback is read by {@link pushbackOf}.
 */
export function retryableStatus(err: unknown, idempotent: boolean, statuses: ReadonlySet<number>): boolean {
  if (!idempotent || statuses.size === 0 || !isStatusObject(err) || !statuses.has(err.code) || !answeredByServer(err)) return false;
  return pushbackOf(err) !== null;
}

/**
 * The server's `grpc-retry-pushback-ms` on a status: undefined when it sent none, the ms to wait
 * when it is a non-negative integer, null (do not retry) for anything else, as grpc specifies.
 */
export function pushbackOf(status: grpc.StatusObject): number | null | undefined {
  let values: unknown[];
  try {
    values = status.metadata.get(PUSHBACK);
  } catch {
    return undefined;
  }
  if (values.length === 0) return undefined;
  const text = String(values[0]);
  return /^\d{1,9}$/.test(text) ? Number(text) : null;
}

const NONE: ReadonlySet<number> = new Set();

/**
 * Whether `retry()` would retry `err` as a call's first failure (its default rule): never a
 * refusal by the breaker; a transient failure the server certainly never saw for any call, one it
 * may have seen only for an idempotent one; and a status in `statuses` the server sent an
 * idempotent method (see {@link retryableStatus}).
 */
export function worthRetrying(err: unknown, idempotent: boolean, statuses: ReadonlySet<number> = NONE): boolean {
  if (clientMistake(err)) return false;
  if (retryableStatus(err, idempotent, statuses)) return true;
  const c = classify(err);
  // A dial that left its host refused ends the call, as in retry() (see leftHostRefusing).
  return c.kind !== 'refused' && !(c.kind === 'dial' && leftHostRefusing(err)) && c.transient && (c.notSent || idempotent);
}

/**
 * Whether `err` is a channel connect that failed on the client's own configuration: the host
 * answered (it presented a certificate, sent an alert), and the client rejected it (a wrong CA,
 * server name or ALPN protocol), or it is not an HTTP/2 server at all (an HTTP/1.1 port: see
 * `notHttp2`). Trying again fails the same way, so it is never retried: a raw
 * grpc-js call fails at once there too. grpc-js words it UNAVAILABLE, which alone reads as
 * transient; the cause (Node's TLS error, see ChannelConnectError) tells.
 */
export function clientMistake(err: unknown): boolean {
  if (!(err instanceof ChannelConnectError)) return false;
  if (dialFailureOutcome(err) === 'succeeded' || notHttp2(err) || clientVerdict(err)) return true;
  // Per address: every address failed on the client's configuration (each presented the
  // certificate this client refused). Was read as a dial failure and retried: a wrong CA on a
  // name of three addresses cost 9 handshakes and ~1.5 s a call, and the shared retry budget.
  const cause: unknown = err.cause;
  return cause instanceof AggregateError && cause.errors.length > 0 && cause.errors.every((e) => (e instanceof ChannelConnectError ? clientMistake(e) : dialFailureOutcome(e) === 'succeeded'));
}

/**
 * The failure a caller sees when the retry loop ends with `err`: out of attempts or of budget, the
 * last attempt's own failure (`last`); the same when the loop stopped because the next wait would
 * outlast a deadline that has not passed yet (`deadlinePassed` false): the call failed as its
 * last attempt did (UNAVAILABLE for a server that is down, as raw grpc-js says), not by running
 * out of time (DEADLINE_EXCEEDED at 32 ms of a 300 ms deadline told a caller the server was slow);
 * anything else (a deadline that passed, the caller) as it is.
 */
export function finalFailure(err: unknown, last: unknown, deadlinePassed = true): unknown {
  if (err instanceof RetriesExhaustedError || err instanceof RetryBudgetExhaustedError) return last ?? err;
  if (err instanceof DeadlineExceededError && !deadlinePassed && last !== undefined) return last;
  return err;
}

/** Milliseconds until a grpc `deadline` (wall-clock Date or ms; Infinity for none). */
export function remaining(deadline: grpc.Deadline): number {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  if (at === Infinity) return Infinity;
  const left = at - Date.now();
  // NaN (an Invalid Date, arithmetic on undefined): already passed, as grpc-js reads it.
  return Number.isNaN(left) ? 0 : left;
}
