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
