/**
 * A {@link Clock} that moves only when told to, for tests of state machines that must never sleep.
 *
 * @module
 */
import type { Clock, TimerHandle } from '../core/clock.js';

interface Pending {
  id: number;
  due: number;
  callback: () => void;
}

/**
 * A clock whose time advances only through {@link ManualClock.advance} / {@link ManualClock.tick}.
 * Timers fire in due order (ties in the order they were set), each with `now()` equal to its due time.
 */
export class ManualClock implements Clock {
  #now: number;
  #nextId = 1;
  #timers: Pending[] = [];

  /** @param start - the initial `now()`, ms. Default 0. */
  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer: Pending = { id: this.#nextId++, due: this.#now + Math.max(0, ms), callback };
    this.#timers.push(timer);
    return timer as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle): void {
    const i = this.#timers.indexOf(handle as unknown as Pending);
    if (i >= 0) this.#timers.splice(i, 1);
  }

  /** Timers not yet fired or cleared. */
  get pending(): number {
    return this.#timers.length;
  }

  /**
   * Moves time forward by `ms`, firing due timers synchronously in order. Promise callbacks a timer
   * schedules do not run until the caller yields; use {@link tick} when they matter.
   */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (let timer = this.#nextDue(end); timer !== undefined; timer = this.#nextDue(end)) {
      this.#now = Math.max(this.#now, timer.due);
      timer.callback();
    }
    this.#now = end;
  }

  /**
   * Like {@link advance}, but lets pending promise callbacks run before and after each timer, so
   * async code driven by the timers (a retry loop's sleeps) moves along with the clock.
   */
  async tick(ms: number): Promise<void> {
    const end = this.#now + ms;
    await flushMicrotasks();
    for (let timer = this.#nextDue(end); timer !== undefined; timer = this.#nextDue(end)) {
      this.#now = Math.max(this.#now, timer.due);
      timer.callback();
      await flushMicrotasks();
    }
    this.#now = end;
    await flushMicrotasks();
  }

  /** Removes and returns the earliest timer due by `end`, if any. */
  #nextDue(end: number): Pending | undefined {
    let best: Pending | undefined;
    for (const t of this.#timers) {
      if (t.due <= end && (best === undefined || t.due < best.due || (t.due === best.due && t.id < best.id))) best = t;
    }
    if (best !== undefined) this.#timers.splice(this.#timers.indexOf(best), 1);
    return best;
  }
}

/** Lets every queued promise callback run (a macrotask turn drains the microtask queue). */
export function flushMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
