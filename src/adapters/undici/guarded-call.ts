/**
 * One request through the retrying layer: the caller's handler sees one request, while
 * underneath it as many undici attempts run as is safe.
 *
 * - The first attempt runs at once. Only if it fails does dialguard's `retry()` take the call
 *   over, with the first failure as its attempt 1 and the call's own start, so the deadline,
 *   the retry budget, the backoff and the whole-call latency are exactly retry()'s. A call that
 *   succeeds at once never builds a retry loop: on a healthy host the loop costs more CPU than
 *   the few percent a request through a local pool can spare.
 * - The caller gets its abort function as soon as the first attempt is dispatched (a request
 *   undici refuses there fails with onError alone, as with undici), so an abort reaches the call
 *   whatever it is doing: waiting for a dial, waiting out a backoff, reading the body. An abort
 *   is never a failure of anything: the call ends with the caller's reason (undici's
 *   RequestAbortedError when it gives none) and the breaker hears nothing.
 * - Each attempt's headers and body timeouts are cut to what is left of the call's deadline.
 * - An origin whose last call failed to dial is checked with the breaker before each attempt,
 *   so while it is refused, requests fail without entering undici.
 * - Once the response is handed to the caller, the call is committed: nothing is retried.
 * - A response with a retryable status to an idempotent request is held back (see attempt.ts)
 *   while another attempt may still be made; its `Retry-After` lengthens the wait. When no retry
 *   comes, the caller gets that response as it came, never an error in its place.
 * - A one-shot body (a stream, fetch's body) that an attempt started reading is never sent again.
 * - Once the GuardedAgent closes or is destroyed, nothing is retried: a call waiting out a
 *   backoff ends at once, with the response it held back or its last attempt's error.
 *
 * Both sides speak undici's callback-per-event handler interface (see handlers.ts).
 *
 * @module
 */
import { type Dispatcher, errors } from 'undici';
import { classify, toldAsSentEarlier } from '../../core/classify.js';
import { type Clock, type TimerHandle, unrefTimer } from '../../core/clock.js';
import { DeadlineExceededError } from '../../core/errors.js';
import { asError, isError } from '../../core/validate.js';
import { warnOnce } from '../../core/warn-once.js';
import { isLiteral, tlsTransportFor } from '../../guard/connect.js';
import type { Transport } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import { refusing } from '../../guard/dial.js';
import { type RetryAttempt, type RetryPredicate, type RetryResult, answerOf, delayOf, reportSettled, retry, settledHeard } from '../../retry/retry.js';
import { withStory as ownError } from '../../retry/story.js';
import { Attempt, type AttemptOwner, BODY_CUT, HEADERS_CUT, HeldResponse, completeOrFail } from './attempt.js';
import { type LegacyHandler, type RawHeaders, rawHeader } from './handlers.js';
import type { RetrySettings } from './options.js';
import { type RequestBody, requestBody } from './request-body.js';
import { retryAfterMs } from './retry-after.js';
import { withTlsAlert } from './tls-alert.js';
import { type UnsuccessfulAnswer, callerContext, traceFailedCall, traceUnsuccessfulCall, unsuccessfulAnswer, unsuccessfulOf } from '../../observe/tracing.js';

/** Methods that may be repeated (RFC 9110 §9.2.2) when the request's own `idempotent` is unset. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** Most origins remembered as suspect per agent; past it the memory starts over. */
const MAX_SUSPECTS = 1024;

/**
 * An attempt's timeout: `base` (0 = none) lowered to `remaining` when the call has a deadline.
 * Undefined (the dispatcher's own, not known here, as under `compose()`): left to the
 * dispatcher, whatever the deadline. Setting the remaining time there would lengthen a shorter
 * timeout the user gave the Agent underneath (1 s headers became the whole call's 5 s, so a
 * server that never answers got no retry). The deadline needs no timeout to cut the attempt:
 * when it passes the call abandons the attempt, which aborts it.
 */
function cut(base: number | undefined, remaining: number): number | undefined {
  if (remaining === Infinity || base === undefined) return base;
  const left = Math.max(1, Math.ceil(remaining));
  return base === 0 ? left : Math.min(base, left);
}

/** The timeouts a request names itself (see {@link ownTimeouts}). */
interface OwnTimeouts {
  /** Its own headers and body timeouts when they are ones undici takes (0: none); undefined: the agent's. */
  readonly headers: number | undefined;
  readonly body: number | undefined;
  /** One it gave is not a timeout undici takes: the attempts leave both as given, for undici to refuse. */
  readonly keepGiven: boolean;
}

/**
 * A request's own timeouts, from what it gave. One undici refuses ('5000' from an env var, -1,
 * NaN) goes down as given, for undici to refuse as it does for its own Agent (was: the agent's
 * cut value replaced it silently).
 */
function ownTimeouts(givenHeaders: number | null | undefined, givenBody: number | null | undefined): OwnTimeouts {
  const headers = own(givenHeaders);
  const body = own(givenBody);
  return { headers, body, keepGiven: (givenHeaders != null && headers === undefined) || (givenBody != null && body === undefined) };
}

/**
 * What only a call that is not plain sailing needs: one that is retried, holds a response back,
 * is aborted, traced, or names its own wait for headers. A GuardedCall is made per request, and
 * every field of its own was 8 bytes on each (416 bytes a call, measured, of which a healthy one
 * used half): these are made the first time one is set, so a healthy call carries none of them.
 */
class Rare {
  /** Stops retry() with the caller's reason, once retry() has taken the call over. */
  cancel: ((reason: unknown) => void) | undefined = undefined;
  retrying = false;
  /** The caller's abort, once it came. */
  reason: Error | undefined = undefined;
  /** The last held response, until a later attempt fails on its own or holds another. */
  held: HeldResponse | undefined = undefined;
  retryAfter = 0;
  /** The last attempt failed as a reused connection does when its server had closed it (see {@link staleConnection}). */
  stale = false;
  /** The last error an attempt failed with (undici's refusals aside). */
  lastFailure: unknown = undefined;
  /** What the caller's onError threw when undici refused the request inside dispatch(). */
  thrown: { error: unknown } | undefined = undefined;
  /** What the user's backoff or retryable (`by`) last threw. */
  threw: { error: unknown; by: object } | undefined = undefined;
  /**
   * Runs a function in the caller's async context, taken at start() when someone traces calls:
   * the first failure arrives from the socket's events, in the context of whichever request
   * opened that socket, and retry()'s call span started there went under that request's span,
   * into its trace (an outside review). Undefined when nobody traces: nothing is captured.
   */
  inCallerContext: ((run: () => void) => void) | undefined = undefined;
  /** Whether the request may be repeated, read from its options the first time it is asked. */
  idempotent: boolean | undefined = undefined;
  /**
   * When the request's own `headersTimeout` (not 0) runs out, on the clock: the whole call's
   * wait for headers, spent across its attempts (seed 004: a long poll retried at minute 4 of 5
   * gets what is left, never a fresh 5). Infinity: none of its own.
   */
  headersBy = Infinity;
}

/**
 * One request, retried underneath its caller's handler. The call is also the handler of its own
 * first attempt (hence `extends Attempt`); each retry is an {@link Attempt} of its own.
 */
export class GuardedCall extends Attempt implements AttemptOwner {
  readonly #s: RetrySettings;
  readonly #dispatch: Dispatcher['dispatch'];
  readonly #opts: Dispatcher.DispatchOptions;
  readonly caller: LegacyHandler;
  readonly #body: RequestBody;
  /** The timeouts the request names itself, when it names either (read once: see the constructor); undefined: the agent's. */
  readonly #own: OwnTimeouts | undefined;
  /** What only a call that is not plain sailing needs (see {@link Rare}); made the first time it is. */
  #rare: Rare | undefined;
  /**
   * When the call started, on the clock; undefined until something needs it. A call with no
   * deadline whose end nobody hears never reads it (one clock read a healthy call did not need);
   * its first failure reads it then (see #elapsed). Not NaN for "unread": a field that starts as
   * a double holds a heap number of its own from construction, 16 bytes every request.
   */
  #started: number | undefined = undefined;
  /** The deadline timer of the first attempt (retry() keeps its own once it takes over). */
  #timer: TimerHandle | undefined;
  #current: Attempt | undefined;
  #finished = false;
  /** The caller's onConnect was called (it is, once, before anything else reaches it). */
  #connected = false;
  /** The first attempt is inside undici's dispatch(): a failure now is undici refusing the request. */
  #dispatching = false;
  /** The caller heard onRequestSent (once per call, whatever the attempts). */
  #requestSent = false;

  constructor(s: RetrySettings, dispatch: Dispatcher['dispatch'], opts: Dispatcher.DispatchOptions, caller: LegacyHandler) {
    super(undefined, 1, Infinity); // its own first attempt: the deadline is set at start()
    this.#s = s;
    this.#dispatch = dispatch;
    this.#opts = opts;
    this.caller = caller;
    // undici's request() and fetch() build their options by spreading, which leaves an object V8
    // reads slowly (a fraction of a µs per field, more for a field that is absent): only what
    // every request needs is read here; the method, `idempotent` and the origin when a
    // decision needs them.
    // A field that is absent is asked for with `in` first: reading it costs ~0.1 µs, `in` a tenth.
    this.#body = requestBody('body' in opts ? opts.body : undefined);
    // A request's own timeouts win (0: none), as undici's own: a long poll that asks for 10
    // minutes is not cut to the agent's 5 and sent again (seed 004). Only the deadline cuts them.
    const givenHeaders = 'headersTimeout' in opts ? opts.headersTimeout : undefined;
    const givenBody = 'bodyTimeout' in opts ? opts.bodyTimeout : undefined;
    this.#own = givenHeaders == null && givenBody == null ? undefined : ownTimeouts(givenHeaders, givenBody);
  }

  /** The call's clock (AttemptOwner: it times how long an attempt holds a response). */
  get clock(): Clock {
    return this.#s.clock;
  }

  /** {@link Rare}'s fields, made now if this is the first time the call needs one. */
  get #more(): Rare {
    return (this.#rare ??= new Rare());
  }

  /** The caller's abort, once it came. */
  get #reason(): Error | undefined {
    return this.#rare?.reason;
  }

  /** retry() has taken the call over. */
  get #retrying(): boolean {
    return this.#rare?.retrying === true;
  }

  /** When the request's own wait for headers runs out (see {@link Rare.headersBy}); Infinity: none. */
  get #headersBy(): number {
    return this.#rare?.headersBy ?? Infinity;
  }

  /** Whether the request may be repeated: its own `idempotent`, else by method (RFC 9110). */
  get #idempotent(): boolean {
    const rare = this.#more;
    if (rare.idempotent === undefined) {
      const { method, idempotent } = this.#opts;
      rare.idempotent = typeof idempotent === 'boolean' ? idempotent : IDEMPOTENT.has(method) || IDEMPOTENT.has(String(method).toUpperCase());
    }
    return rare.idempotent;
  }

  /** The origin as the caller gave it, the suspects' key. */
  get #origin(): string {
    const origin = this.#opts.origin;
    return typeof origin === 'string' ? origin : String(origin);
  }

  /**
   * Makes the first attempt, then hands the caller its abort function. Returns what undici's
   * dispatch() returned for that attempt: false when the origin is saturated (wait for 'drain').
   *
   * A request undici refuses inside dispatch() (bad options, a closed agent: see
   * {@link isRefusal}) fails as undici's own would: the caller's onError alone, synchronously,
   * and what it throws is thrown here. Any other failure inside dispatch() (a connector that
   * fails at once) is the first attempt's, as if it came later.
   */
  start(): boolean {
    const s = this.#s;
    const inCaller = callerContext();
    if (inCaller !== undefined) this.#more.inCallerContext = inCaller;
    const own = this.#own?.headers;
    const timed = s.timeout !== Infinity || (own !== undefined && own > 0) || settledHeard(s.onResult);
    const started = timed ? s.clock.now() : 0; // 0: unread, and unused below (neither a deadline nor an own wait)
    if (timed) this.#started = started;
    if (own !== undefined && own > 0) this.#more.headersBy = started + own;
    const refusal = this.#refusal();
    if (refusal !== undefined) {
      this.connectCaller();
      this.#firstFailed(refusal);
      return true;
    }
    if (s.timeout !== Infinity) {
      this.deadline = started + s.timeout;
      this.#timer = unrefTimer(s.clock.setTimeout(() => this.#firstTimedOut(), s.timeout));
    }
    this.#dispatching = true;
    let ready: boolean;
    try {
      ready = this.#run(this, true);
    } finally {
      this.#dispatching = false;
    }
    const thrown = this.#rare?.thrown;
    if (thrown !== undefined) throw thrown.error; // the caller's own, as with undici
    this.connectCaller();
    return ready;
  }

  /**
   * Calls the caller's onConnect with its abort function, once, before anything else reaches
   * the caller (an attempt may report its body sent from inside the first dispatch).
   */
  connectCaller(): void {
    if (this.#connected || this.#finished) return;
    this.#connected = true;
    try {
      // Bound, not an arrow: an arrow keeps a context for `this`, ~140 bytes a request (heap
      // sampled) where a bound function is a third of that.
      this.caller.onConnect?.(this.abort.bind(this));
    } catch (err) {
      this.abort(asError(err)); // the caller's own onConnect threw: the call ends with that
    }
  }

  /**
   * undici refused the first attempt inside dispatch(): the caller hears onError alone, now.
   * What that onError throws is kept for start() to throw: undici's nested dispatchers (Agent,
   * Pool, Client) would otherwise catch it on its way out.
   */
  #refused(err: unknown): void {
    this.#end({ ok: false, attempts: 1, elapsed: this.#elapsed(), error: err });
    traceFailedCall(err, this.#rare?.inCallerContext); // never in the retry loop: its span here
    try {
      this.caller.onError?.(asError(err));
    } catch (thrown) {
      this.#more.thrown = { error: thrown };
    }
  }

  /** The caller gives up: the call ends with `reason`, whatever it was doing. */
  abort(reason?: Error): void {
    if (this.#finished || this.#reason !== undefined) return;
    // As undici: an abort that names no reason is a RequestAbortedError.
    const r = reason ?? new errors.RequestAbortedError();
    const rare = this.#more;
    rare.reason = r;
    if (rare.retrying) {
      rare.cancel?.(r);
      return;
    }
    this.#current?.abandon(r);
    this.#end({ ok: false, attempts: 1, elapsed: this.#elapsed(), error: r });
    traceFailedCall(r, rare.inCallerContext); // ended by its caller before any retry: its span here
    this.caller.onError?.(r);
  }

  // --- what attempts ask and report (AttemptOwner) ---

  hold(attempt: Attempt, status: number, rawHeaders: RawHeaders): boolean {
    const s = this.#s;
    if (!s.retryStatuses.has(status) || !this.#idempotent || this.#body.consumed) return false;
    if (attempt.number >= s.maxAttempts || this.#reason !== undefined) return false;
    const after = retryAfterMs(rawHeader(rawHeaders, 'retry-after')) ?? 0;
    const retryAt = s.clock.now() + after;
    if (after > s.maxRetryAfter || retryAt >= attempt.deadline || retryAt >= this.#headersBy) return false;
    this.#more.retryAfter = after;
    return true;
  }

  bodySent(chunk: unknown): void {
    this.connectCaller();
    if (!this.#finished && this.#reason === undefined) this.caller.onBodySent?.(chunk);
  }

  requestSent(): void {
    this.connectCaller();
    if (this.#requestSent || this.#finished || this.#reason !== undefined) return;
    this.#requestSent = true;
    this.caller.onRequestSent?.();
  }

  complete(trailers: RawHeaders | null): void {
    this.#finished = true;
    if (this.#retrying) this.#s.shutdown?.removeEventListener('abort', this);
    const suspects = this.#s.suspects;
    if (suspects.size > 0) suspects.delete(this.#origin); // it answered: no longer suspect
    completeOrFail(this.caller, trailers);
  }

  /**
   * Milliseconds since the call started, reading the clock; a start that was never read (see
   * #started) is taken as now (a `settled` listener that subscribed during the call hears 0).
   */
  #elapsed(): number {
    const now = this.#s.clock.now();
    const started = (this.#started ??= now);
    return now - started;
  }

  // --- the first attempt, outside retry() ---

  #firstSucceeded(attempt: Attempt): void {
    if (this.#retrying) return;
    const s = this.#s;
    const inCaller = this.#rare?.inCallerContext;
    // Nobody hears how a call ended (no onResult, no `settled` listener, no tracer): no result is
    // built and the clock is not read for its elapsed time (one read of two per healthy call).
    if (inCaller === undefined && !settledHeard(s.onResult)) return this.#end(undefined);
    // A status it would have retried, handed over at once (no attempt left, a Retry-After past
    // the deadline): the call failed, with the server's answer.
    const answer = this.#answerOf(attempt);
    if (answer !== undefined) traceUnsuccessfulCall(answer, inCaller);
    const elapsed = this.#elapsed();
    this.#end(answer === undefined ? { ok: true, attempts: 1, elapsed } : { ok: false, attempts: 1, elapsed, classification: unsuccessfulOf(answer) });
  }

  /**
   * What an attempt that handed the caller its response resolves with: an {@link UnsuccessfulAnswer}
   * when that response has a status the call retries (429/502/503/504 to an idempotent request),
   * given because no retry could follow; else nothing.
   */
  #answerOf(attempt: Attempt): UnsuccessfulAnswer | undefined {
    const status = attempt.status;
    if (!this.#idempotent || !this.#s.retryStatuses.has(status)) return undefined;
    return unsuccessfulAnswer(classify({ statusCode: status }));
  }

  #firstTimedOut(): void {
    this.#timer = undefined;
    if (this.#finished || this.#retrying) return;
    const err = new DeadlineExceededError(this.#s.timeout, 1);
    this.#current?.abandon(err);
    this.#finished = true;
    this.#end({ ok: false, attempts: 1, elapsed: this.#elapsed(), error: err });
    this.caller.onError?.(err);
  }

  /** The first attempt failed: retry() takes the call over, its attempt 1 being this failure. */
  #firstFailed(first: unknown): void {
    if (this.#finished || this.#retrying) return;
    const rare = this.#more;
    rare.retrying = true;
    const s = this.#s;
    if (this.#timer !== undefined) s.clock.clearTimeout(this.#timer); // retry() arms its own, from the same start
    this.#timer = undefined;
    // Failed at or past the deadline, before its timer ran: the deadline, after this one attempt
    // (retry() would stop before taking it as its first: "after 0 attempt(s)", its error lost).
    if (this.deadline !== Infinity && s.clock.now() >= this.deadline) {
      const err = new DeadlineExceededError(s.timeout, 1, { cause: first });
      this.#fail(err);
      this.#end({ ok: false, attempts: 1, elapsed: this.#elapsed(), error: err });
      return;
    }
    const shutdown = s.shutdown;
    if (shutdown !== undefined) {
      if (shutdown.aborted) this.#shutDown();
      else shutdown.addEventListener('abort', this, { once: true });
    }
    const started = (this.#started ??= s.clock.now()); // retry() counts from the call's start
    const inContext = rare.inCallerContext;
    if (inContext !== undefined) {
      rare.inCallerContext = undefined;
      inContext(() => this.#retryFrom(first, started));
      return;
    }
    this.#retryFrom(first, started);
  }

  /** retry() takes the call over from `started`, its attempt 1 being the first attempt's failure `first`. */
  #retryFrom(first: unknown, started: number): void {
    const s = this.#s;
    retry((a) => (a.number === 1 ? Promise.reject(first) : this.#attempt(a)), {
      start: started,
      cancel: (cancel) => {
        this.#more.cancel = cancel;
      },
      timeout: s.timeout,
      maxAttempts: s.maxAttempts,
      idempotent: this.#idempotent,
      // A keep-alive connection the server had closed as it was reused: the retry goes at once
      // (as Go's transport does); it waited out 400-600 ms. Each such failure, not the first
      // alone: undici may hand the retry another idle connection the server closed with the first,
      // and the third attempt waited 0.8-1.2 s (an outside review). Each consumes a used
      // connection, and maxAttempts bounds them; a fresh one's failure waits as before.
      // The answer is read as retry() reads it before the Retry-After raises it: a negative or
      // string answer is the default schedule's wait (Math.max made -5 no wait, '100' 100 ms).
      // A retry that could not begin before the request's own wait for headers is spent is none
      // (Infinity ends the retries; the call fails with the last attempt's error, as the call's
      // own timeout does): it was slept, and the call failed after the wait, nothing more sent
      // (an outside review: 400-600 ms after its headersTimeout; plain undici failed at once).
      backoff: (n, previous, random) => {
        const wait = Math.max(this.#more.retryAfter, this.#more.stale ? 0 : delayOf(this.#usersOwn(s.backoff, () => s.backoff(n, previous, random)), n, previous, random));
        const by = this.#headersBy;
        return by !== Infinity && s.clock.now() + wait >= by ? Infinity : wait;
      },
      retryable: (err, classification, attempt) => this.#retryable(err, classification, attempt),
      budget: s.budget,
      clock: s.clock,
      random: s.random,
      classify: s.classify,
      onResult: s.onResult,
    }).then(undefined, (err: unknown) => this.#fail(err));
  }

  /**
   * A call that ended without retry(): the budget hears of it, and `result` goes to onResult and
   * the metrics when one was built (see #firstSucceeded).
   */
  #end(result: RetryResult | undefined): void {
    this.#finished = true;
    if (this.#timer !== undefined) {
      this.#s.clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const s = this.#s;
    s.budget?.deposit();
    if (result !== undefined) reportSettled(result, s.onResult);
  }

  // --- attempts under retry() ---

  #attempt(a: RetryAttempt): Promise<UnsuccessfulAnswer | undefined> {
    // The held response stays until another attempt holds another (see ended()): a retry that
    // fails, or that undici refuses (the agent closed meanwhile), leaves the caller that response.
    const rare = this.#more;
    rare.retryAfter = 0;
    // The request's own wait for headers ran out during the backoff: no attempt is left to make.
    const clock = this.#s.clock;
    const headersLeft = rare.headersBy - clock.now();
    if (headersLeft <= 0) return Promise.reject(rare.lastFailure ?? new errors.HeadersTimeoutError());
    const refusal = this.#refusal();
    if (refusal !== undefined) return Promise.reject(refusal);
    return new Promise<UnsuccessfulAnswer | undefined>((resolve, reject) => {
      const attempt = new Attempt(this, a.number, a.deadline);
      // The retry's wait for headers ends with what was left of the request's own, on this
      // clock: undici's headersTimeout fires no sooner than ~1 s, so a retry made with 13-130 ms
      // of a 2.6 s headersTimeout left ended the call ~1 s past it (an outside review).
      const timer = headersLeft === Infinity ? undefined : unrefTimer(clock.setTimeout(() => {
        if (!attempt.running || attempt.answered) return;
        const err = new errors.HeadersTimeoutError();
        attempt.abandon(err);
        reject(err);
      }, headersLeft));
      attempt.settled = (err) => {
        if (timer !== undefined) clock.clearTimeout(timer);
        if (err === undefined) resolve(this.#answerOf(attempt));
        else reject(err);
      };
      this.#run(attempt, false);
    });
  }

  /** `attempt` waits for a connection no more (AttemptOwner; see dial-waiters). */
  waitOver(attempt: Attempt): void {
    this.#s.dialWaiters?.over(attempt);
  }

  /**
   * How an attempt ended (AttemptOwner): the first, run outside retry(), decides here; a retry
   * settles its promise.
   */
  ended(attempt: Attempt, err: unknown): void {
    this.#s.dialWaiters?.over(attempt);
    withTlsAlert(err); // a TLS alert undici lost becomes the cause: a refused handshake, not a dead connection
    // A held response stays until another replaces it: a later attempt that fails on its own
    // (a reset, a refused connect) says nothing better than the server's answer, which raw undici
    // would have handed over (was: dropped, and a 503 became the retry's UND_ERR_SOCKET or
    // ECONNREFUSED; an outside review).
    if (err instanceof HeldResponse) this.#more.held = err;
    else if (err !== undefined && !isRefusal(err)) this.#more.lastFailure = err;
    if (attempt.settled !== undefined) attempt.settled(err);
    else if (err === undefined) this.#firstSucceeded(attempt);
    else if (this.#dispatching && !this.#connected && isRefusal(err)) this.#refused(err);
    else this.#firstFailed(err);
  }

  /**
   * Dispatches `attempt` to undici; `ended()` hears how it ended. Returns dispatch()'s answer.
   * `first`: the first attempt, made right at the call's start, whose deadlines count from the
   * start's reading of the clock when it took one (not read twice). A flag, not the reading: a
   * double passed to a call V8 does not inline is a fresh heap number, 16 bytes a request.
   */
  #run(attempt: Attempt, first: boolean): boolean {
    const deadline = attempt.deadline;
    const headersBy = this.#headersBy;
    this.#current = attempt;
    const own = this.#own;
    const s = this.#s;
    let headersTimeout = own?.headers ?? s.headersTimeout;
    let bodyTimeout = own?.body ?? s.bodyTimeout;
    // Each timeout is cut to what is left of the deadline, the headers wait to what is left of
    // the request's own too (see #headersBy). Neither: nothing to cut, and no reading of the
    // clock nor doubles handed to cut(), each a heap number (the usual case).
    if (deadline !== Infinity || headersBy !== Infinity) {
      const started = this.#started;
      const now = first && started !== undefined ? started : s.clock.now();
      const remaining = deadline === Infinity ? Infinity : Math.max(0, deadline - now);
      headersTimeout = cut(headersTimeout, headersBy === Infinity ? remaining : Math.min(remaining, headersBy - now));
      bodyTimeout = cut(bodyTimeout, remaining);
      if (remaining !== Infinity) {
        // Which of them the deadline set: their firing is the deadline passing (see #deadlineTimedOut).
        const left = Math.max(1, Math.ceil(remaining));
        attempt.deadlineCut = (headersTimeout === left && remaining <= headersBy - now ? HEADERS_CUT : 0) | (bodyTimeout === left ? BODY_CUT : 0);
      }
    }
    let opts = this.#opts;
    const underneath = s.dispatcherTimeouts;
    // The caller's options go down as they are when they would come out the same (the usual
    // case: no deadline, default timeouts, a body sent as given); else a copy with this
    // attempt's. Copied then set, not spread with extra keys: V8 builds `{ ...o, k: v }` on a
    // slow path (several µs per request, measured), a copy and three stores in well under one.
    const keep = own?.keepGiven === true;
    if (
      (!keep && headersTimeout !== undefined && headersTimeout !== (own?.headers ?? underneath?.headers)) ||
      (!keep && bodyTimeout !== undefined && bodyTimeout !== (own?.body ?? underneath?.body)) ||
      !this.#body.asGiven
    ) {
      opts = Object.assign({}, opts);
      opts.body = this.#body.forAttempt() as Dispatcher.DispatchOptions['body'];
      if (!keep && headersTimeout !== undefined) opts.headersTimeout = headersTimeout;
      if (!keep && bodyTimeout !== undefined) opts.bodyTimeout = bodyTimeout;
    }
    const waiters = s.dialWaiters;
    const followed = waiters !== undefined && waiters.dispatching(attempt);
    try {
      return this.#dispatch(opts, attempt as Dispatcher.DispatchHandler);
    } catch (err) {
      attempt.onError(asError(err));
      return false;
    } finally {
      // The first attempt is dispatched from start(), in the caller's context it captured then.
      if (followed) waiters.dispatched(attempt, this.#opts.origin, first ? this.#rare?.inCallerContext : undefined);
    }
  }

  #retryable(...[err, classification, attempt]: Parameters<RetryPredicate>): ReturnType<RetryPredicate> {
    this.#more.stale = staleConnection(err);
    // Never again once the caller has the response, once a one-shot body has been read, or once
    // the agent underneath is closing (undici would refuse the retry).
    if (this.#current?.forwarded === true || this.#body.consumed || this.#reason !== undefined || this.#s.shutdown?.aborted === true) return false;
    if (err instanceof HeldResponse) return true; // decided when it was held
    if (this.#deadlineTimedOut(err)) return false; // the call's time is up, whatever the clock read
    if (this.#headersBy !== Infinity && this.#s.clock.now() >= this.#headersBy) return false; // its own wait for headers is spent
    // Its dials opened the host: the call stops, as every other call to it is refused now. It
    // waited out a backoff longer than the breaker's window, and each later attempt came after
    // the window as the probe: with maxAttempts 6 one request dialled 6 times over 23 s, raw
    // undici's loop 9 s (an outside review). (Its last attempt ends as retries running out.)
    if (classification.kind === 'dial' && attempt.number < this.#s.maxAttempts && this.#refusing() !== undefined) return false;
    const own = this.#s.retryable;
    return own === undefined ? undefined : this.#usersOwn(own, () => answerOf(own, err, classification, attempt));
  }

  /**
   * Runs the user's `fn` (its backoff, its retryable) through `run`; what it throws is noted, so
   * that a call ending with a held response in its place can say so (see #fail), and thrown on.
   */
  #usersOwn<T>(fn: object, run: () => T): T {
    try {
      return run();
    } catch (err) {
      this.#more.threw = { error: err, by: fn };
      throw err;
    }
  }

  /**
   * The breaker's refusal of this origin, if its last call failed to dial and the breaker would
   * refuse a dial now (no I/O either way). Healthy origins are not looked up at all.
   */
  #refusal(): unknown {
    const { breaker, suspects } = this.#s;
    if (breaker === null || suspects.size === 0 || !suspects.has(this.#origin)) return undefined;
    const refusing = this.#refusing();
    if (refusing === undefined) return undefined;
    try {
      // Refuses (and counts the refusal), as the snapshot said; a permit granted because the
      // window ended in between, or because only the other transport's dials failed (one
      // client's http: to a TLS port), is given back untouched, and the dial will ask again.
      breaker.admit(refusing.key, undefined, refusing.transport).abandoned();
      return undefined;
    } catch (err) {
      return err;
    }
  }

  /**
   * Where the breaker would refuse this origin's dial now (its key and transport, as the
   * connector files its dials), or undefined if it would not: a snapshot, nothing counted.
   */
  #refusing(): { key: string; transport: Transport } | undefined {
    const breaker = this.#s.breaker;
    if (breaker === null) return undefined;
    let key: string;
    let transport: Transport = 'plain';
    try {
      key = hostKey(this.#s.socketPath ?? this.#origin); // filed as the connector files its dials
      if (this.#origin.startsWith('https:')) transport = this.#tlsTransport();
    } catch {
      return undefined;
    }
    return refusing(breaker, key, transport) ? { key, transport } : undefined;
  }

  /**
   * The transport the connector will name this request's TLS dial by, as it names it: undici's
   * servername for the request (its `servername` option, else its `Host` header's name when not
   * an address), else the agent's `tls.servername`, else the origin's host when a name. Read from
   * the agent's alone, a request with its own `Host` header was looked up under another name
   * than its dials' failures were filed under, and waited on undici's connect instead of being
   * refused at once (an outside review: 223-230 ms a request where 135-142 ms was the cost).
   */
  #tlsTransport(): Transport {
    const own = 'servername' in this.#opts ? (this.#opts as { servername?: unknown }).servername : undefined;
    const named = typeof own === 'string' && own !== '' ? own : serverNameOf(hostHeader(this.#opts.headers));
    return tlsTransportFor(named ?? this.#s.servername, new URL(this.#origin).hostname);
  }

  /** The agent underneath began to close (`shutdown` aborted): see {@link GuardedCall.#shutDown}. */
  handleEvent(): void {
    this.#shutDown();
  }

  /**
   * The agent is closing while the call retries. Waiting out a backoff, the call ends now, as if
   * retries had run out (the response held back, else the last failure); an attempt under way
   * runs on (undici's close() lets it finish, its destroy() fails it), and no retry follows it.
   */
  #shutDown(): void {
    if (this.#finished || this.#current?.running === true) return;
    this.#rare?.cancel?.(this.#s.shutdown!.reason);
  }

  /** retry() gave up, or the caller or the agent ended the call: the caller gets the held response, or the error. */
  #fail(err: unknown): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#s.shutdown?.removeEventListener('abort', this);
    const current = this.#current;
    current?.abandon(asError(err));
    // A deadline that cut a run of failed dials still marks the origin: what failed was dialling.
    const kind = classify(err instanceof DeadlineExceededError && err.cause !== undefined ? err.cause : err).kind;
    if (kind === 'dial' || kind === 'refused') this.#suspect();
    // The caller's own abort too: the answer was held only because a retry might follow, and raw
    // undici would have handed it over before the abort came (a 503 stays a 503, not the
    // caller's TimeoutError; an outside review found the swap). Not when the attempt under way
    // already gave the caller a response (one streaming, or one held whose body was still
    // arriving, handed over by abandon()): its body ends with the error; a second set of headers
    // after it would have ended that body with the held response's bytes.
    const held = this.#rare?.held;
    if (held !== undefined && current?.forwarded !== true) {
      if (kind !== 'dial' && kind !== 'refused') this.#s.suspects.delete(this.#origin); // it answered, and no dial failed since
      // The user's backoff or retryable threw, which ended the retries: the caller gets the
      // response, so the throw is told as a warning (it was swallowed, the retries silently off).
      const threw = this.#rare?.threw;
      if (threw !== undefined && threw.error === err) warnOnce("a GuardedAgent's backoff or retryable threw; the call ended with the response it held", threw.by, err);
      held.deliver(this.caller);
      return;
    }
    // undici refused a retry (the agent was closed meanwhile): the call failed as its last
    // attempt did, not because a retry could not be dispatched.
    // A retry that could not fit before the deadline (its backoff would end past it) ends the
    // call with the last attempt's own error, as undici alone would have failed: the deadline has
    // not passed (a refused port with timeout 300 said "deadline exceeded" after 5 ms). After
    // more than one attempt that cause is retry()'s RetriesExhaustedError, itself unwrapped in turn.
    const early = err instanceof DeadlineExceededError && isError(err.cause) && this.#s.clock.now() < this.deadline;
    const own = ownError(early ? err.cause : err);
    const lastFailure = this.#rare?.lastFailure;
    // A timeout the deadline set is the deadline, as the README says a call's timeout ends.
    // Either way, after an attempt that may have reached the server it never says "not sent" (a
    // retry refused its connect): see toldAsSentEarlier.
    if (this.#deadlineTimedOut(own)) this.caller.onError?.(toldAsSentEarlier(new DeadlineExceededError(this.#s.timeout, current!.number, { cause: own }), err));
    else this.caller.onError?.(toldAsSentEarlier(asError(isRefusal(own) && lastFailure !== undefined ? lastFailure : own), err));
  }

  /**
   * Whether `err` is the current attempt's undici headers or body timeout that the call's deadline
   * set (cut to the time left). undici's timers tick about every 0.5 s for timeouts of a second or
   * more, so such a timeout may fire before the deadline by this call's clock: it failed the call
   * with UND_ERR_HEADERS_TIMEOUT, not DeadlineExceededError (an outside review: 1 call in 8-12,
   * ~450 ms early), or another attempt went out in the instant left.
   */
  #deadlineTimedOut(err: unknown): boolean {
    const cut = this.#current?.deadlineCut ?? 0;
    if (cut === 0 || !(err instanceof errors.UndiciError)) return false;
    return (err.code === 'UND_ERR_HEADERS_TIMEOUT' && (cut & HEADERS_CUT) !== 0) || (err.code === 'UND_ERR_BODY_TIMEOUT' && (cut & BODY_CUT) !== 0);
  }

  /** Remembers that this origin's last call failed to dial: its next calls ask the breaker first. */
  #suspect(): void {
    const suspects = this.#s.suspects;
    if (suspects.size >= MAX_SUSPECTS) suspects.clear();
    suspects.add(this.#origin);
  }
}

/** Codes of the errors undici's dispatch() refuses a request with before trying it. */
const REFUSALS = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED', 'UND_ERR_MAX_ORIGINS_REACHED']);

/** Whether `err` is undici refusing a request (bad options, a closed agent), not a failure of it. */
function isRefusal(err: unknown): boolean {
  return err instanceof errors.UndiciError && REFUSALS.has(err.code);
}

/**
 * A request's own timeout when it is one undici takes (a finite number >= 0; 0 = none), else
 * undefined: the agent's applies, and undici still judges the value it was given.
 */
function own(value: number | null | undefined): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * The `Host` header among `headers` in a shape undici takes (a record, a flat array of names and
 * values, a `Map`, `Headers`), or undefined. Another iterable is not read: a generator would be
 * spent before undici reads it.
 */
function hostHeader(headers: unknown): string | undefined {
  if (headers === null || typeof headers !== 'object') return undefined;
  let entries: Iterable<[unknown, unknown]>;
  if (Array.isArray(headers)) entries = flatPairs(headers);
  else if (headers instanceof Map) entries = headers;
  else if (typeof (headers as { get?: unknown }).get === 'function') return stringOrNot((headers as { get(name: string): unknown }).get('host')); // Headers: any case
  else entries = Object.entries(headers);
  for (const [name, value] of entries) if (typeof name === 'string' && name.toLowerCase() === 'host') return stringOrNot(value);
  return undefined;
}

function* flatPairs(flat: readonly unknown[]): Iterable<[unknown, unknown]> {
  for (let i = 0; i + 1 < flat.length; i += 2) yield [flat[i], flat[i + 1]];
}

function stringOrNot(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The server name undici derives from a `Host` header: its host without the port; none for an address or nothing. */
function serverNameOf(host: string | undefined): string | undefined {
  if (host === undefined || host === '') return undefined;
  const name = host.startsWith('[') ? host.slice(1, Math.max(1, host.indexOf(']'))) : host.split(':')[0]!;
  return name === '' || isLiteral(name) ? undefined : name;
}

/**
 * Whether `err` is undici's "other side closed" on a connection that had already carried bytes
 * from its server (`socket.bytesRead > 0`, as undici reports the socket): most often a keep-alive
 * connection the server closed as this request went out on it. A fresh connection's close before
 * any byte (a server dying, or dying of the request) reads 0, and waits out the backoff as before.
 */
function staleConnection(err: unknown): boolean {
  if (typeof err !== 'object' || err === null || (err as { code?: unknown }).code !== 'UND_ERR_SOCKET') return false;
  const read = (err as { socket?: { bytesRead?: unknown } | null }).socket?.bytesRead;
  return typeof read === 'number' && read > 0;
}
