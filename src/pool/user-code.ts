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

/**
 * @internal The `classify` option's verdict; one that throws, or answers with anything but an
 * object (`undefined` from a classifier that only knows some errors), proves nothing. Only a
 * `true` counts: a truthy string is no proof.
 */
export function classifySafely(classify: (err: unknown) => PoolClassification, err: unknown): PoolClassification {
  try {
    const c: unknown = classify(err);
    if (typeof c !== 'object' || c === null) return UNPROVEN;
    const { connectionDead, notSent } = c as Partial<PoolClassification>;
    return connectionDead === true || notSent === true ? { connectionDead: connectionDead === true, notSent: notSent === true } : UNPROVEN;
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
