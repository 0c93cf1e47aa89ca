/**
 * What a layer that runs the first attempt itself needs from retry(): a cancel hook instead of
 * an AbortSignal, a start in the past (the deadline and elapsed count from the call's real
 * start), a signal made only when read, and a way to report a call that never entered retry().
 */
import { afterEach, describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { DeadlineExceededError } from '../../src/core/errors.js';
import { type RetryEvents, type RetryResult, onRetryEvent, reportSettled, retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { after, hang, refusedConnect, track } from './helpers.js';

const offs: Array<() => void> = [];
afterEach(() => {
  for (const off of offs.splice(0)) off();
});

describe('retry: cancel hook', () => {
  it('cancelling during the wait ends the call at once with the reason, and clears every timer', async () => {
    const clock = new ManualClock(0);
    let cancel: ((reason: unknown) => void) | undefined;
    let calls = 0;
    const call = track(
      retry(
        () => {
          calls++;
          return after(clock, 10, { error: refusedConnect() });
        },
        { clock, budget: null, backoff: constant(5_000), timeout: 60_000, cancel: (c) => (cancel = c) },
      ),
      clock,
    );
    await clock.tick(1_000);
    cancel!('user left');
    await clock.tick(0);
    expect(call.error).toBe('user left');
    expect(call.at).toBe(1_000);
    expect(calls).toBe(1);
    expect(clock.pending).toBe(0);
  });

  it('cancelling during an attempt rejects at once; the attempt signal, read late, is already aborted', async () => {
    const clock = new ManualClock(0);
    let cancel: ((reason: unknown) => void) | undefined;
    let attempt: { signal: AbortSignal } | undefined;
    const call = track(
      retry(
        (a) => {
          attempt = a;
          return hang();
        },
        { clock, budget: null, cancel: (c) => (cancel = c) },
      ),
      clock,
    );
    await clock.tick(100);
    cancel!('stop');
    await clock.tick(0);
    expect(call.error).toBe('stop');
    expect(attempt!.signal.aborted).toBe(true);
    expect(attempt!.signal.reason).toBe('stop');
  });

  it('a cancel hook that cancels at once: fn never runs', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const call = track(retry(() => ++calls, { clock, budget: null, cancel: (c) => c('before it began') }), clock);
    await clock.tick(0);
    expect(call.error).toBe('before it began');
    expect(calls).toBe(0);
  });

  it('is checked like every option', async () => {
    await expect(retry(() => 1, { cancel: 5 as never })).rejects.toThrow('cancel must be a function, got 5');
  });
});

describe('retry: a start in the past', () => {
  it('the timeout, the deadline error and elapsed count from the call start, not from retry()', async () => {
    const clock = new ManualClock(0);
    await clock.tick(700); // the caller's own first attempt took 700 ms
    const results: RetryResult[] = [];
    const call = track(
      retry(() => after(clock, 100, { error: refusedConnect() }), {
        clock,
        budget: null,
        start: 0,
        timeout: 1_000,
        backoff: constant(0),
        maxAttempts: 10,
        onResult: (r) => results.push(r),
      }),
      clock,
    );
    await clock.tick(2_000);
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
    expect(call.error).toMatchObject({ timeout: 1_000 });
    expect(call.at).toBe(1_000);
    expect(results[0]?.elapsed).toBe(1_000);
  });
});

describe('reportSettled', () => {
  it('publishes a call that never entered retry() as the settled event', () => {
    const seen: Array<RetryEvents['settled']> = [];
    offs.push(onRetryEvent('settled', (e) => seen.push(e)));
    reportSettled({ ok: true, attempts: 1, elapsed: 12 });
    expect(seen).toEqual([{ ok: true, attempts: 1, elapsed: 12, kind: undefined }]);
  });
});
