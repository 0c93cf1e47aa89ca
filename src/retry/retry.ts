/**
 * One logical call, retried only when that is safe, and only inside the time the caller gave.
 *
 * - Every attempt gets the REMAINING time of one overall deadline, never a fresh budget: a
 *   5-minute long poll that fails at 4 minutes is retried with 1 minute, and the whole call never
 *   outlasts 5 minutes (seed 004).
 * - A failure the server certainly never saw (`classify(...).notSent`: a refused connect, a
 *   refused stream) is retried for any call; one it may have seen only for an idempotent call.
 * - A refusal by the breaker is permanent: the loop ends at once (rule 5).
 * - The wait between attempts is jittered, abortable, and never slept if it would end past the
 *   deadline: the call fails now instead of sleeping uselessly.
 * - A shared {@link RetryBudget} caps retries at a fraction of calls, so a fleet cannot multiply
 *   an outage.
 *
 * @module
 */
import { type Schedule, safeDelay } from '../core/backoff.js';
import { restartSpanningBackoff } from '../core/restart-backoff.js';
import { type Classification, type FailureKind, classify, leftHostRefusing, neverSent, sentEarlier, toldAsSentEarlier } from '../core/classify.js';
import { timeoutReasonOf } from '../core/classify-rules.js';
import { type Clock, type TimerHandle, sleep } from '../core/clock.js';
import { DeadlineExceededError, RetriesExhaustedError, RetryBudgetExhaustedError, isPermanent } from '../core/errors.js';
import { EventHub, type Listener, type Unsubscribe } from '../core/events.js';
import { type CallTraceMessage, attemptTrace, callTrace, traced, unsuccessfulOf } from '../observe/tracing.js';
import { checkFunction, MAX_DURATION, show, thrownText } from '../core/validate.js';
import { containAnswer, warnOnce } from '../core/warn-once.js';
import { REPORTED_BY_CALLER, type RetryAttempt, type RetryOptions, type RetryPredicate, type RetryResult, settings } from './retry-options.js';
import { onCallerAbort } from '../core/shared-signal.js';

export type { RetryAttempt, RetryInfo, RetryOptions, RetryPredicate, RetryResult } from './retry-options.js';

/** Payloads of the retry loop's events (also published on `dialguard:retry:<event>`). */
export interface RetryEvents {
  /** A retry was decided: attempt `attempt` starts after `delay` ms, because of a `kind` failure. */
  scheduled: { attempt: number; delay: number; code: string | undefined; kind: FailureKind };
  /** A retry was wanted but the budget refused it; `attempt` is the attempt that just failed. */
  'budget-exhausted': { attempt: number };
  /**
   * A call ended: whole-call latency, every attempt and wait included (rule 12). Fires per call
   * (and costs nothing unless someone listens): for metrics, not logs. `kind`: the last
   * attempt's failure's kind, else (the caller's signal or the deadline ended the call before any
   * attempt failed on its own) the kind of what the call failed with; undefined for a success.
   */
  settled: { ok: boolean; attempts: number; elapsed: number; kind: FailureKind | undefined };
}


const events = new EventHub<RetryEvents>('retry', { scheduled: true, 'budget-exhausted': true, settled: true });
/** Who hears `settled`: asked on every call's end, so held rather than looked up each time. */
const settledAudience = events.audience('settled');

/** Listens for the retry loop's events (every call in the process); returns the function that stops. */
export function onRetryEvent<K extends keyof RetryEvents>(event: K, listener: Listener<RetryEvents[K]>): Unsubscribe {
  return events.on(event, listener);
}

/**
 * Whether anyone hears a call's end through {@link reportSettled}: its `onResult`, or a listener
 * of the `settled` event. A layer that builds the result (and reads the clock for its `elapsed`)
 * only to report it asks first: on a healthy path nobody usually listens.
 *
 * @internal
 */
export function settledHeard(onResult?: (result: RetryResult) => void): boolean {
  return onResult !== undefined || settledAudience.heard;
}

/**
 * The kind a call's end is reported with: its last attempt's failure's, else (its caller or its
 * deadline ended it before any attempt failed on its own) what it failed with. A caller's
 * `AbortSignal.timeout` was reported with no kind where Http2Client said `timeout` (a review).
 */
function settledKind(result: RetryResult): FailureKind | undefined {
  if (result.classification !== undefined) return result.classification.kind;
  return result.ok || result.error === undefined ? undefined : classify(result.error).kind;
}

/**
 * Reports a call's end: the `settled` event (when anyone listens) and the caller's `onResult`
 * (a throwing one becomes a warning). Also for a layer that ends a call without entering retry()
 * (its first attempt succeeded), so every call is reported once, the same way.
 *
 * @internal
 */
export function reportSettled(result: RetryResult, onResult?: (result: RetryResult) => void, publish = true): void {
  if (publish && settledAudience.heard) {
    events.emit('settled', { ok: result.ok, attempts: result.attempts, elapsed: result.elapsed, kind: settledKind(result) });
  }
  if (onResult === undefined) return;
  try {
    const answer: unknown = onResult(result);
    if (answer !== undefined) containAnswer('retry onResult threw', onResult, answer); // an async one that rejects
  } catch (err) {
    process.emitWarning(`dialguard: retry onResult threw: ${thrownText(err)}`);
  }
}


/** Why the call was interrupted from outside an attempt's own outcome. */
type Stop = 'caller' | 'shutdown' | 'deadline';

/**
 * Runs `fn` until it succeeds, a failure may not be retried, or the attempts, the retry window,
 * the budget or the deadline run out.
 *
 * Rejects with: the caller's `signal.reason` when it aborts; `shutdown.reason` on shutdown;
 * {@link DeadlineExceededError} when the deadline passes or the next wait would end past it (its
 * `cause` is the last attempt's error, or a {@link RetriesExhaustedError} holding every attempt's
 * error when there were several); {@link RetriesExhaustedError} (`errors`: each attempt's) when
 * attempts or the retry window run out; {@link RetryBudgetExhaustedError} (same `cause`) when the
 * budget refuses a retry; otherwise the error of the attempt that may not be retried, as is
 * (a breaker's refusal, an application error, a maybe-sent failure of a non-idempotent call), or,
 * when it says "not sent" after an earlier attempt may have reached the server, a copy of it
 * that does not (same class and `code`; see {@link classify}'s `notSent`).
 *
 * Around a client that retries itself (GuardedAgent, Http2Client, GrpcGuard) the attempts
 * multiply (3 × 3 runs of a handler that ran and reset): give that client `maxAttempts: 1`.
 *
 * Option errors reject the returned promise (TypeError/RangeError naming the option).
 */
export function retry<T>(fn: (attempt: RetryAttempt) => T | PromiseLike<T>, options: RetryOptions = {}): Promise<T> {
  return retryWith(fn, options, undefined);
}

/**
 * {@link retry}, with `fallbackBackoff` as the backoff when `options` give none (a layer's own
 * default, as ServerSet's failover backoff). `failover`: each attempt goes to another server, so
 * a retry after an attempt that was never sent spends no retry budget.
 *
 * @internal
 */
export async function retryWith<T>(fn: (attempt: RetryAttempt) => T | PromiseLike<T>, options: RetryOptions, fallbackBackoff: Schedule | undefined, failover = false): Promise<T> {
  checkFunction('fn', fn);
  const s = settings(options, fallbackBackoff);
  const { clock } = s;
  const publish = options[REPORTED_BY_CALLER] !== true;
  const errors: unknown[] = [];
  let attempts = 0;
  let last: Classification | undefined;
  /** An attempt failed in a way that may have reached the server (not "not sent"). */
  let reached = false;
  /**
   * `err`, made here to end the call, marked when an attempt may have reached the server (see
   * sentEarlier), or, made between attempts (`between`: none in flight) when none did, as never
   * sent (see neverSent): a deadline that ended a run of refused dials said "maybe sent", and a
   * POST a caller could have re-queued safely was written off (an outside review, r145).
   */
  const ending = <E>(err: E, between = true): E => (reached ? sentEarlier(err) : between ? neverSent(err) : err);
  let stop: Stop | undefined;

  // The call's AbortSignal (`attempt.signal`) is made only when something reads it, and the
  // attempt being awaited is interrupted through `interrupt` rather than an 'abort' listener: on
  // Node 20 making an AbortSignal costs several µs and listening to one as much again, more than
  // the rest of a call's overhead together, and a call that succeeds at once should pay neither.
  let controller: AbortController | undefined;
  let haltReason: unknown;
  let interrupt: ((reason: unknown) => void) | undefined;
  const signal = (): AbortSignal => {
    if (controller === undefined) {
      controller = new AbortController();
      if (stop !== undefined) controller.abort(haltReason);
    }
    return controller.signal;
  };
  const halt = (why: Stop, reason: unknown): void => {
    if (stop !== undefined) return;
    stop = why;
    haltReason = reason;
    controller?.abort(reason);
    interrupt?.(reason);
  };
  /** Settles with `p`, or rejects with the reason as soon as the call is halted (`p` left handled). */
  const untilHalted = <V>(p: Promise<V>): Promise<V> => {
    if (stop !== undefined) {
      p.catch(() => {});
      return Promise.reject(haltReason);
    }
    return new Promise<V>((resolve, reject) => {
      interrupt = reject;
      p.then(
        (value) => {
          interrupt = undefined;
          resolve(value);
        },
        (err: unknown) => {
          interrupt = undefined;
          reject(err);
        },
      );
    });
  };
  const onCaller = (): void => halt('caller', s.signal!.reason);
  const onShutdown = (): void => halt('shutdown', s.shutdown!.reason);
  let timer: TimerHandle | undefined;
  const armDeadline = (): void => {
    const left = s.deadline - clock.now();
    if (left <= 0) {
      halt('deadline', new DeadlineExceededError(s.budgetMs, attempts));
      return;
    }
    // Node fires a timer set past 2^31-1 ms at once: a longer deadline is re-armed in steps.
    // Ref'd: the call promises to settle by its deadline, and an attempt that never settles
    // may hold nothing else open (unref'd, such a script exited 13, nothing thrown; a review).
    timer = clock.setTimeout(armDeadline, Math.min(left, MAX_DURATION));
  };

  let finished = false;
  /** A retry withdrawn from the budget whose attempt has not started yet: given back if the call ends first. */
  let unspent = false;
  const finish = (result: RetryResult): void => {
    if (finished) return;
    finished = true;
    if (unspent) s.budget!.refund();
    if (timer !== undefined) clock.clearTimeout(timer);
    s.signal?.removeEventListener('abort', onCaller);
    s.shutdown?.removeEventListener('abort', onShutdown);
    reportSettled(result, s.onResult, publish);
  };
  const fail = (error: unknown): never => {
    finish({ ok: false, attempts, elapsed: clock.now() - s.start, error, ...(last === undefined ? {} : { classification: last }) });
    throw error;
  };
  /**
   * Ends the call with its attempt's own `error`: after an attempt that may have reached the
   * server, a copy that never says "not sent" when it does (a redial refused by the breaker or
   * the port; see toldAsSentEarlier); the attempt's error may be shared by other calls.
   */
  const failAs = (error: unknown, c: Classification): never => fail(toldAsSentEarlier(error, undefined, reached, c));
  /** The error for an interruption: the signal's reason, or the deadline with what came before. */
  const interrupted = (between = true): never => {
    if (stop === 'deadline') {
      return fail(ending(new DeadlineExceededError(s.budgetMs, attempts, causeOf(errors, haltReason, 'deadline exceeded')), between));
    }
    return fail(haltReason); // the caller's or the owner's reason
  };

  if (s.signal?.aborted) return fail(s.signal.reason);
  if (s.shutdown?.aborted) return fail(s.shutdown.reason);
  if (s.signal !== undefined) onCallerAbort(s.signal, onCaller);
  s.shutdown?.addEventListener('abort', onShutdown, { once: true });
  try {
    s.cancel?.((reason) => halt('caller', reason));
  } catch (err) {
    return fail(err); // a throwing `cancel` ends the call, its listeners removed
  }
  s.budget?.deposit();
  if (s.deadline !== Infinity) armDeadline();

  try {
    // Traced (dialguard:call, dialguard:attempt) only when someone listens.
    if (traced(callTrace)) {
      const trace: CallTraceMessage = { component: 'retry' };
      return await callTrace.tracePromise(() => loop().finally(() => (trace.attempts = attempts)), trace);
    }
    return await loop();
  } catch (err) {
    // A predicate, schedule or hook that threw: the call ends with that error, cleaned up.
    if (!finished) fail(err);
    throw err;
  }

  async function loop(): Promise<T> {
    let previousDelay = 0;
    /** The AbortSignal reason the last attempt timed out with, if it showed one (see timeoutReasonOf). */
    let lastTimeout: object | undefined;
    for (;;) {
      // No attempt starts at or after the deadline, even if its timer has not fired yet.
      if (stop === undefined && clock.now() >= s.deadline) halt('deadline', new DeadlineExceededError(s.budgetMs, attempts));
      if (stop !== undefined) return interrupted();
      unspent = false;
      attempts++;
      const attempt = new Attempt(attempts, s.deadline, clock, signal);
      let error: unknown;
      try {
        const value = await untilHalted(traced(attemptTrace) ? attemptTrace.tracePromise(() => invoke(fn, attempt), { attempt: attempts }) : invoke(fn, attempt));
        // An answer the call could not get past (see UnsuccessfulAnswer): the caller has it, the call failed.
        const unsuccessful = unsuccessfulOf(value);
        finish(unsuccessful === undefined ? { ok: true, attempts, elapsed: clock.now() - s.start } : { ok: false, attempts, elapsed: clock.now() - s.start, classification: unsuccessful });
        return value;
      } catch (err) {
        error = err;
      }
      if (stop !== undefined) {
        if (error !== haltReason) errors.push(error);
        return interrupted(false); // its attempt was under way: it may have been sent
      }
      errors.push(error);
      const c = classify(error, s.signal === undefined ? s.classify : { ...s.classify, signal: s.signal });
      last = c;
      if (!c.notSent) reached = true;

      // Refused by a breaker: every attempt would be refused the same way (rule 5).
      if (c.kind === 'refused' || isPermanent(error)) return failAs(error, c);
      if (c.kind === 'timeout') {
        // The same signal's timeout twice in a row: a signal of the caller's own, made outside
        // `fn`, that outlived its attempt. Every later attempt fails at once, sending nothing,
        // each after a backoff (`AbortSignal.timeout(300)` around axios or fetch: 3 attempts and
        // 1.9 s where the caller asked for 0.3; an outside review). Its timeout is the call's.
        const reason = timeoutReasonOf(error);
        if (reason !== undefined && reason === lastTimeout) return failAs(error, c);
        lastTimeout = reason;
      } else {
        lastTimeout = undefined;
      }
      const wanted = (s.retryable === undefined ? undefined : answerOf(s.retryable, error, c, attempt)) ?? (c.transient && (c.notSent || s.idempotent));
      if (!wanted) return failAs(error, c);
      if (attempts >= s.maxAttempts) return fail(ending(new RetriesExhaustedError(errors, `${s.maxAttempts} attempt(s) allowed`)));
      // Its dial left the host refused (its failure opened it, or it was the probe): a retry would
      // be refused, or, after a backoff longer than the breaker's window, be the next probe, so
      // this caller paid 3 dials and ~1.4 s once a window where every other was refused at once
      // (an outside review, a host long dead). The call ends as every other call to it does.
      if (c.kind === 'dial' && leftHostRefusing(error)) return failAs(error, c);

      const delay = delayOf(s.backoff(attempts, previousDelay, s.random), attempts, previousDelay, s.random);
      previousDelay = delay;
      // A schedule answering Infinity (or 24.8 days): no timer waits longer, and no caller waits
      // that long for a retry. With no deadline the call hung for 24.8 days; with one it ended as
      // DeadlineExceededError with nearly all of it left (an outside review, both).
      if (delay >= MAX_DURATION) return fail(ending(new RetriesExhaustedError(errors, `the backoff answered ${show(delay)} ms or more: no retry waits that long`)));
      const now = clock.now();
      if (now + delay >= s.deadline) {
        // The next attempt could not start before the deadline: fail now rather than sleep. An
        // attempt that ended past it, before its timer ran, finds it passed: no `left` (it read
        // -200 ms left; an outside review).
        const cause = causeOf(errors, undefined, 'deadline exceeded');
        return fail(ending(new DeadlineExceededError(s.budgetMs, attempts, now < s.deadline ? { ...cause, left: s.deadline - now, wait: delay } : cause)));
      }
      if (now + delay - s.start > s.retryWindow) {
        return fail(ending(new RetriesExhaustedError(errors, `retry window of ${s.retryWindow} ms passed`)));
      }
      // Failing over (ServerSet: each attempt goes to another server), an attempt never sent put
      // no load on its server and the next goes elsewhere: nothing is multiplied, nothing spent.
      // Charged, a burst of calls whose server died under them exhausted the process-wide budget:
      // 120 of 150 never-sent calls failed where the live server would have run them (r146).
      const free = failover && c.notSent;
      if (!free && s.budget !== null && !s.budget.tryWithdraw()) {
        events.emit('budget-exhausted', { attempt: attempts });
        return fail(ending(new RetryBudgetExhaustedError(causeOf(errors, undefined, 'retry budget exhausted'))));
      }
      unspent = !free && s.budget !== null;
      if (s.onRetry !== undefined) {
        // A hook that throws (or rejects) ends the call with its error, through the caller of loop().
        const hooked = s.onRetry({ attempt: attempts, error, classification: c, delay, remaining: s.deadline === Infinity ? Infinity : wholeMsLeft(s.deadline - now) });
        if (isThenable(hooked)) {
          let hookError: { error: unknown } | undefined;
          try {
            await untilHalted(Promise.resolve(hooked));
          } catch (err) {
            hookError = { error: err };
          }
          if (stop !== undefined) return interrupted();
          if (hookError !== undefined) return fail(hookError.error);
        }
      }
      events.emit('scheduled', { attempt: attempts + 1, delay, code: c.code, kind: c.kind });
      try {
        await sleep(clock, delay, signal());
      } catch (err) {
        // Woken by a halt, or the clock's own setTimeout threw: the call ends with that error.
        return stop === undefined ? fail(err) : interrupted();
      }
    }
  }
}

/** The owner of the one warning about a backoff's odd answers (see {@link delayOf}). */
const ODD_BACKOFF = {};

/**
 * The wait a backoff's `answer` stands for: a number of ms from 0 up, as given (Infinity and
 * 2^31-1 ms or more end the retries, see the caller). Anything else (NaN, a negative number, a
 * string, undefined) is a bug in the schedule: the default schedule's wait is used instead, and
 * the process warned once. It was no wait at all, a tight loop against the failing server: 751
 * attempts in 1 s for NaN where `() => 200` made 5, and 50 requests in 147 ms through a
 * GuardedAgent (an outside review), as `random`'s NaN was before it was checked.
 *
 * @internal also for an adapter that combines the answer with a wait of its own (undici's
 * Retry-After), which must read the answer as retry() does first.
 */
export function delayOf(answer: unknown, attempt: number, previous: number, random: () => number): number {
  if (typeof answer === 'number' && answer >= 0) return safeDelay(answer);
  warnOnce("a backoff's answer is not a wait in ms from 0 up; the default schedule's wait is used instead (reported once)", ODD_BACKOFF, new RangeError(`the backoff answered ${show(answer)}`));
  return safeDelay(restartSpanningBackoff(attempt, previous, random));
}

/** One attempt, as `fn` sees it. A class: an object literal with accessors is slow to make. */
class Attempt implements RetryAttempt {
  readonly #clock: Clock;
  readonly #signal: () => AbortSignal;
  constructor(
    readonly number: number,
    readonly deadline: number,
    clock: Clock,
    signal: () => AbortSignal,
  ) {
    this.#clock = clock;
    this.#signal = signal;
  }

  get signal(): AbortSignal {
    return this.#signal();
  }

  get remaining(): number {
    return this.deadline === Infinity ? Infinity : wholeMsLeft(this.deadline - this.#clock.now());
  }
}

/**
 * Time left as whole milliseconds: what `AbortSignal.timeout`, `setTimeout` and most clients'
 * timeouts take (AbortSignal.timeout throws a RangeError for 299999.85). Rounded down, never more
 * than is left, except that a fraction of a millisecond left is 1, not 0: passed on as a
 * timeout, 0 means none to axios, undici and `req.setTimeout`. At most 2^31-1, the longest a
 * timer holds: a deadline further out (a timeout past 24.8 days is taken) passed on as it was
 * fired an AbortSignal.timeout after 1 ms, or threw ERR_OUT_OF_RANGE (an outside review).
 */
function wholeMsLeft(ms: number): number {
  return ms > 0 ? Math.min(MAX_DURATION, Math.max(1, Math.floor(ms))) : 0;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

function invoke<T>(fn: (attempt: RetryAttempt) => T | PromiseLike<T>, attempt: RetryAttempt): Promise<T> {
  try {
    return Promise.resolve(fn(attempt));
  } catch (err) {
    return Promise.reject(err);
  }
}


/**
 * The `cause` for an error that ends a loop: the one attempt error, or every attempt's error in
 * a {@link RetriesExhaustedError} when there were several. `skip` (the abort reason an attempt
 * may have rejected with) is not an attempt's own error.
 */
function causeOf(errors: readonly unknown[], skip: unknown, reason: string): { cause?: unknown } {
  const own = skip === undefined ? errors : errors.filter((e) => e !== skip);
  if (own.length === 0) return {};
  if (own.length === 1) return { cause: own[0] };
  return { cause: new RetriesExhaustedError(own, reason) };
}

/**
 * A `retryable` predicate's answer: true, false, or undefined for the default decision. Anything
 * else (`'no'`, `0`, a promise) keeps the default and warns once per predicate, as a classify
 * hook's junk is ignored: read as truthy, `'no'` retried an application error three times.
 * Adapters that wrap the user's predicate call it through here, so the warning is the user's
 * predicate's, not a wrapper's made per call.
 *
 * @internal
 */
export function answerOf(predicate: RetryPredicate, err: unknown, c: Classification, attempt: RetryAttempt): boolean | undefined {
  const answer: unknown = predicate(err, c, attempt);
  if (answer === undefined || typeof answer === 'boolean') return answer;
  // An async predicate's promise is not awaited; its rejection is the predicate's throw, reported
  // (unwatched, it ended the process as an unhandled rejection: an outside review).
  containAnswer("a retryable predicate's promise rejected", predicate, answer);
  warnOnce("a retryable predicate's answer was ignored (not true, false or undefined)", predicate, show(answer));
  return undefined;
}
