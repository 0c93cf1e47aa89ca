import { describe, expect, it } from 'vitest';
import { RetryBudget, type RetryBudgetOptions, sharedRetryBudget } from '../../src/retry/budget.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const S = 1_000;

function make(options: RetryBudgetOptions = {}, start = 0): { clock: ManualClock; budget: RetryBudget } {
  const clock = new ManualClock(start);
  return { clock, budget: new RetryBudget({ clock, ...options }) };
}

function deposit(budget: RetryBudget, n: number): void {
  for (let i = 0; i < n; i++) budget.deposit();
}

function withdrawAll(budget: RetryBudget, limit = 100_000): number {
  let n = 0;
  while (n < limit && budget.tryWithdraw()) n++;
  return n;
}

describe('RetryBudget: defaults (Finagle: 20 % of calls, at least 10/s, over 10 s)', () => {
  it('a quiet process still gets the floor: 10/s over the 10 s window', () => {
    const { budget } = make();
    expect(budget.available).toBe(100);
    expect(withdrawAll(budget)).toBe(100);
    expect(budget.tryWithdraw()).toBe(false);
  });

  it('a busy process gets 20 % of its calls, and no more: the floor is not added on top', () => {
    const { budget } = make();
    deposit(budget, 5_000);
    expect(withdrawAll(budget)).toBe(1_000);
    expect(budget.stats()).toMatchObject({ calls: 5_000, retries: 1_000, available: 0, deposited: 5_000, withdrawn: 1_000, refused: 1 });
  });

  it('each further call pays for a fifth of a retry', () => {
    const { budget } = make({ minRetriesPerSec: 0 });
    let granted = 0;
    for (let i = 0; i < 1_000; i++) {
      budget.deposit();
      if (budget.tryWithdraw()) granted++;
    }
    expect(granted).toBe(200);
  });
});

describe('RetryBudget: the window', () => {
  it('deposits and withdrawals expire after the ttl', () => {
    const { clock, budget } = make({ minRetriesPerSec: 0, percentCanRetry: 0.5, ttl: 10 * S, slots: 10 });
    deposit(budget, 10);
    expect(withdrawAll(budget)).toBe(5);
    clock.advance(9 * S);
    expect(budget.tryWithdraw()).toBe(false); // still inside the window
    deposit(budget, 4); // at 9 s
    expect(withdrawAll(budget)).toBe(2);
    clock.advance(1 * S); // the first 10 calls and 5 retries expire
    expect(budget.stats()).toMatchObject({ calls: 4, retries: 2, available: 0 });
    clock.advance(9 * S);
    expect(budget.stats()).toMatchObject({ calls: 0, retries: 0 });
    deposit(budget, 2);
    expect(withdrawAll(budget)).toBe(1);
  });

  // A budget that walked the slots step by step across a jump would never finish 1e15 ms (or
  // 1 000 jumps of 1e9): this test's own timeout is the bound, not a speed assertion.
  it('a huge jump in time costs no more than one pass over the slots', { timeout: 10_000 }, () => {
    const { clock, budget } = make({ slots: 1_000 });
    deposit(budget, 10);
    clock.advance(1e15);
    for (let i = 0; i < 1_000; i++) {
      clock.advance(1e9);
      budget.deposit();
    }
    expect(budget.stats().calls).toBe(1);
  });

  it('works on a clock that starts below zero', () => {
    const { clock, budget } = make({ minRetriesPerSec: 0, percentCanRetry: 1 }, -123_456);
    deposit(budget, 3);
    expect(withdrawAll(budget)).toBe(3);
    clock.advance(10 * S);
    expect(budget.stats()).toMatchObject({ calls: 0, retries: 0 });
  });

  it('percentCanRetry 0 and no floor: no retries at all', () => {
    const { budget } = make({ percentCanRetry: 0, minRetriesPerSec: 0 });
    deposit(budget, 1_000);
    expect(budget.tryWithdraw()).toBe(false);
  });
});

describe('RetryBudget: refund', () => {
  it('gives back the newest withdrawal still in the window, and nothing once it expired', () => {
    const { clock, budget } = make({ minRetriesPerSec: 0, percentCanRetry: 0.5, ttl: 10 * S, slots: 10 });
    deposit(budget, 4);
    expect(withdrawAll(budget)).toBe(2);
    clock.advance(3 * S);
    budget.refund(); // from the slot at 0 s: the newest that holds one
    expect(budget.stats()).toMatchObject({ retries: 1, available: 1, withdrawn: 2, refunded: 1 });
    clock.advance(7 * S); // the slot at 0 s expires: nothing is left to give back
    budget.refund();
    budget.refund();
    expect(budget.stats()).toMatchObject({ calls: 0, retries: 0, refunded: 1 });
  });

  it('takes from the newest slot first, so the older slot expires with what it holds', () => {
    const { clock, budget } = make({ minRetriesPerSec: 0, percentCanRetry: 1, ttl: 10 * S, slots: 10 });
    deposit(budget, 4);
    expect(budget.tryWithdraw()).toBe(true); // slot at 0 s
    clock.advance(5 * S);
    expect(budget.tryWithdraw()).toBe(true); // slot at 5 s
    budget.refund(); // the one at 5 s
    clock.advance(5 * S); // the slot at 0 s expires with its withdrawal
    expect(budget.stats()).toMatchObject({ calls: 0, retries: 0, refunded: 1 });
  });
});

describe('RetryBudget: options', () => {
  it.each([null, 'x', 42])('options that are not an object (%o): a TypeError (was: taken with every default)', (options) => {
    expect(() => new RetryBudget(options as never)).toThrow(/options must be an object/);
  });

  it.each<[RetryBudgetOptions, RegExp]>([
    [{ ttl: 0 }, /ttl must be >= 1, got 0/],
    [{ ttl: Number.POSITIVE_INFINITY }, /ttl must be finite/],
    [{ percentCanRetry: -0.1 }, /percentCanRetry must be between 0 and 1000, got -0.1/],
    [{ percentCanRetry: Number.NaN }, /percentCanRetry.*NaN/],
    [{ minRetriesPerSec: -1 }, /minRetriesPerSec/],
    [{ slots: 0 }, /slots must be between 1 and 1000, got 0/],
    [{ slots: 2.5 }, /slots must be an integer/],
    [{ ttl: '10s' as unknown as number }, /ttl must be a number, got "10s"/],
  ])('rejects %o', (options, message) => {
    expect(() => new RetryBudget(options)).toThrow(message);
  });

  it('one shared budget per process', () => {
    expect(sharedRetryBudget()).toBe(sharedRetryBudget());
    expect(sharedRetryBudget()).toBeInstanceOf(RetryBudget);
  });
});

describe('RetryBudget: a deposit reads the clock once a slot, not once a call', () => {
  // The healthy path deposits on every call; the clock read was the largest single cost of the
  // retrying layer's synchronous work on undici. A timer at the slot's end says when to read again.
  class CountingClock extends ManualClock {
    reads = 0;
    override now(): number {
      this.reads++;
      return super.now();
    }
  }

  it('reads once while the slot lasts, again once it ended, and files each deposit in its own slot', () => {
    const clock = new CountingClock(0);
    const budget = new RetryBudget({ clock, ttl: 10 * S, slots: 10, minRetriesPerSec: 0, percentCanRetry: 1 });
    const base = clock.reads; // the constructor's
    const perThousand = 1 + Math.floor(999 / 64); // the first deposit's, then every 64th's (see the next describe)
    deposit(budget, 1_000);
    expect(clock.reads - base).toBe(perThousand);
    clock.advance(999);
    deposit(budget, 1); // still slot 0: no read
    expect(clock.reads - base).toBe(perThousand);
    clock.advance(1); // slot 1 begins: the timer marks it
    deposit(budget, 1_000);
    expect(clock.reads - base).toBe(2 * perThousand);
    clock.advance(9 * S); // slot 0's 1 001 expire at 10 s, slot 1's stay
    expect(budget.stats()).toMatchObject({ calls: 1_000 });
    clock.advance(1 * S);
    expect(budget.stats()).toMatchObject({ calls: 0 });
  });

  it('a budget made mid-slot reads again at that slot’s end, not a whole slot later', () => {
    const clock = new CountingClock(500);
    const budget = new RetryBudget({ clock, ttl: 10 * S, slots: 10, minRetriesPerSec: 0, percentCanRetry: 1 });
    deposit(budget, 10); // slot 0, at 500 ms
    clock.advance(500); // slot 1 begins at 1 000 ms
    deposit(budget, 10);
    clock.advance(9 * S); // 10 000 ms: slot 0 expired, slot 1 not
    expect(budget.stats()).toMatchObject({ calls: 10 });
  });

  it('a clock with no timers is read on every deposit, and the window is the same', () => {
    const manual = new ManualClock(0);
    let reads = 0;
    const clock = {
      now: () => {
        reads++;
        return manual.now();
      },
    };
    const budget = new RetryBudget({ clock: clock as never, minRetriesPerSec: 0, percentCanRetry: 1 });
    reads = 0;
    deposit(budget, 10);
    expect(reads).toBe(10);
    manual.advance(10 * S);
    expect(budget.stats()).toMatchObject({ calls: 0 });
  });

  it('on the system clock its timer does not hold the process open', () => {
    const budget = new RetryBudget();
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    budget.deposit();
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(before);
    expect(budget.stats().calls).toBe(1);
  });

  it('a long slot is re-read within a second, so a dropped budget is not held for hours', () => {
    const clock = new CountingClock(0);
    const budget = new RetryBudget({ clock, ttl: 36_000 * S, slots: 10 }); // slots of an hour
    const base = clock.reads;
    deposit(budget, 3);
    clock.advance(1_000);
    deposit(budget, 3);
    expect(clock.reads - base).toBe(2);
    expect(clock.pending).toBe(1); // the next second's timer, not the hour's
  });
});

describe('RetryBudget: a slot timer that never fires', () => {
  // Fake timers installed and then removed take the budget's timer with them: the budget must
  // still follow time, from its own reads.
  it('every 64th deposit and every withdrawal read the clock, and a newer slot is seen', () => {
    const manual = new ManualClock(0);
    let armed = 0;
    let reads = 0;
    const clock = {
      now: () => {
        reads++;
        return manual.now();
      },
      setTimeout: () => {
        armed++;
        return {} as never; // never fires
      },
      clearTimeout: () => {},
    };
    const budget = new RetryBudget({ clock, ttl: 10 * S, slots: 10, minRetriesPerSec: 0, percentCanRetry: 1 });
    reads = 0;
    deposit(budget, 128);
    expect(reads).toBe(2); // the first, and the 64th after it
    expect(armed).toBe(1);
    manual.advance(5 * S);
    deposit(budget, 64); // the 64th of these reads the clock: slot 5, a timer armed again
    expect(armed).toBe(2);
    manual.advance(5 * S); // slot 0's 128 expire; slot 5's 64 stay
    expect(budget.stats()).toMatchObject({ calls: 64 });
    manual.advance(5 * S);
    expect(budget.stats()).toMatchObject({ calls: 0 });
  });
});
