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
 *
 * @module
 */
import type { Dispatcher } from 'undici';
import { GuardedCall } from './guarded-call.js';
import { type GuardedRetryOptions, retrySettings } from './options.js';

/**
 * Builds the retrying interceptor. Use it with `compose` on any undici dispatcher; pair it with
 * {@link guardedConnector} (and give both the same breaker) for the whole of dialguard.
 *
 * @throws TypeError/RangeError naming the option, for any invalid option.
 */
export function guardedRetry(options: GuardedRetryOptions = {}): Dispatcher.DispatcherComposeInterceptor {
  const s = retrySettings(options);
  return (dispatch) =>
    function guardedRetryDispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      if ((opts.upgrade !== undefined && opts.upgrade !== null && opts.upgrade !== false) || opts.method === 'CONNECT') {
        return dispatch(opts, handler);
      }
      new GuardedCall(s, dispatch, opts, handler).start();
      return true;
    };
}
