/**
 * One process warning per piece of user code that threw, however often it throws: a listener,
 * hook or schedule called per refusal would otherwise turn a dead host into a warning per call
 * (10 000 refusals with a throwing subscriber: 20 000 warning lines, 18 times the time).
 *
 * @module
 */
import { thrownText } from './validate.js';

/** Per kind of user code, the functions or objects whose throw was reported. */
const reported = new Map<string, WeakSet<object>>();

/**
 * Reports `err`, thrown by `owner` (a function, or the object it belongs to), as the process
 * warning `dialguard: <what>: <error>` the first time `owner` throws as `what`; later throws are
 * contained silently.
 *
 * @internal
 */
export function warnOnce(what: string, owner: object, err: unknown): void {
  let seen = reported.get(what);
  if (seen === undefined) reported.set(what, (seen = new WeakSet()));
  if (seen.has(owner)) return;
  seen.add(owner);
  process.emitWarning(`dialguard: ${what}: ${thrownText(err)}`);
}

/**
 * Watches what user code returned where nothing is awaited (a listener, subscriber, logger or
 * `onResult`): a promise, as an `async` one returns, that rejects is reported by
 * {@link warnOnce} as a throw would be, never left to end the process as an unhandled rejection.
 * Anything else is ignored; a plain `undefined` costs one `typeof`.
 *
 * @internal
 */
export function containAnswer(what: string, owner: object, answer: unknown): void {
  if (typeof answer !== 'object' || answer === null) return; // the usual: undefined
  try {
    const then = (answer as { then?: unknown }).then;
    if (typeof then === 'function') then.call(answer, undefined, (err: unknown) => warnOnce(what, owner, err));
  } catch (err) {
    warnOnce(what, owner, err); // a `then` getter or method that throws
  }
}
