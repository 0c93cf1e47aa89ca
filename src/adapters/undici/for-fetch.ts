/**
 * Node's global `fetch` types its `dispatcher` option with the undici types bundled in
 * `@types/node` (undici-types), which the undici package's own `Dispatcher` classes (undici's
 * `Agent` as much as `GuardedAgent`) do not match under strict settings such as
 * `exactOptionalPropertyTypes`. At run time they speak the same protocol; this says so once.
 *
 * @module
 */
import type { Dispatcher } from 'undici';

/**
 * The type of the `dispatcher` option of Node's global `fetch` (`RequestInit['dispatcher']`,
 * without `undefined`); undici's `Dispatcher` in a project whose `lib` has DOM, whose
 * `RequestInit` has no `dispatcher` (named directly, every import of dialguard/undici failed to
 * compile there).
 */
export type FetchDispatcher = RequestInit extends { dispatcher?: infer D } ? NonNullable<D> : Dispatcher;

/**
 * Returns `dispatcher` typed for Node's global `fetch`, so that
 * `fetch(url, { dispatcher: forFetch(agent) })` compiles without a cast.
 *
 * @param dispatcher - a `GuardedAgent` or any undici `Dispatcher`.
 * @returns the same object.
 * @throws TypeError if `dispatcher` is not an object with a `dispatch` method.
 */
export function forFetch(dispatcher: Dispatcher): FetchDispatcher {
  if (typeof dispatcher !== 'object' || dispatcher === null || typeof (dispatcher as { dispatch?: unknown }).dispatch !== 'function') {
    throw new TypeError(`forFetch takes an undici Dispatcher (e.g. a GuardedAgent), got ${dispatcher === null ? 'null' : typeof dispatcher}`);
  }
  return dispatcher as unknown as FetchDispatcher;
}
