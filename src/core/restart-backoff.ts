/**
 * The adapters' default retry schedule: long enough, together, to span a server restart inside
 * a call's default attempts, short enough that a dead host still costs less than raw undici.
 *
 * @module
 */
import type { Schedule } from './backoff.js';
import { DEFAULT_CONNECT_TIMEOUT } from './connect-timeout.js';

/** First wait before a retry, ms. */
const BASE = 400;
/** Cap on any one wait, ms (attempts past the third, if configured). */
const MAX = 10_000;

/**
 * `min(10 000, 400 * 2^(n-1) * (1 + 0.5 * random))` ms: 400-600 ms before the second attempt,
 * 800-1 200 ms before the third. The two waits add up to at least 1.2 s, so a call's three
 * default attempts span a process restart or pod reschedule of 0.3-1 s (the port closed, every
 * dial refused) and the third lands on the restarted server; jitter spreads callers that failed
 * together so they do not return together. At most 1.8 s, so a blackholed host's three bounded
 * dials (2.5 s each) cost under undici's default 10 s connect timeout.
 */
export const restartSpanningBackoff: Schedule = (n, _previous, random) =>
  Math.min(MAX, BASE * 2 ** Math.min(30, Math.max(0, n - 1)) * (1 + 0.5 * random()));

/**
 * The adapters' default bound on one dial: {@link DEFAULT_CONNECT_TIMEOUT} (2 500 ms), as every
 * entry point's. Three attempts at a blackholed host, with {@link restartSpanningBackoff} between
 * them, cost at most 9.3 s: no more than raw undici's single 10 s connect timeout.
 *
 * @deprecated Use {@link DEFAULT_CONNECT_TIMEOUT}: one default for every entry point.
 */
export const ADAPTER_CONNECT_TIMEOUT: number = DEFAULT_CONNECT_TIMEOUT;
