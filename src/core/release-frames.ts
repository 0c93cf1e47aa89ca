/**
 * Letting go of what an error's stack trace holds, for errors kept past the call that made them.
 *
 * V8 formats `error.stack` lazily: until something reads it, the error holds the frames it
 * captured, and each frame its function and receiver. An error made inside a call (a retry's
 * verdict, a breaker's refusal, a socket's ECONNREFUSED with a story attached) thereby keeps that
 * call reachable: its handler, its timers, its request body. The breaker keeps a host's last
 * error, and the refusal made from it, for as long as it remembers the host (up to its capacity,
 * for `idleRetention`): an outside review found 52 MiB held after 200 failed 256 KiB POSTs and
 * their agent were gone (plain undici: under 1 MiB). Reading the stack once turns the frames into
 * a string and drops them.
 */
import { MAX_CHAIN_MEMBERS, MAX_CHAIN_NODES } from './errors.js';
import { isError } from './validate.js';

/**
 * Formats the stack of `err` and of the errors it wraps (`cause`, and the members of an `errors`
 * array, as RetriesExhaustedError and AggregateError hold them), at most {@link MAX_CHAIN_NODES}
 * errors and {@link MAX_CHAIN_MEMBERS} members of each, so that none of them keeps its frames'
 * objects alive. Never throws (a hostile getter, a throwing `Error.prepareStackTrace`); returns
 * `err`. Costs one stack format per error, once: call it where an error is kept, not per call.
 */
export function releaseFrames<T>(err: T): T {
  const seen = new Set<unknown>();
  const pending: unknown[] = [err];
  while (pending.length > 0 && seen.size < MAX_CHAIN_NODES) {
    const node = pending.pop();
    if (typeof node !== 'object' || node === null || seen.has(node)) continue;
    seen.add(node);
    try {
      if (!isError(node)) continue;
      void node.stack; // formats it, once; V8 then lets the captured frames go
      const cause: unknown = (node as { cause?: unknown }).cause;
      if (cause !== undefined) pending.push(cause);
      const members: unknown = (node as { errors?: unknown }).errors;
      if (Array.isArray(members)) pending.push(...members.slice(0, MAX_CHAIN_MEMBERS));
    } catch {
      // A Proxy, a throwing getter or stack formatter: nothing more to release there.
    }
  }
  return err;
}
