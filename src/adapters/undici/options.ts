/**
 * The options of the retrying layer ({@link guardedRetry}) with their defaults and their checks
 * (once, at construction: errors name the option and the bad value).
 *
 * @module
 */
import type { DialWaiters } from './dial-waiters.js';
import type { Schedule } from '../../core/backoff.js';
import { type ClassifyOptions, checkClassifyOptions } from '../../core/classify.js';
import { type Clock, systemClock } from '../../core/clock.js';
import { restartSpanningBackoff } from '../../core/restart-backoff.js';
import { checkDuration, checkFunction, checkInteger, opt, show } from '../../core/validate.js';
import { breakerOption } from '../../guard/dial.js';
import { HostBreaker } from '../../guard/host-breaker.js';
import { RetryBudget, sharedRetryBudget } from '../../retry/budget.js';
import type { RetryPredicate, RetryResult } from '../../retry/retry.js';

/** Options of the retrying layer; every one has a default. */
export interface GuardedRetryOptions {
  /**
   * The whole call's budget, ms, across every attempt, every wait between them and the response
   * body. Each attempt's headers and body timeouts are cut to what is left of it. Default none:
   * only the caller knows how long its answer is worth (a long poll may wait minutes); set it, or
   * bound a call with its own `signal`.
   */
  timeout?: number;
  /**
   * Most attempts per call, the first included. Default 3 (as `retry()`): the first try and two
   * retries ride out a failover and a blip without tripling the load. 1 turns retries off.
   */
  maxAttempts?: number;
  /**
   * The wait before each retry. Default `restartSpanningBackoff`: 400-600 ms, then 800-1 200 ms
   * (jittered, so clients that failed together come back at spread-out times): the default three
   * attempts span a 0.3-1 s server restart, so a deploy loses no idempotent call. A `Retry-After`
   * the server sent lengthens the wait to at least what it asked.
   */
  backoff?: Schedule;
  /**
   * The retry budget each retry must withdraw from. Default the process-wide
   * `sharedRetryBudget()` (20 % of calls, at least 10/s), so a fleet cannot multiply an outage;
   * `null` for none.
   */
  budget?: RetryBudget | null;
  /**
   * Statuses an idempotent request is tried again on. Default 429, 502, 503 and 504: the server
   * (or the gateway in front of it) says it could not serve the request now. 500 is not among
   * them: a server bug answers the same way twice. When no retry is left, the caller gets the
   * last such response as it came, never an error. Each from 400 to 599 (a RangeError otherwise:
   * a success or a redirect is the server's answer, and retried it was sent `maxAttempts` times).
   */
  retryStatuses?: readonly number[];
  /**
   * Longest `Retry-After` honoured, ms; a longer one ends the call with that response. Default
   * 30 000: a longer wait is the caller's decision (it sees the header), not a library's. The
   * call's `timeout` cuts it further: a retry that could not start before the deadline is not made.
   */
  maxRetryAfter?: number;
  /**
   * Each attempt's wait for response headers, ms, for a request that names none; 0 for none. A
   * request's own `headersTimeout` wins, as with undici (a long poll may ask for more, or none),
   * and is the whole call's wait for headers: a retry gets what is left of it, and none is made
   * once it is spent (seed 004: a long poll retried at minute 4 of 5 waits 1 more minute, not 5).
   * Either way it is cut to the call's remaining time. Default: the dispatcher's own (for a
   * GuardedAgent, 300 000: undici's, cut the same way; under `compose()`, the Agent's own, left
   * as it is, since the layer cannot read it: the deadline still ends the attempt when it
   * passes). Lower it to retry an idempotent call on a server that accepts and never answers.
   */
  headersTimeout?: number;
  /**
   * Each attempt's wait between two body chunks, ms, for a request that names none; 0 for none.
   * A request's own `bodyTimeout` wins; cut to the call's remaining time. Default: the
   * dispatcher's own, as for `headersTimeout`.
   */
  bodyTimeout?: number;
  /**
   * Overrides the retry decision for failures the rules leave open (return undefined to keep
   * the default: `transient && (notSent || idempotent)`). Never asked about a refusal by the
   * breaker, the caller's abort, a response already handed to the caller, or a one-shot body
   * already read: those are never retried.
   */
  retryable?: RetryPredicate;
  /**
   * The breaker asked before each attempt, so a refused origin fails without entering undici.
   * Default the process-wide `sharedBreaker()` (the one the guarded connector reports to by
   * default); `null` for no check. Pass the breaker your connector uses.
   */
  breaker?: HostBreaker | null;
  /** Patterns and hook for `classify`. Default none. */
  classify?: ClassifyOptions;
  /** Called once per call when it ends, with whole-call data (attempts, elapsed). Default none. */
  onResult?: (result: RetryResult) => void;
  /** Time source for the deadline and the waits. Default {@link systemClock}. */
  clock?: Clock;
  /** Uniform [0, 1) source for the backoff's jitter. Default `Math.random`. */
  random?: () => number;
}

/** The retrying layer's options, checked and with their defaults. */
export interface RetrySettings {
  timeout: number;
  maxAttempts: number;
  backoff: Schedule;
  budget: RetryBudget | null;
  retryStatuses: ReadonlySet<number>;
  maxRetryAfter: number;
  /** undefined: the dispatcher's own (see `dispatcherTimeouts`). */
  headersTimeout: number | undefined;
  bodyTimeout: number | undefined;
  retryable: RetryPredicate | undefined;
  breaker: HostBreaker | null;
  classify: ClassifyOptions | undefined;
  onResult: ((result: RetryResult) => void) | undefined;
  clock: Clock;
  random: () => number;
  /**
   * The headers and body timeouts the dispatcher underneath applies to a request that names
   * none, when known (the GuardedAgent's own Agent: its `headersTimeout`/`bodyTimeout`). An
   * attempt whose timeouts would be those, with a body that needs no wrapping, is dispatched with
   * the caller's own options object rather than a copy.
   */
  dispatcherTimeouts: { headers: number; body: number } | undefined;
  /**
   * Aborted as the dispatcher underneath closes or is destroyed (the GuardedAgent's own, with
   * undici's ClientClosedError or ClientDestroyedError): a call waiting out a backoff ends then,
   * with the response it holds back or its last failure, rather than after the wait with a
   * refused dispatch. Undefined (an interceptor over a dispatcher it cannot watch): never.
   */
  shutdown: AbortSignal | undefined;
  /**
   * State, not an option: the origins whose last call failed to dial. Only their calls ask the
   * breaker before entering undici; a healthy origin costs no lookup.
   */
  suspects: Set<string>;
  /**
   * The TLS server name the dials send when the agent names one (its `tls.servername`), else
   * undefined (the origin's host): the breaker's transport for a suspect origin's early refusal.
   */
  servername: string | undefined;
  /**
   * The unix socket the agent's dials take (its `socketPath`), else undefined: its dials are
   * filed by that path, never by the origin, and so is a suspect origin's early refusal.
   */
  socketPath: string | undefined;
  /**
   * The GuardedAgent's record of which traced attempts wait for a connection (see dial-waiters):
   * its dials run in the context of the request they serve. Undefined (an interceptor over a
   * dispatcher whose connector it does not run): none.
   */
  dialWaiters: DialWaiters | undefined;
}

/** undici's default headers and body timeouts (300 s). */
export const UNDICI_TIMEOUT = 300_000;

/**
 * Applies the defaults and checks every option.
 *
 * @throws TypeError/RangeError naming the option and the bad value.
 */
export function retrySettings(options: GuardedRetryOptions): RetrySettings {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
  const clock = opt(options.clock, systemClock);
  if (typeof clock !== 'object' || clock === null) throw new TypeError(`clock must be a Clock, got ${show(clock)}`);
  checkFunction('clock.now', clock.now);
  checkFunction('clock.setTimeout', clock.setTimeout);
  checkFunction('clock.clearTimeout', clock.clearTimeout);
  const budget = options.budget === undefined ? sharedRetryBudget() : options.budget;
  if (budget !== null && !(budget instanceof RetryBudget)) throw new TypeError(`budget must be a RetryBudget or null, got ${show(budget)}`);
  const breaker = breakerOption(options.breaker);
  const statuses = opt<readonly number[]>(options.retryStatuses, [429, 502, 503, 504]);
  if (!Array.isArray(statuses)) throw new TypeError(`retryStatuses must be an array of statuses, got ${show(statuses)}`);
  // A failure's status only: a success or a redirect retried was sent maxAttempts times, its answer discarded each time.
  statuses.forEach((s, i) => checkInteger(`retryStatuses[${i}]`, s, 400, 599));
  checkClassifyOptions('classify', options.classify);
  return {
    timeout: options.timeout === undefined ? Infinity : checkDuration('timeout', options.timeout, 1, true),
    maxAttempts: checkInteger('maxAttempts', opt(options.maxAttempts, 3), 1),
    backoff: checkFunction<Schedule>('backoff', opt<Schedule>(options.backoff, restartSpanningBackoff)),
    budget,
    retryStatuses: new Set(statuses),
    maxRetryAfter: checkDuration('maxRetryAfter', opt(options.maxRetryAfter, 30_000), 0, true),
    headersTimeout: options.headersTimeout === undefined ? undefined : checkDuration('headersTimeout', options.headersTimeout),
    bodyTimeout: options.bodyTimeout === undefined ? undefined : checkDuration('bodyTimeout', options.bodyTimeout),
    retryable: options.retryable === undefined ? undefined : checkFunction<RetryPredicate>('retryable', options.retryable),
    breaker,
    classify: options.classify,
    onResult: options.onResult === undefined ? undefined : checkFunction<(r: RetryResult) => void>('onResult', options.onResult),
    clock,
    random: checkFunction<() => number>('random', opt(options.random, Math.random)),
    dispatcherTimeouts: undefined,
    shutdown: undefined,
    suspects: new Set(),
    servername: undefined,
    dialWaiters: undefined,
    socketPath: undefined,
  };
}
