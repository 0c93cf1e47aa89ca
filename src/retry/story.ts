/**
 * A retried call's story, told on the error it fails with. The adapters fail a call with its last
 * attempt's own error (`ECONNREFUSED`, `UND_ERR_SOCKET`, `ERR_HTTP2_GOAWAY_SESSION`...), as the
 * client alone would have, so code that checks `err.code` keeps working; the verdict behind it
 * (attempts run out, or the retry budget said no) rides on that error for {@link retriesOf}.
 *
 * @module
 */
import { HostUnavailableError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../core/errors.js';
import { releaseFrames } from '../core/release-frames.js';
import { isError } from '../core/validate.js';

/** Where {@link retriesOf} finds the story on an error (one symbol for every adapter). */
const RETRIES = Symbol.for('dialguard.undici.retries');

/** A verdict that ends a retried call: attempts run out, or the budget refused the next. */
export type RetryVerdict = RetriesExhaustedError | RetryBudgetExhaustedError;

/**
 * @internal `verdict` told on `last` (the last attempt's own error), which is returned; `verdict`
 * itself when `last` cannot carry it (not an Error, or frozen).
 */
export function tellStory(last: unknown, verdict: RetryVerdict): unknown {
  if (!isError(last) || !Object.isExtensible(last)) return verdict;
  // `last` may be the error the breaker keeps as its host's last (a failed dial): the story rides
  // on it for as long, and must not keep this call's frames (its handler, its request body).
  Object.defineProperty(last, RETRIES, { value: releaseFrames(verdict), configurable: true, writable: true, enumerable: false });
  return last;
}

/**
 * @internal What the caller is told for retry()'s rejection `err`: a verdict becomes its last
 * attempt's own error, the verdict told on it; anything else (a deadline, an abort, an error not
 * worth retrying) as it is.
 */
export function withStory(err: unknown): unknown {
  if (!(err instanceof RetriesExhaustedError) && !(err instanceof RetryBudgetExhaustedError)) return err;
  let last: unknown = err instanceof RetriesExhaustedError ? err.errors[err.errors.length - 1] : err.cause;
  if (last instanceof RetriesExhaustedError) last = last.errors[last.errors.length - 1];
  return tellStory(last, err);
}

/**
 * The retry story of an error a guarded call failed with (`GuardedAgent`, `guardedRetry()`,
 * `Http2Client`): the {@link RetriesExhaustedError} (every attempt's error in `errors`) or the
 * {@link RetryBudgetExhaustedError} behind it; undefined when the call ended without that verdict
 * (an error not worth retrying, a deadline, an abort, a breaker's refusal).
 *
 * These clients fail a call with its last attempt's own error, so code that checks `err.code`
 * works as with the client alone; this is where the attempts before it are. Given fetch()'s
 * `TypeError: fetch failed` (or another wrapper), it reads the story from its `cause` chain, up to
 * 4 errors deep. The story rides on the error object itself: when a client fails several requests
 * with one error object (a failed connect fails every request queued for it), it holds the story
 * of the call that ended last.
 */
export function retriesOf(err: unknown): RetryVerdict | undefined {
  // fetch() rejects with its own TypeError('fetch failed') whose `cause` is the call's error: the
  // story is read through it (was: undefined for every fetch error, the README's first example).
  // A few causes deep at most: a wrapper of the caller's own around that is read too.
  let at: unknown = err;
  for (let depth = 0; depth < 4 && typeof at === 'object' && at !== null; depth++) {
    let story: unknown;
    let cause: unknown;
    try {
      story = (at as { [RETRIES]?: unknown })[RETRIES];
      cause = (at as { cause?: unknown }).cause;
    } catch {
      return undefined; // a throwing getter (a hostile proxy): no story to read
    }
    if (story instanceof RetriesExhaustedError || story instanceof RetryBudgetExhaustedError) return story;
    // A refusal's cause is the dial error that opened the host, another call's (with that call's
    // story on it): a refused call has no story of its own (it was handed the other's; an
    // outside review).
    if (at instanceof HostUnavailableError) return undefined;
    at = cause;
  }
  return undefined;
}
