/**
 * Counting what a healthy call creates, independent of the machine's speed: timers through an
 * injected clock, AbortControllers through a counting subclass installed only while `fn` runs.
 */
import { type Clock, type TimerHandle, systemClock } from '../../src/core/clock.js';

/** The system clock, counting the timers armed and cleared through it. */
export interface CountingClock extends Clock {
  armed: number;
  cleared: number;
  /** Calls of `now()`. */
  reads: number;
}

/** A {@link CountingClock} over the real clock (I/O tests need real time). */
export function countingClock(): CountingClock {
  const clock: CountingClock = {
    armed: 0,
    cleared: 0,
    reads: 0,
    now: () => {
      clock.reads++;
      return systemClock.now();
    },
    setTimeout: (callback: () => void, ms: number): TimerHandle => {
      clock.armed++;
      return systemClock.setTimeout(callback, ms);
    },
    clearTimeout: (handle: TimerHandle): void => {
      clock.cleared++;
      systemClock.clearTimeout(handle);
    },
  };
  return clock;
}

/**
 * Runs `fn` with `globalThis.AbortController` replaced by a subclass that counts its
 * constructions, and returns that count (the original is restored however `fn` ends).
 */
export async function countAbortControllers(fn: () => Promise<void>): Promise<number> {
  const Original = globalThis.AbortController;
  let made = 0;
  globalThis.AbortController = class CountingAbortController extends Original {
    constructor() {
      super();
      made++;
    }
  };
  try {
    await fn();
  } finally {
    globalThis.AbortController = Original;
  }
  return made;
}
