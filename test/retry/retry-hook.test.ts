/**
 * retry()'s per-call onRetry hook: what it is told, and that a hook which throws is never
 * swallowed (issue 16, part 3).
 */
import { describe, expect, it } from 'vitest';
import { constant, fullJitter } from '../../src/core/backoff.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { type RetryInfo, type RetryOptions, onRetryEvent, retry, settledHeard } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { after, refusedConnect, resetMidRequest, seeded, track } from './helpers.js';

function run<T>(clock: ManualClock, fn: Parameters<typeof retry<T>>[0], options: RetryOptions) {
  return track(retry(fn, { clock, budget: null, ...options }), clock);
}

describe('retry: onRetry hook', () => {
  it('a call failing twice then succeeding tells the hook each attempt, error, classification, chosen delay and time left', async () => {
    const clock = new ManualClock(0);
    const errors = [refusedConnect(), resetMidRequest()];
    const infos: RetryInfo[] = [];
    let delays: number[] = [];
    const schedule = fullJitter({ base: 100, max: 1_000 });
    const call = run(
      clock,
      (a) => (a.number <= 2 ? after(clock, 50, { error: errors[a.number - 1] }) : 'ok'),
      {
        timeout: 10_000,
        idempotent: true,
        random: seeded(7),
        backoff: (n, prev, random) => {
          const d = schedule(n, prev, random);
          delays = [...delays, d];
          return d;
        },
        onRetry: (info) => void infos.push(info),
      },
    );
    await clock.tick(50);
    expect(infos).toHaveLength(1);
    await clock.tick(infos[0]!.delay + 50);
    expect(infos).toHaveLength(2);
    await clock.tick(infos[1]!.delay);
    expect(call.state).toBe('resolved');
    expect(infos.map((i) => i.attempt)).toEqual([1, 2]);
    expect(infos.map((i) => i.error)).toEqual(errors);
    expect(infos.map((i) => i.classification.kind)).toEqual(['dial', 'connection']);
    expect(infos[0]!.classification.notSent).toBe(true);
    expect(infos[1]!.classification.notSent).toBe(false);
    expect(infos.map((i) => i.delay)).toEqual(delays);
    expect(infos[0]!.remaining).toBe(10_000 - 50);
    // Whole ms, rounded down (the jittered delay is fractional): AbortSignal.timeout takes it as it is.
    expect(infos[1]!.remaining).toBe(Math.floor(10_000 - 50 - infos[0]!.delay - 50));
    expect(Number.isInteger(infos[1]!.remaining)).toBe(true);
  });

  it('a hook that throws ends the call with its error: no further attempt, no wait, no retry announced', async () => {
    const clock = new ManualClock(0);
    const scheduled: unknown[] = [];
    const off = onRetryEvent('scheduled', (e) => scheduled.push(e));
    const mine = new Error('stop here');
    let attempts = 0;
    const results: unknown[] = [];
    const call = run(clock, () => (attempts++, Promise.reject(refusedConnect())), {
      backoff: constant(1_000),
      maxAttempts: 5,
      onRetry: () => {
        throw mine;
      },
      onResult: (r) => results.push(r.error),
    });
    await clock.tick(0);
    expect(call.state).toBe('rejected');
    expect(call.error).toBe(mine);
    expect(attempts).toBe(1);
    expect(results).toEqual([mine]);
    expect(clock.pending).toBe(0);
    off();
    expect(scheduled).toEqual([]);
  });

  it('a hook whose promise rejects ends the call with that error; one that resolves lets the retry go on', async () => {
    const clock = new ManualClock(0);
    const mine = new Error('async no');
    let attempts = 0;
    let seen = 0;
    const call = run(clock, () => (attempts++, Promise.reject(refusedConnect())), {
      backoff: constant(10),
      maxAttempts: 5,
      onRetry: async () => {
        seen++;
        if (seen === 2) throw mine;
      },
    });
    await clock.tick(10);
    await clock.tick(10);
    expect(call.state).toBe('rejected');
    expect(call.error).toBe(mine);
    expect(attempts).toBe(2);
  });

  it('the hook is not called for a failure that is not retried (maybe-sent, non-idempotent), nor when the budget refuses', async () => {
    const clock = new ManualClock(0);
    let hooked = 0;
    const first = run(clock, () => Promise.reject(resetMidRequest()), { onRetry: () => void hooked++ });
    const budget = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 0, clock });
    const second = run(clock, () => Promise.reject(refusedConnect()), { budget, backoff: constant(1), onRetry: () => void hooked++ });
    await clock.tick(0);
    expect(first.state).toBe('rejected');
    expect(second.state).toBe('rejected');
    expect(hooked).toBe(0);
  });

  it('the caller aborting while an async hook runs rejects with its reason and starts no attempt', async () => {
    const clock = new ManualClock(0);
    const ac = new AbortController();
    let attempts = 0;
    const call = run(clock, () => (attempts++, Promise.reject(refusedConnect())), {
      signal: ac.signal,
      backoff: constant(0),
      onRetry: () => new Promise<void>(() => {}),
    });
    await clock.tick(0);
    ac.abort(new Error('gone'));
    await clock.tick(0);
    expect(call.state).toBe('rejected');
    expect((call.error as Error).message).toBe('gone');
    expect(attempts).toBe(1);
  });

  it('a hook that is not a function is refused as an option error', async () => {
    await expect(retry(() => 1, { onRetry: 5 as never })).rejects.toThrow(/onRetry/);
  });
});

describe('retry: settledHeard', () => {
  it("is true while the call's onResult or a `settled` listener would hear its end, false otherwise", () => {
    expect(settledHeard(undefined)).toBe(false);
    expect(settledHeard(() => {})).toBe(true);
    const off = onRetryEvent('settled', () => {});
    expect(settledHeard(undefined)).toBe(true);
    off();
    expect(settledHeard(undefined)).toBe(false);
    const otherOff = onRetryEvent('scheduled', () => {}); // another event's listener hears no end
    expect(settledHeard(undefined)).toBe(false);
    otherOff();
  });
});
