/**
 * A {@link Clock} that moves only when told to, for tests of state machines that must never sleep.
 *
 * @module
 */
import type { Clock, TimerHandle } from '../core/clock.js';
import { MAX_DURATION, show } from '../core/validate.js';

/** `ms` for advance()/tick(): time only moves forward, by a finite amount. */
function step(ms: unknown): number {
  if (typeof ms !== 'number') throw new TypeError(`ms must be a number, got ${show(ms)}`);
  if (!(ms >= 0) || ms === Infinity) throw new RangeError(`ms must be a finite number >= 0 (time only moves forward), got ${show(ms)}`);
  return ms;
}

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
  /** advance() or tick() is firing timers: a 0 ms timer set now waits 1 ms (see setTimeout). */
  #firing = 0;

  /**
   * @param start - the initial `now()`, ms. Default 0.
   * @throws TypeError for a start that is not a number; RangeError for NaN or an infinite one
   *   (every later `now()` would be NaN, and no timer would ever fire).
   */
  constructor(start = 0) {
    if (typeof start !== 'number') throw new TypeError(`start must be a number, got ${show(start)}`);
    if (!Number.isFinite(start)) throw new RangeError(`start must be a finite number, got ${show(start)}`);
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  /**
   * Due `ms` from now. As with Node's timers, a delay no timer can hold (past 2^31-1 ms) fires
   * after 1 ms, so a test on this clock meets the bug that code would have on the real one; a
   * 0, NaN or negative delay fires at once (Node: after 1 ms), never not at all, except when set
   * from a timer's callback while it runs: then after 1 ms, as Node's. A timer that rescheduled
   * itself at 0 ms (a poll loop) came due again at once and spun inside one advance() for good
   * (an outside review); now advance(100) fires it 101 times, at 0 to 100. A 0 ms timer set from
   * a promise callback that {@link tick} lets run between timers still fires at once (a retry
   * with no backoff goes at the same instant).
   */
  setTimeout(callback: () => void, ms: number): TimerHandle {
    // A number as Node takes it: a string delay ('100', from plain JavaScript) was added to the
    // time as text, and the timer came due at 5100 for 100 at 5 (an outside review).
    const n = Number(ms);
    const delay = n > MAX_DURATION ? 1 : n > 0 ? n : this.#firing > 0 ? 1 : 0;
    const timer: Pending = { id: this.#nextId++, due: this.#now + delay, callback };
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
   *
   * @throws RangeError for a negative, NaN or infinite `ms` (time would run backwards or stop).
   */
  advance(ms: number): void {
    const end = this.#now + step(ms);
    this.#firing++;
    try {
      for (let timer = this.#nextDue(end); timer !== undefined; timer = this.#nextDue(end)) {
        this.#now = Math.max(this.#now, timer.due);
        timer.callback();
      }
    } finally {
      this.#firing--;
    }
    this.#now = Math.max(this.#now, end); // a timer's callback may have moved it further: never back
  }

  /**
   * Like {@link advance}, but lets pending promise callbacks run before and after each timer, so
   * async code driven by the timers (a retry loop's sleeps) moves along with the clock.
   *
   * @throws RangeError for a negative, NaN or infinite `ms` (rejects before anything runs).
   */
  async tick(ms: number): Promise<void> {
    const end = this.#now + step(ms);
    await flushMicrotasks();
    for (let timer = this.#nextDue(end); timer !== undefined; timer = this.#nextDue(end)) {
      this.#now = Math.max(this.#now, timer.due);
      this.#firing++;
      try {
        timer.callback();
      } finally {
        this.#firing--;
      }
      await flushMicrotasks();
    }
    // An advance() or tick() while this one awaited may have moved it past `end`: never back.
    this.#now = Math.max(this.#now, end);
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
