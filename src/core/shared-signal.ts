/**
 * A caller's AbortSignal is often shared: one request's signal fanned out to every backend call
 * it makes. Each concurrent call listens to it while it runs, so 11 of them are not a leak, yet
 * Node warns (`MaxListenersExceededWarning`) past its default of 10 listeners per signal.
 *
 * @module
 */
import { defaultMaxListeners, getMaxListeners, setMaxListeners } from 'node:events';

/**
 * How many listeners a caller's signal may hold once dialguard listens to it: 1 500, as undici
 * (Node's fetch) raises a signal it is handed. Concurrent calls sharing one signal stay quiet,
 * and a real leak (a listener added per call and never removed) is still reported.
 */
const SHARED_SIGNAL_LISTENERS = 1_500;

/**
 * Adds `listener` for `signal`'s `abort` (once: removing it before is the caller's), after raising the signal's listener limit to
 * {@link SHARED_SIGNAL_LISTENERS} if it is still Node's default (a limit the caller set is
 * theirs, and left as is). A signal Node cannot read a limit from (a look-alike) is listened to
 * as it is; `addEventListener` decides whether it can be.
 *
 * @internal
 */
export function onCallerAbort(signal: AbortSignal, listener: Parameters<AbortSignal['addEventListener']>[1]): void {
  try {
    if (getMaxListeners(signal) === defaultMaxListeners) setMaxListeners(SHARED_SIGNAL_LISTENERS, signal);
  } catch {
    // not a Node EventTarget: nothing to raise
  }
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once; `once` only lets go of the listener after it ran
  signal.addEventListener('abort', listener, { once: true });
}
