/**
 * The pool's connect attempt for a connector that guards and bounds its target itself (per
 * address, each address its own breaker entry): no dial of the pool's own, still stopped by close().
 *
 * @module
 */
import type { DialContext } from '../guard/dial.js';
import type { DialPermit } from '../guard/host-breaker-types.js';

/** The permit of an establishment its connector guards itself: it settles nothing. */
const UNGUARDED: DialPermit = { host: '', probe: false, settled: true, succeeded() {}, failed() {}, abandoned() {}, progressed() {} };

/**
 * Runs `establish` for a connector that guards and bounds the target itself (its own dials ask
 * the breaker, arm their timeouts and are reported): no second breaker entry, timer or dial event
 * here. The pool's closing still aborts it through `signal`, and rejects at once with its reason
 * (as `dial` does), so no waiter depends on the connector heeding it; a connection `establish`
 * delivers after that goes to `dispose`.
 */
export function unguarded<C>(establish: (ctx: DialContext) => Promise<C>, signal: AbortSignal, dispose: (connection: C) => void): Promise<C> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<C>((resolve, reject) => {
    let done = false;
    const onAbort = (): void => {
      done = true;
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort);
    establish({ signal, permit: UNGUARDED, phase: 'tcp', answered: false }).then(
      (connection) => {
        signal.removeEventListener('abort', onAbort);
        if (done) dispose(connection);
        else resolve(connection);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err); // a no-op once aborted
      },
    );
  });
}
