/**
 * What `retry` takes and hands out: the attempt, the result, the options with their defaults,
 * and their validation (on every call, errors naming the option and the bad value).
 *
 * @module
 */
import { type Schedule, unitRandom } from '../core/backoff.js';
import { restartSpanningBackoff } from '../core/restart-backoff.js';
import { type Classification, type ClassifyOptions, checkClassifyOptions } from '../core/classify.js';
import { type Clock, checkedClock, systemClock } from '../core/clock.js';
import { checkBoolean, checkDuration, checkFunction, checkInteger, checkNumber, checkSignal, opt, show } from '../core/validate.js';
import { RetryBudget, sharedRetryBudget } from './budget.js';

/** What `fn` gets on each attempt. */
export interface RetryAttempt {
  /** 1 for the first attempt. */
  readonly number: number;
  /**
   * Aborted when the overall deadline passes (reason: DeadlineExceededError), the caller's
   * signal aborts (its reason) or `shutdown` aborts (its reason). Pass it to the I/O.
   */
  readonly signal: AbortSignal;
  /** The overall deadline, absolute, on the clock `retry` uses; Infinity when there is none. */
  readonly deadline: number;
  /**
   * Whole milliseconds left of the overall deadline, read now and rounded down (Infinity when
   * there is none; at most 2^31-1, the longest a timer holds, when it is further out). Pass it on
   * as this attempt's own timeout, e.g. a long poll's wait time or
   * `AbortSignal.timeout(attempt.remaining)` (with a deadline: Infinity is no timeout).
   */
  readonly remaining: number;
}

/** How a call ended, for metrics that must cover the whole call (rule 12). */
export interface RetryResult {
  /**
   * Whether the call succeeded. False when it rejected (`error` says with what), and also when it
   * resolved with an answer it could not get past (an undici request handed a 503 once no retry
   * could follow: no `error`, the answer's `classification`).
   */
  readonly ok: boolean;
  /** Attempts started. */
  readonly attempts: number;
  /** From the call's start to its end, ms: every attempt and every wait between them. */
  readonly elapsed: number;
  /** What the call rejected with, when it failed. */
  readonly error?: unknown;
  /** The classification of the last attempt's failure, if an attempt failed. */
  readonly classification?: Classification;
}

/** What a per-call {@link RetryOptions.onRetry} hook is told about the retry about to be waited for. */
export interface RetryInfo {
  /** The attempt that just failed (1 for the first); the next one is `attempt + 1`. */
  readonly attempt: number;
  /** What that attempt failed with. */
  readonly error: unknown;
  /** How that failure was classified (the reason it may be retried). */
  readonly classification: Classification;
  /** The wait chosen before the next attempt, ms (jitter applied). */
  readonly delay: number;
  /** Whole milliseconds left of the overall deadline now (rounded down), before the wait; Infinity when there is none. */
  readonly remaining: number;
}

/**
 * Decides whether a failure may be retried, overriding the default (`transient && (notSent ||
 * idempotent)`); return undefined to keep the default. Any other answer is ignored (the default
 * kept, a process warning once per predicate); a predicate that throws ends the call with its
 * error. Not asked about refusals by the breaker,
 * the caller's abort, shutdown or the deadline: those always end the call.
 */
export type RetryPredicate = (err: unknown, classification: Classification, attempt: RetryAttempt) => boolean | undefined;

/**
 * Set (true) on the options of a retry loop an adapter runs inside a call it reports itself
 * (Http2Client's dials again, reported on `http2:settled`): its end is not published on
 * `retry:settled`, so the call is heard once (it was heard twice: two `call.duration` records
 * for one request; an outside review). Its `onResult` still hears it.
 *
 * @internal
 */
export const REPORTED_BY_CALLER: unique symbol = Symbol('dialguard.retry.reportedByCaller');

/** Options of `retry`. Validated on every call; every one has a default. */
export interface RetryOptions {
  /**
   * The whole call's budget, ms from the start, across every attempt and wait. Default none
   * (Infinity): only the caller knows how long its answer is worth; `maxAttempts` still bounds it.
   */
  timeout?: number;
  /**
   * The same as an absolute time on `clock`; with `timeout`, the earlier wins. Default none. On
   * the default clock that is `performance.now()` time: a `Date.now()` time (decades ahead on it)
   * is refused with a RangeError.
   */
  deadline?: number;
  /**
   * When the call began, on `clock`, for a caller that made the first attempt itself before
   * handing the call to retry(): `timeout`, the retry window and `elapsed` count from it. Default
   * now. Finite, and not later than `clock.now()` (a call cannot have begun in the future: its
   * attempts would get more than `timeout`); on the default clock a `performance.now()` time.
   * Anything else is a RangeError (a `Date.now()` time is decades ahead of `performance.now()`).
   */
  start?: number;
  /** The caller's cancellation: aborting rejects the call with `signal.reason`. Default none. */
  signal?: AbortSignal;
  /**
   * The owner shutting down: aborting stops the call (and its wait) and rejects with
   * `shutdown.reason` (seed 004's shutdownCh). Default none.
   */
  shutdown?: AbortSignal;
  /**
   * Receives, once as the call starts, a function that cancels it as an abort of `signal` would:
   * the call stops (and its wait) and rejects with the reason given. For a caller with a cancel
   * path of its own, called per request: on Node 20 an AbortSignal costs microseconds to make
   * and as much to listen to. Default none.
   */
  cancel?: (cancel: (reason: unknown) => void) => void;
  /**
   * Most attempts, the first included. Default 3: the first try and two retries ride out one
   * failover and one blip without tripling the load. `Infinity` (retry until the deadline) needs
   * a `timeout` or `deadline`.
   */
  maxAttempts?: number;
  /**
   * Whether repeating the call is harmless. Default false: a failure the server may have seen is
   * retried only when this is true; one it never saw (notSent) is retried either way.
   */
  idempotent?: boolean;
  /**
   * How long after the first attempt started a retry may still start, ms. Default Infinity: until
   * the deadline. A fixed hold time shorter than a long poll made long polls unretryable (seed
   * 004's RPCHoldTimeout): if you set one, make it the poll's own max time plus the hold time.
   */
  retryWindow?: number;
  /**
   * The wait before each retry. Default {@link restartSpanningBackoff} (400-600 ms, then
   * 800-1 200 ms, doubling, capped at 10 s), as the adapters': three attempts span a 0.3-1 s
   * server restart, and clients that failed together come back spread out. (It was full jitter
   * from 100 ms: a deploy's restart took all three attempts within ~300 ms, and a long poll gave up
   * with most of its deadline left; an outside review.) An answer of 2^31-1 ms or more (Infinity
   * included: the longest a timer holds) ends the retries, as running out of attempts does.
   */
  backoff?: Schedule;
  /** Overrides the default retry decision (e.g. "no leader" is always safe). Default none. */
  retryable?: RetryPredicate;
  /** @internal See {@link REPORTED_BY_CALLER}. */
  [REPORTED_BY_CALLER]?: boolean;
  /**
   * The retry budget to withdraw from. Default {@link sharedRetryBudget}, one per process; `null`
   * for none (every retry allowed by the rest of the options).
   */
  budget?: RetryBudget | null;
  /** Time source for the deadline and the waits. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * Uniform [0, 1) source for the backoff's jitter. Default `Math.random`. An answer outside
   * [0, 1) (NaN, Infinity) or a throw is replaced by a `Math.random` draw (a throw is also a
   * process warning, once): a NaN made every client's backoff 0 ms.
   */
  random?: () => number;
  /** Patterns and hook for `classify` (the caller's signal is added). Default none. */
  classify?: ClassifyOptions;
  /**
   * Called once when the call ends, with whole-call data for metrics. Default none. Not awaited:
   * one that throws, or returns a promise that rejects, is a process warning, never the call's
   * outcome.
   */
  onResult?: (result: RetryResult) => void;
  /**
   * Called before each wait for a retry, once every check has allowed it (retryable, attempts,
   * window, deadline, budget). A hook that throws, or returns a promise that rejects, ends the
   * call with that error: a hook is never swallowed. A returned promise is awaited (the caller's
   * abort, shutdown and the deadline still interrupt it) and its time counts against the
   * deadline. Default none.
   */
  onRetry?: (info: RetryInfo) => void | PromiseLike<void>;
}

const YEAR = 365.25 * 24 * 3_600_000;
/** How far ahead a deadline on the default clock is taken as a Date.now() time by mistake: 10 years. */
const WALL_CLOCK_LIKE = 10 * YEAR;

/** Options resolved for one call: defaults applied, values checked, the deadline made absolute. */
export interface Settings {
  deadline: number;
  budgetMs: number;
  maxAttempts: number;
  idempotent: boolean;
  retryWindow: number;
  backoff: Schedule;
  retryable: RetryPredicate | undefined;
  budget: RetryBudget | null;
  clock: Clock;
  random: () => number;
  classify: ClassifyOptions | undefined;
  signal: AbortSignal | undefined;
  shutdown: AbortSignal | undefined;
  cancel: ((cancel: (reason: unknown) => void) => void) | undefined;
  onResult: ((result: RetryResult) => void) | undefined;
  onRetry: ((info: RetryInfo) => void | PromiseLike<void>) | undefined;
  start: number;
}

let defaultBackoff: Schedule | undefined;

/**
 * A `start` the caller gave: finite (Infinity made the deadline Infinity, so a timeout was
 * dropped), on the default clock not a Date.now() time (decades ahead of performance.now(): the
 * deadline counted from it never came, so a loop with `maxAttempts: Infinity` and a 300 ms
 * timeout ran on; an outside review), and not ahead of now (a start 1 s ahead gave a 1 s
 * `timeout` 2 s, one 60 s ahead ran on past it; an outside review).
 */
function checkedStart(value: unknown, clock: Clock, now: number): number {
  const start = checkNumber('start', value, Number.NEGATIVE_INFINITY);
  if (!Number.isFinite(start)) throw new RangeError(`start must be a finite time on the clock, got ${show(start)}`);
  if (start <= now) return start;
  if (clock === systemClock && start - now > WALL_CLOCK_LIKE) {
    throw new RangeError(`start is on the clock, performance.now() by default, not Date.now(): got ${start}, ${Math.round((start - now) / YEAR)} years ahead; pass performance.now()`);
  }
  throw new RangeError(`start must not be later than the clock's now: got ${start}, ${start - now} ms ahead (when the call began, on the same clock)`);
}

/**
 * Applies the defaults to one call's options and checks them; the deadline becomes absolute on
 * the call's clock (the earlier of `deadline` and `clock.now() + timeout`). `fallbackBackoff`:
 * the backoff when the options give none (a layer's own default, as ServerSet's; a copy of the
 * options made per call to set it cost a ServerSet call ~6 µs of CPU in settings alone).
 *
 * @throws TypeError/RangeError naming the option and the bad value.
 */
export function settings(options: RetryOptions, fallbackBackoff?: Schedule): Settings {
  if (typeof options !== 'object' || options === null) throw new TypeError(`retry options must be an object, got ${show(options)}`);
  const clock = checkedClock(options.clock);
  const now = clock.now();
  const start = options.start === undefined ? now : checkedStart(options.start, clock, now);
  const timeout = options.timeout === undefined ? Infinity : checkDuration('timeout', options.timeout, 0, true, Infinity); // retry() re-arms its deadline timer past 2^31-1 ms
  const absolute = options.deadline === undefined ? Infinity : checkNumber('deadline', options.deadline, Number.NEGATIVE_INFINITY);
  // On the default clock (performance.now(): ms since this process started) a deadline decades
  // ahead is a wall-clock time (Date.now() + ms): taken as given, it never came, and it counted
  // as the bound an endless maxAttempts needs.
  if (clock === systemClock && Number.isFinite(absolute) && absolute - start > WALL_CLOCK_LIKE) {
    throw new RangeError(`deadline is on the clock, performance.now() by default, not Date.now(): got ${absolute}, ${Math.round((absolute - start) / YEAR)} years away; pass performance.now() + ms, or a timeout`);
  }
  const deadline = Math.min(absolute, start + timeout);
  const maxAttempts = options.maxAttempts === Infinity ? Infinity : checkInteger('maxAttempts', opt(options.maxAttempts, 3), 1);
  if (maxAttempts === Infinity && deadline === Infinity) {
    throw new RangeError('maxAttempts Infinity needs a timeout or deadline: a retry loop must be bounded');
  }
  const idempotent = checkBoolean('idempotent', options.idempotent, false);
  const budget = options.budget === undefined ? sharedRetryBudget() : options.budget;
  if (budget !== null && !(budget instanceof RetryBudget)) throw new TypeError(`budget must be a RetryBudget or null, got ${show(budget)}`);
  checkClassifyOptions('classify', options.classify);
  defaultBackoff ??= restartSpanningBackoff;
  return {
    start,
    deadline,
    // The timeout as given when it set the deadline: `(start + timeout) - start` on a fractional
    // clock read 299.9999999999999 in the DeadlineExceededError of a 300 ms timeout.
    budgetMs: deadline === start + timeout ? timeout : deadline - start,
    maxAttempts,
    idempotent,
    retryWindow: checkDuration('retryWindow', opt(options.retryWindow, Infinity), 0, true),
    backoff: checkFunction<Schedule>('backoff', opt<Schedule>(options.backoff, fallbackBackoff ?? defaultBackoff)),
    retryable: options.retryable === undefined ? undefined : checkFunction<RetryPredicate>('retryable', options.retryable),
    budget,
    clock,
    random: options.random === undefined ? Math.random : unitRandom(checkFunction<() => number>('random', options.random), Math.random, "retry()'s"),
    classify: options.classify,
    signal: checkSignal('signal', options.signal),
    shutdown: checkSignal('shutdown', options.shutdown),
    cancel: options.cancel === undefined ? undefined : checkFunction<(cancel: (reason: unknown) => void) => void>('cancel', options.cancel),
    onResult: options.onResult === undefined ? undefined : checkFunction<(result: RetryResult) => void>('onResult', options.onResult),
    onRetry: options.onRetry === undefined ? undefined : checkFunction<(info: RetryInfo) => void | PromiseLike<void>>('onRetry', options.onRetry),
  };
}
