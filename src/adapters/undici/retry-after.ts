/**
 * The `Retry-After` response header (RFC 9110 §10.2.3): a delay in seconds, or an HTTP-date.
 *
 * @module
 */

/**
 * Milliseconds the server asked the client to wait, or undefined when the header is absent or
 * malformed. A date in the past is 0. `wallNow` is the wall clock (`Date.now()`): an HTTP-date
 * is wall-clock time, and only turning it into a delay may read that clock.
 */
export function retryAfterMs(value: string | string[] | undefined, wallNow: () => number = Date.now): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const text = v.trim();
  // Any number of digits: a longer wait than any limit is still a wait the server asked for (it
  // ends the call by maxRetryAfter), never an absent header retried at once.
  if (/^\d+$/.test(text)) return Number(text) * 1_000;
  // Every HTTP-date form starts with the weekday; anything else Date.parse might accept is not one.
  if (!/^[A-Za-z]{3,9},? /.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - wallNow());
}
