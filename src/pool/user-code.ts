/**
 * The pool's calls into user code (the connector's close, the `classify` option, an unwatch),
 * each guarded so that a throw or a rejection never escapes: it is contained, or means a
 * documented "nothing proven".
 *
 * @module
 */
import type { Connector, PoolClassification } from './pool-types.js';

const noop = (): void => {};

/** What the pool assumes when a `classify` option throws: nothing proven (no going back, no eviction). */
const UNPROVEN: PoolClassification = Object.freeze({ connectionDead: false, notSent: false });

/** @internal The connector's close, a synchronous throw included, as a promise that never rejects. */
export function closeSafely<C>(connector: Connector<C>, connection: C, reason: unknown): Promise<void> {
  let done: Promise<void>;
  try {
    done = Promise.resolve(connector.close(connection, reason));
  } catch (err) {
    done = Promise.reject(err);
  }
  return done.catch(noop);
}

/** @internal The `classify` option's verdict; one that throws proves nothing. */
export function classifySafely(classify: (err: unknown) => PoolClassification, err: unknown): PoolClassification {
  try {
    return classify(err);
  } catch {
    return UNPROVEN;
  }
}

/** @internal Calls a user's function whose result and throw mean nothing to the pool (an unwatch). */
export function callSafely(f: () => void): void {
  try {
    f();
  } catch {
    // nothing to undo: the connection is being closed either way
  }
}
