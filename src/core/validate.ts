/**
 * Option checks that run once, at construction. A bad value is an error naming the option and
 * the value, never a silent fallback to a default (`if (options.x)` would drop a legitimate 0).
 *
 * @module
 */
import { types } from 'node:util';

/** `value` if it is a finite number `>= min` (and `<= max`), else a RangeError/TypeError naming `name`. */
export function checkNumber(name: string, value: unknown, min: number, max = Number.POSITIVE_INFINITY): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number, got ${show(value)}`);
  if (Number.isNaN(value) || value < min || value > max) {
    const range = max === Number.POSITIVE_INFINITY ? `>= ${min}` : `between ${min} and ${max}`;
    throw new RangeError(`${name} must be ${range}, got ${show(value)}`);
  }
  return value;
}

/**
 * The longest duration a timer can wait, 2^31-1 ms (about 24.8 days). Node fires a timer set
 * beyond it after 1 ms (with a TimeoutOverflowWarning), so a longer "timeout" would fire at once.
 */
export const MAX_DURATION = 2 ** 31 - 1;

/**
 * A duration in milliseconds: `>= min` (default 0) and `<= max` (default {@link MAX_DURATION}),
 * else a RangeError naming `name`. `Infinity` (meaning "never") only when `allowInfinity`. Every
 * duration option and argument in dialguard goes through here, so none can reach a timer that
 * would fire at once; only code that re-arms its own timer past the limit passes a larger `max`.
 */
export function checkDuration(name: string, value: unknown, min = 0, allowInfinity = false, max = MAX_DURATION): number {
  const n = checkNumber(name, value, min);
  if (n === Number.POSITIVE_INFINITY) {
    if (allowInfinity) return n;
    throw new RangeError(`${name} must be finite, got ${show(value)}`);
  }
  if (n > max) {
    const none = allowInfinity ? ', or Infinity for none' : '';
    throw new RangeError(`${name} must be at most ${max} ms (a timer set beyond 2^31-1 ms fires at once)${none}, got ${show(value)}`);
  }
  return n;
}

/** An integer `>= min` (and `<= max`). */
export function checkInteger(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = checkNumber(name, value, min, max);
  if (!Number.isInteger(n)) throw new RangeError(`${name} must be an integer, got ${show(value)}`);
  return n;
}

/**
 * `value` when it is an AbortSignal (or one of another realm or polyfill: an object that can be
 * listened to); undefined for undefined or null (none, as fetch takes `signal: null`); a
 * TypeError naming `name` otherwise. An AbortController passed for its signal (a common slip)
 * fails here, before any timer or listener is armed, not at its first use.
 */
export function checkSignal(name: string, value: unknown): AbortSignal | undefined {
  if (value === undefined || value === null) return undefined;
  if (value instanceof AbortSignal) return value;
  const like = value as { addEventListener?: unknown; removeEventListener?: unknown };
  if (typeof value !== 'object' || typeof like.addEventListener !== 'function' || typeof like.removeEventListener !== 'function') {
    throw new TypeError(`${name} must be an AbortSignal, got ${show(value)}`);
  }
  return value as AbortSignal;
}

/**
 * Shortest keep-alive PING interval, ms, short of 0 (off): 10. A tinier one (1e-9, a fraction)
 * became a PING every millisecond, a timer that never rests; 10 ms is already 100 PINGs a
 * second, so nothing a user means is refused.
 */
export const MIN_KEEPALIVE_INTERVAL = 10;

/** A keep-alive interval, ms: 0 (off) or at least {@link MIN_KEEPALIVE_INTERVAL}; a RangeError naming `name` otherwise. */
export function checkKeepAlive(name: string, value: unknown): number {
  const ms = checkDuration(name, value);
  if (ms > 0 && ms < MIN_KEEPALIVE_INTERVAL) throw new RangeError(`${name} must be 0 (off) or >= ${MIN_KEEPALIVE_INTERVAL} ms, got ${show(value)}`);
  return ms;
}

/** `value` when a boolean, `fallback` when undefined; a TypeError naming `name` otherwise (`'yes'` is not `true`). */
export function checkBoolean(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${show(value)}`);
  return value;
}

/** A function, or a TypeError naming `name`. */
export function checkFunction<F extends (...args: never[]) => unknown>(name: string, value: unknown): F {
  if (typeof value !== 'function') throw new TypeError(`${name} must be a function, got ${show(value)}`);
  return value as F;
}

/** `value` when not undefined, else `fallback`: the one way an option takes its default. */
export function opt<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value;
}

/** Renders a bad option value for an error message, without throwing on odd inputs. */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  return Array.isArray(value) ? 'an array' : 'an object';
}

/**
 * `String(thrown)` for a warning about what user code threw, which never throws itself: an
 * object with no prototype, or a `toString` that throws, would otherwise escape the very
 * isolation the warning reports.
 */
export function thrownText(thrown: unknown): string {
  try {
    return String(thrown);
  } catch {
    return '[a value that cannot be printed]';
  }
}

/**
 * Whether `value` is an Error, from this realm or another. Node's own errors (a socket's
 * ECONNREFUSED) come from the main realm; code loaded in a `vm` context (jest runs tests so) has
 * an `Error` of its own, and `instanceof Error` said no to them: `asError` wrapped each in a new
 * Error with its text alone, its `code` lost, and a refused dial was never retried there (an
 * outside review).
 */
export function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

/** `thrown` as an Error: itself when it is one (see {@link isError}), else an Error carrying its text (see {@link thrownText}). */
export function asError(thrown: unknown): Error {
  return isError(thrown) ? thrown : new Error(thrownText(thrown));
}
