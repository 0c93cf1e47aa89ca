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
import { classify } from '../../core/classify.js';
import type { Clock } from '../../core/clock.js';
import { RetriesExhaustedError, RetryBudgetExhaustedError } from '../../core/errors.js';
import { dialFailureOutcome } from '../../guard/dial-outcome.js';
import type { RetryBudget } from '../../retry/budget.js';
import { ChannelConnectError } from './connect-error.js';

/** A guarded call's retry settings, resolved. */
export interface CallRetry {
  /** Most attempts, the first included (1: no retry). */
  readonly maxAttempts: number;
  /** Wait before each retry; undefined: `retry()`'s default. */
  readonly backoff: Schedule | undefined;
  /** The budget every call deposits into and every retry withdraws from; null: none. */
  readonly budget: RetryBudget | null;
  readonly clock: Clock;
}

/**
 * Whether `retry()` would retry `err` as a call's first failure (its default rule): never a
 * refusal by the breaker; a transient failure the server certainly never saw for any call, one it
 * may have seen only for an idempotent one.
 */
export function worthRetrying(err: unknown, idempotent: boolean): boolean {
  if (clientMistake(err)) return false;
  const c = classify(err);
  return c.kind !== 'refused' && c.transient && (c.notSent || idempotent);
}

/**
 * Whether `err` is a channel connect that failed on the client's own configuration: the host
 * answered (it presented a certificate, sent an alert), and the client rejected it (a wrong CA,
 * server name or ALPN protocol). Trying again fails the same way, so it is never retried: a raw
 * grpc-js call fails at once there too. grpc-js words it UNAVAILABLE, which alone reads as
 * transient; the cause (Node's TLS error, see ChannelConnectError) tells.
 */
export function clientMistake(err: unknown): boolean {
  return err instanceof ChannelConnectError && dialFailureOutcome(err) === 'succeeded';
}

/**
 * The failure a caller sees when the retry loop ends with `err`: out of attempts or of budget, the
 * last attempt's own failure (`last`); anything else (the deadline, the caller) as it is.
 */
export function finalFailure(err: unknown, last: unknown): unknown {
  if (err instanceof RetriesExhaustedError || err instanceof RetryBudgetExhaustedError) return last ?? err;
  return err;
}

/** Milliseconds until a grpc `deadline` (wall-clock Date or ms; Infinity for none). */
export function remaining(deadline: grpc.Deadline): number {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return at === Infinity ? Infinity : at - Date.now();
}
