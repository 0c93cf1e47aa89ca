/**
 * The pool's calls into user code (the connector's close, the `classify` option, an unwatch),
 * each guarded so that a throw or a rejection never escapes: it is contained, or means a
 * documented "nothing proven". It is not hidden either: the first throw of each function becomes
 * a process warning (a close that throws may be leaking the connection it was to close).
 *
 * @module
 */
import { containAnswer, warnOnce } from '../core/warn-once.js';
import type { Connector, PoolClassification } from './pool-types.js';


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
  return done.catch((err: unknown) => warnOnce("the pool's connector.close threw (contained; reported once)", connector, err));
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
    // An async classifier's promise proves nothing (it is not awaited); its rejection is a throw.
    containAnswer("the pool's classify option threw (contained; reported once)", classify, c);
    const { connectionDead, notSent } = c as Partial<PoolClassification>;
    return connectionDead === true || notSent === true ? { connectionDead: connectionDead === true, notSent: notSent === true } : UNPROVEN;
  } catch (thrown) {
    warnOnce("the pool's classify option threw (contained; reported once)", classify, thrown);
    return UNPROVEN;
  }
}

/** @internal The `mayResend` option's answer: only `true` is a yes; one that throws is a no, reported once. */
export function askSafely(mayResend: () => boolean): boolean {
  try {
    return mayResend() === true;
  } catch (thrown) {
    warnOnce("the pool's mayResend option threw (contained; reported once)", mayResend, thrown);
    return false;
  }
}

/** @internal Calls an unwatch `connector.watch` returned, whose result and throw mean nothing to the pool. */
export function unwatchSafely(connector: object, unwatch: () => void): void {
  try {
    unwatch();
  } catch (err) {
    warnOnce("the pool's unwatch (returned by connector.watch) threw (contained; reported once)", connector, err); // nothing to undo: the connection is being closed either way
  }
}
