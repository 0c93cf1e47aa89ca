/**
 * Time, injected. Every state machine in dialguard reads `now()` from a {@link Clock} and never
 * calls `Date.now()`, so its tests drive a manual clock instead of sleeping.
 *
 * @module
 */
import { MAX_DURATION, checkFunction, show } from './validate.js';
import { onCallerAbort } from './shared-signal.js';

/** An opaque handle for a timer started by a {@link Clock}. */
export interface TimerHandle {
  /** Brand only: handles come from {@link Clock.setTimeout}. */
  readonly __timerHandle?: never;
}

/** A source of monotonic time and timers. */
export interface Clock {
  /** Monotonic milliseconds since an arbitrary origin (never wall-clock time). */
  now(): number;
  /** Runs `callback` once, `ms` milliseconds from now. */
  setTimeout(callback: () => void, ms: number): TimerHandle;
  /** Cancels a timer; cancelling one that already ran is a no-op. */
  clearTimeout(handle: TimerHandle): void;
}

/**
 * The real clock: `performance.now()` (monotonic, so an NTP step never stretches or shrinks a
 * window) and Node's timers.
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms) as unknown as TimerHandle,
  clearTimeout: (handle) => clearTimeout(handle as unknown as NodeJS.Timeout),
};

/**
 * A `clock` option checked: the system clock when left out, else an object with `now`,
 * `setTimeout` and `clearTimeout`. Checked where the option is taken, before anything is started:
 * a clock of `{}` or `null` was taken as is by dial() (which had already been admitted by the
 * breaker, a permit then never settled), the pool, the budget and the HTTP/2 client, and failed
 * later with "clock.now is not a function".
 *
 * @param timers - whether the taker arms timers (`setTimeout`, `clearTimeout` required); a breaker
 *   and a budget only read the time.
 * @throws TypeError naming the option (`clock`, `clock.now`...) and the value.
 * @internal
 */
export function checkedClock(value: unknown, timers = true): Clock {
  if (value === undefined) return systemClock;
  if (typeof value !== 'object' || value === null) throw new TypeError(`clock must be a Clock, got ${show(value)}`);
  const clock = value as Partial<Clock>;
  checkFunction('clock.now', clock.now);
  if (timers) {
    checkFunction('clock.setTimeout', clock.setTimeout);
    checkFunction('clock.clearTimeout', clock.clearTimeout);
  }
  return value as Clock;
}

/**
 * Lets a timer stop keeping the process alive, when the clock's handles support it (Node timers
 * do; a manual clock's do not need to).
 */
export function unrefTimer(handle: TimerHandle): TimerHandle {
  (handle as { unref?: () => void }).unref?.();
  return handle;
}

/**
 * Resolves after `ms` on `clock`, or rejects with `signal.reason` as soon as `signal` aborts.
 * The timer is cleared on abort, so an abandoned sleep leaves nothing behind. A wait longer than a
 * timer can hold (2^31-1 ms; Node fires a longer one at once) is waited out in steps.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    let timer: TimerHandle;
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      reject(signal!.reason);
    };
    const wait = (left: number): void => {
      timer = clock.setTimeout(() => {
        if (left > MAX_DURATION) {
          wait(left - MAX_DURATION);
          return;
        }
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, Math.min(left, MAX_DURATION));
    };
    wait(ms > 0 ? ms : 0); // NaN and negative waits are no wait
    if (signal !== undefined) onCallerAbort(signal, onAbort);
  });
}
