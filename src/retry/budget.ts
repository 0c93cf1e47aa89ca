/**
 * A retry budget shared by many calls, so a fleet cannot multiply an outage. Every call deposits;
 * every retry must withdraw, and is refused when the calls of the last `ttl` have paid for all
 * the retries they may.
 *
 * Design (Finagle's `RetryBudget`, its defaults): within any window of `ttl` (10 s), retries may
 * be `percentCanRetry` (20 %) of calls, and at least `minRetriesPerSec` (10/s) whatever the call
 * rate. One difference: the floor is a floor, `max(20 % of calls, 10/s)`, not added on top of the
 * ratio as Finagle's reserve is. A busy process then never retries more than 20 % of its calls,
 * so an outage costs it at most 1.2x its load, and the floor only matters to a process making
 * fewer than 50 calls a second, which could otherwise never retry at all.
 *
 * (gRPC's `retryThrottling` is the other common design: a token count that failures drain and
 * successes refill by `tokenRatio`, with retries stopped below half. It reacts to failure rate
 * per channel rather than capping retries per call; a ratio of calls is easier to state, to test
 * and to reason about for a fleet, which is why this one was chosen.)
 *
 * The window is a ring of `slots` counters; time only comes from the injected clock. A deposit,
 * made once per call however it went, does not read the clock while the slot it last saw is
 * still the current one: a timer (unref'd, one a slot at most, only while calls come) marks the
 * slot's end. On a healthy call that read was the retrying layer's largest single cost (~21 % of
 * its synchronous work on undici, measured). A timer that fires late (a busy event loop) files
 * that lateness's deposits in the slot before: they expire early by as much, so the budget errs
 * small, never large. A timer that never fires (a test's fake timers, uninstalled) cannot stall
 * it: every 64th deposit, and every withdrawal, reads the clock anyway, and a read that finds a
 * newer slot arms a timer again. A clock without timers is read on every deposit.
 *
 * @module
 */
import { type Clock, checkedClock, systemClock, unrefTimer } from '../core/clock.js';
import { checkDuration, checkFunction, checkInteger, checkNumber, opt, show } from '../core/validate.js';
import { checkOptionNames, optionNames } from '../core/option-names.js';

/** The option names a RetryBudget takes: any other is warned about (see checkOptionNames). */
const BUDGET_OPTIONS = optionNames<RetryBudgetOptions>({ ttl: true, percentCanRetry: true, minRetriesPerSec: true, slots: true, clock: true });

/** Options of a {@link RetryBudget}; every one has a default. */
export interface RetryBudgetOptions {
  /**
   * How long a call's deposit (and a retry's withdrawal) counts, ms. Default 10 000 (Finagle's
   * TTL): long enough to smooth a burst of failures, short enough that the budget follows a
   * change in load within seconds.
   */
  ttl?: number;
  /**
   * Retries allowed per call in the window. Default 0.2 (Finagle): an outage adds at most 20 %
   * to the load a process sends. `0` leaves only the floor.
   */
  percentCanRetry?: number;
  /**
   * Retries per second always allowed, however few the calls. Default 10 (Finagle): a quiet
   * process can still retry its few calls. `0` removes the floor.
   */
  minRetriesPerSec?: number;
  /**
   * Counters the window is divided into. Default 10: with the default ttl, counts expire in
   * 1 s steps, precise enough for a 10 s window at 10 small counters' cost.
   */
  slots?: number;
  /**
   * Time source. Default {@link systemClock}. Its timers, when it has them, mark each slot's end,
   * so a deposit need not read it (see the module); only `now()` is required.
   */
  clock?: Clock;
}

/** What a {@link RetryBudget} holds and has done. */
export interface RetryBudgetStats {
  /** Calls deposited within the window. */
  calls: number;
  /** Retries withdrawn within the window. */
  retries: number;
  /** Retries that may be withdrawn now. */
  available: number;
  /** Totals since the budget was made. */
  deposited: number;
  withdrawn: number;
  /** Withdrawals refused since the budget was made. */
  refused: number;
  /** Withdrawals given back since the budget was made (see {@link RetryBudget.refund}). */
  refunded: number;
}

/** A retry budget: `deposit()` once per call, `tryWithdraw()` before each retry. */
export class RetryBudget {
  readonly #ttl: number;
  readonly #percent: number;
  readonly #floor: number;
  readonly #slotWidth: number;
  readonly #clock: Clock;
  readonly #calls: number[];
  readonly #retries: number[];
  /** The slot number (time / slotWidth) the ring's newest counter belongs to. */
  #head: number;
  #callSum = 0;
  #retrySum = 0;
  #deposited = 0;
  #withdrawn = 0;
  #refused = 0;
  #refunded = 0;
  /** The clock arms timers: a deposit may skip reading it while {@link #headCurrent}. */
  readonly #timed: boolean;
  /** `#head` is the current slot: set by a clock read, cleared by the timer at the slot's end. */
  #headCurrent = false;
  /** Deposits since the clock was last read (see {@link UNREAD_DEPOSITS}). */
  #unread = 0;

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: RetryBudgetOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    checkOptionNames('RetryBudget', options, BUDGET_OPTIONS);
    this.#ttl = checkDuration('ttl', opt(options.ttl, 10_000), 1);
    this.#percent = checkNumber('percentCanRetry', opt(options.percentCanRetry, 0.2), 0, 1_000);
    const perSec = checkNumber('minRetriesPerSec', opt(options.minRetriesPerSec, 10), 0, 1e9);
    const slots = checkInteger('slots', opt(options.slots, 10), 1, 1_000);
    this.#clock = checkedClock(options.clock, false);
    checkFunction('clock.now', this.#clock.now);
    this.#timed = typeof this.#clock.setTimeout === 'function';
    this.#floor = (perSec * this.#ttl) / 1_000;
    this.#slotWidth = this.#ttl / slots;
    this.#calls = new Array<number>(slots).fill(0);
    this.#retries = new Array<number>(slots).fill(0);
    this.#head = Math.floor(this.#clock.now() / this.#slotWidth);
  }

  /** Records one call (its first attempt). Call it once per logical call, never per retry. */
  deposit(): void {
    if (!this.#headCurrent || ++this.#unread >= UNREAD_DEPOSITS) this.#advance();
    this.#calls[this.#at(this.#head)]! += 1;
    this.#callSum++;
    this.#deposited++;
  }

  /** Takes leave for one retry: true if the budget allows it (and records it), false if not. */
  tryWithdraw(): boolean {
    this.#advance();
    if (this.#retrySum + 1 > this.#allowed()) {
      this.#refused++;
      return false;
    }
    this.#retries[this.#at(this.#head)]! += 1;
    this.#retrySum++;
    this.#withdrawn++;
    return true;
  }

  /**
   * Gives back one withdrawal whose retry never started: its call ended while it waited (the
   * caller aborted during the backoff, the deadline or a shutdown came, its `onRetry` threw).
   * A retry that sent nothing does not count against the fleet's; without it, a shutdown that
   * met many calls in their backoff left the budget spent for the next 10 s (an outside review).
   * The newest withdrawal still in the window is the one given back; with none left (expired
   * already), nothing is.
   */
  refund(): void {
    this.#advance();
    const n = this.#retries.length;
    for (let i = 0; i < n; i++) {
      const at = this.#at(this.#head - i);
      if (this.#retries[at]! > 0) {
        this.#retries[at]! -= 1;
        this.#retrySum--;
        this.#refunded++;
        return;
      }
    }
  }

  /** Retries that may be withdrawn now. */
  get available(): number {
    this.#advance();
    return Math.max(0, Math.floor(this.#allowed() - this.#retrySum));
  }

  /** The window's counts and the totals since construction. */
  stats(): RetryBudgetStats {
    const available = this.available;
    return {
      calls: this.#callSum,
      retries: this.#retrySum,
      available,
      deposited: this.#deposited,
      withdrawn: this.#withdrawn,
      refused: this.#refused,
      refunded: this.#refunded,
    };
  }

  #allowed(): number {
    return Math.max(this.#percent * this.#callSum, this.#floor);
  }

  /** The ring index of slot number `slot` (non-negative even for a clock that starts below 0). */
  #at(slot: number): number {
    const n = this.#calls.length;
    return ((slot % n) + n) % n;
  }

  /** Expires the slots that fell out of the window since the last call (at most all of them). */
  #advance(): void {
    const now = this.#clock.now();
    const slot = Math.floor(now / this.#slotWidth);
    this.#unread = 0;
    // A read that finds a newer slot while the last one was thought current: its timer is late
    // or lost; another is armed.
    if (this.#timed && (!this.#headCurrent || slot > this.#head)) {
      this.#headCurrent = true;
      // At most 1 s: a budget dropped by its owner is not held for a long slot (a ttl of hours).
      const left = Math.min((slot + 1) * this.#slotWidth - now, 1_000);
      unrefTimer(
        this.#clock.setTimeout(() => {
          this.#headCurrent = false;
        }, left),
      );
    }
    if (slot <= this.#head) return;
    const n = this.#calls.length;
    const steps = Math.min(slot - this.#head, n);
    for (let i = 1; i <= steps; i++) {
      const at = this.#at(this.#head + i);
      this.#callSum -= this.#calls[at]!;
      this.#retrySum -= this.#retries[at]!;
      this.#calls[at] = 0;
      this.#retries[at] = 0;
    }
    this.#head = slot;
  }
}

/**
 * Deposits made without reading the clock, at most, before one reads it anyway: bounds what a
 * late or lost slot timer can misfile, for ~1/64 of a clock read a call.
 */
const UNREAD_DEPOSITS = 64;

let shared: RetryBudget | undefined;

/**
 * The budget `retry()` uses when given none: one per process, default options, so every call in
 * the process shares one 20 % allowance.
 */
export function sharedRetryBudget(): RetryBudget {
  shared ??= new RetryBudget();
  return shared;
}
