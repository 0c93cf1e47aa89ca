/**
 * The retrying layer as an undici interceptor, for `dispatcher.compose(...)`: every request
 * dispatched through it is one {@link GuardedCall}, retried with dialguard's `retry()` only when
 * that is safe, inside the time the call was given.
 *
 * ```ts
 * const dispatcher = new Agent({ connect: guardedConnector() }).compose(guardedRetry({ timeout: 10_000 }));
 * ```
 *
 * Upgrades (WebSocket, CONNECT) pass through untouched: a tunnel is not a request to repeat.
 * `GuardedAgent` dispatches the same way without `compose()`, which would convert every
 * response's headers twice between undici's two handler interfaces.
 *
 * @module
 */
import { type Dispatcher, errors } from 'undici';
import { GuardedCall } from './guarded-call.js';
import { type LegacyHandler, legacy } from './handlers.js';
import { type GuardedRetryOptions, type RetrySettings, retrySettings } from './options.js';
import { type OptionNames, checkOptionNames, optionNames } from '../../core/option-names.js';

/** The option names guardedRetry() takes (a GuardedAgent takes them too): any other is warned about (see checkOptionNames). @internal */
export const RETRY_OPTION_NAMES: OptionNames<GuardedRetryOptions> = { timeout: true, maxAttempts: true, backoff: true, budget: true, retryStatuses: true, maxRetryAfter: true, headersTimeout: true, bodyTimeout: true, retryable: true, breaker: true, classify: true, onResult: true, clock: true, random: true };
const RETRY_OPTIONS = optionNames(RETRY_OPTION_NAMES);

/**
 * Dispatches one request through the retrying layer onto `dispatch` (upgrades, and options that
 * are not an object, straight to it, which answers as undici does). Returns what undici's
 * dispatch() returned for the first attempt: false when saturated.
 *
 * @throws InvalidArgumentError when `handler` is not an object (as undici's own dispatchers do).
 */
export function dispatchGuarded(s: RetrySettings, dispatch: Dispatcher['dispatch'], opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
  if (typeof handler !== 'object' || handler === null) throw new errors.InvalidArgumentError('handler must be an object');
  if (typeof opts !== 'object' || opts === null) return dispatch(opts, handler);
  // `in` first: reading a field the caller did not set, on the object undici's request() and
  // fetch() build by spreading, costs V8 ~0.1 µs each (measured); asking whether it is there, a tenth.
  if (('upgrade' in opts && opts.upgrade !== undefined && opts.upgrade !== null && opts.upgrade !== false) || opts.method === 'CONNECT') {
    return dispatch(opts, handler);
  }
  const problem = handlerProblem(handler as LegacyHandler);
  if (problem !== undefined) {
    // As undici's Request: the handler hears it through onError when it has one, else it is thrown.
    const err = new errors.InvalidArgumentError(problem);
    if (typeof (handler as LegacyHandler).onError !== 'function') throw err;
    (handler as LegacyHandler).onError!(err);
    return false;
  }
  return new GuardedCall(s, dispatch, opts, legacy(handler)).start();
}

/**
 * What undici's Request would refuse in an older-style handler (its `assertRequestHandler`): the
 * retrying layer, not undici, holds the caller's handler, so it checks the same. A newer-style
 * handler is not checked (undici does not either).
 */
function handlerProblem(handler: LegacyHandler): string | undefined {
  if (typeof (handler as Dispatcher.DispatchHandler).onRequestStart === 'function') return undefined;
  if (typeof handler.onConnect !== 'function') return 'invalid onConnect method';
  if (typeof handler.onError !== 'function') return 'invalid onError method';
  if (handler.onBodySent !== undefined && typeof handler.onBodySent !== 'function') return 'invalid onBodySent method';
  if (typeof handler.onHeaders !== 'function') return 'invalid onHeaders method';
  if (typeof handler.onData !== 'function') return 'invalid onData method';
  if (typeof handler.onComplete !== 'function') return 'invalid onComplete method';
  return undefined;
}

/**
 * Builds the retrying interceptor. Use it with `compose` on any undici dispatcher; pair it with
 * {@link guardedConnector} (and give both the same breaker) for the whole of dialguard.
 *
 * @throws TypeError/RangeError naming the option, for any invalid option.
 */
export function guardedRetry(options: GuardedRetryOptions = {}): Dispatcher.DispatcherComposeInterceptor {
  checkOptionNames('guardedRetry', options, RETRY_OPTIONS);
  const s = retrySettings(options);
  return (dispatch) =>
    function guardedRetryDispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      return dispatchGuarded(s, dispatch, opts, handler);
    };
}
