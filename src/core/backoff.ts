/**
 * Backoff schedules as data. A schedule is a pure function from the attempt number (and the
 * previous delay) to the next delay; nothing here reads a clock or sleeps, so a schedule is
 * tested by calling it. `random` is injected for the same reason.
 *
 * @module
 */
import { warnOnce } from './warn-once.js';
import { checkDuration, checkNumber, MAX_DURATION, opt } from './validate.js';

/**
 * Computes the delay before the `n`th wait (1-based). `previous` is the delay this schedule
 * returned for `n - 1` (0 for the first), which decorrelated jitter needs.
 */
export type Schedule = (n: number, previous: number, random: () => number) => number;

/** Options shared by the exponential schedules. */
export interface ExponentialOptions {
  /** First delay, ms. */
  base: number;
  /** Cap on the un-jittered delay, ms. */
  max: number;
  /** Growth per step. Default 2: doubling, as seed 002 and gRPC's connection backoff use. */
  multiplier?: number;
}

/** Options of {@link proportionalJitter}. */
export interface ProportionalJitterOptions extends ExponentialOptions {
  /**
   * Spread, as a fraction of the delay: the delay is drawn from `d * [1 - jitter, 1 + jitter]`.
   * Default 0.5 (seed 002's ±50 %): clients that backed off together do not retry together,
   * while the mean stays `d`.
   */
  jitter?: number;
}

function checkExponential(where: string, options: ExponentialOptions): Required<ExponentialOptions> {
  const base = checkDuration(`${where}.base`, options.base);
  const max = checkDuration(`${where}.max`, options.max);
  if (max < base) throw new RangeError(`${where}.max (${max}) must be >= base (${base})`);
  const multiplier = checkNumber(`${where}.multiplier`, opt(options.multiplier, 2), 1);
  return { base, max, multiplier };
}

function uncapped(o: Required<ExponentialOptions>, n: number): number {
  // A zero base stays zero: 0 * multiplier^n is NaN once the power overflows to Infinity.
  if (o.base === 0) return 0;
  const d = o.base * o.multiplier ** Math.max(0, n - 1);
  return Number.isNaN(d) ? o.max : Math.min(o.max, d); // a NaN step number waits the cap
}

/** `base`, growing by `multiplier` each step to `max`; no jitter. */
export function exponential(options: ExponentialOptions): Schedule {
  const o = checkExponential('exponential', options);
  return (n) => uncapped(o, n);
}

/**
 * Exponential growth to `max`, then ±`jitter` around it (seed 002). `max` caps the delay before
 * jitter, so the mean at the cap is `max` and the longest wait is `max * (1 + jitter)`.
 */
export function proportionalJitter(options: ProportionalJitterOptions): Schedule {
  const o = checkExponential('proportionalJitter', options);
  const jitter = checkNumber('proportionalJitter.jitter', opt(options.jitter, 0.5), 0, 1);
  return (n, _previous, random) => uncapped(o, n) * (1 - jitter + 2 * jitter * random());
}

/**
 * "Full jitter" (AWS architecture blog): uniform in `[0, min(max, base * multiplier^(n-1))]`.
 * Spreads a synchronised fleet the most; the mean is half the exponential delay.
 */
export function fullJitter(options: ExponentialOptions): Schedule {
  const o = checkExponential('fullJitter', options);
  return (n, _previous, random) => uncapped(o, n) * random();
}

/**
 * "Decorrelated jitter": uniform in `[base, previous * 3]`, capped at `max`. Each delay depends
 * on the last one drawn, not on the attempt number, so clients drift apart over time.
 */
export function decorrelatedJitter(options: Omit<ExponentialOptions, 'multiplier'>): Schedule {
  const o = checkExponential('decorrelatedJitter', options);
  return (_n, previous, random) => {
    const hi = Math.max(o.base, previous * 3);
    return Math.min(o.max, o.base + (hi - o.base) * random());
  };
}

/** The same delay every time. */
export function constant(ms: number): Schedule {
  const d = checkDuration('constant', ms);
  return () => d;
}

/**
 * A schedule's answer made safe to wait: NaN, a negative number or a non-number is no wait (0),
 * and anything past `max` (default {@link MAX_DURATION}, the longest a timer holds; so Infinity
 * too) waits `max`. Every consumer of a {@link Schedule} (retry's waits, a breaker's open window)
 * passes the schedule's answer through here, so no schedule, built-in or user-written, can make a
 * wait NaN, negative or endless, nor a host unblockable.
 */
export function safeDelay(delay: unknown, max = MAX_DURATION): number {
  if (typeof delay !== 'number' || !(delay > 0)) return 0;
  return Math.min(delay, max);
}

/**
 * Calls `schedule` for a consumer that cannot fail (a breaker settling a dial from a timer): the
 * answer through {@link safeDelay}, and a schedule that throws is reported once as a process
 * warning and answered with `previous` (the last delay it gave; 0 the first time), never thrown
 * into the caller's stack.
 *
 * @internal
 */
export function drawDelay(schedule: Schedule, n: number, previous: number, random: () => number): number {
  try {
    return safeDelay(schedule(n, previous, random));
  } catch (err) {
    warnOnce('a backoff schedule threw; using its previous delay', schedule, err);
    return safeDelay(previous);
  }
}

/**
 * A caller's `random` made safe for a consumer that cannot fail: an answer outside [0, 1) (NaN,
 * Infinity, 7) or a throw is replaced by `fallback()`, a throw reported once as a process
 * warning (`who`: whose random). A breaker falls back to 0 (unchecked, a throw lost a probe's
 * settle and an Infinity held a host refused for ever); a retry loop to `Math.random` (a NaN
 * answered a 0 ms backoff: every client retried at once; an outside review).
 *
 * @internal
 */
export function unitRandom(random: () => number, fallback: () => number, who: string): () => number {
  return () => {
    let r: unknown;
    try {
      r = random();
    } catch (err) {
      warnOnce(`${who} random threw (replaced; reported once)`, random, err);
      return fallback();
    }
    // Stryker disable next-line EqualityOperator: r > 0 answers the same for a 0 where the fallback is 0
    return typeof r === 'number' && r >= 0 && r < 1 ? r : fallback();
  };
}
