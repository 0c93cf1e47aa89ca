import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { DeadlineExceededError, RetriesExhaustedError } from '../../src/core/errors.js';
import { type RetryAttempt, type RetryOptions, type RetryResult, retry } from '../../src/retry/retry.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { after, hang, refusedConnect, track } from './helpers.js';

// The edges of the retry loop: where each bound falls exactly, what a call leaves on the signals
// it was given, which interruption wins, and how a call is reported. Clocks start far from zero
// so that a time measured from the wrong origin shows.

const T0 = 50_000;

function run<T>(clock: ManualClock, fn: (attempt: RetryAttempt) => Promise<T> | T, options: RetryOptions = {}): ReturnType<typeof track<T>> {
  return track(retry(fn, { clock, budget: null, backoff: constant(0), ...options }), clock);
}

/** An attempt refused every time, recording when (since T0) each one started. */
function refusedEachTime(clock: ManualClock): { starts: number[]; fail: () => Promise<never> } {
  const starts: number[] = [];
  return {
    starts,
    fail: () => {
      starts.push(clock.now() - T0);
      return Promise.reject(refusedConnect());
    },
  };
}

describe('retry: where the bounds fall', () => {
  it('a retry may start exactly at the end of the retry window, not after it', async () => {
    const clock = new ManualClock(T0);
    const { starts, fail } = refusedEachTime(clock);
    const call = run(clock, fail, { retryWindow: 1_000, backoff: constant(500), maxAttempts: 10 });
    await clock.tick(5_000);
    expect(starts).toEqual([0, 500, 1_000]); // the third starts at the window's end exactly
    expect(call.error).toBeInstanceOf(RetriesExhaustedError);
    expect((call.error as RetriesExhaustedError).errors).toHaveLength(3);
    expect((call.error as Error).message).toContain('retry window of 1000 ms passed');
    expect(call.at).toBe(T0 + 1_000); // it ended when the fourth would have been too late, without waiting
  });

  it('a wait that would end at the deadline fails now, with every attempt error as the cause', async () => {
    const clock = new ManualClock(T0);
    const { starts, fail } = refusedEachTime(clock);
    const call = run(clock, fail, { timeout: 1_000, backoff: constant(500), maxAttempts: 10 });
    await clock.tick(5_000);
    expect(starts).toEqual([0, 500]);
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
    expect(call.at).toBe(T0 + 500);
    const cause = (call.error as Error).cause as RetriesExhaustedError;
    expect(cause).toBeInstanceOf(RetriesExhaustedError);
    expect(cause.errors).toHaveLength(2);
    expect(clock.pending).toBe(0);
  });

  it('an attempt that fails past the deadline, its timer not yet run: the deadline passed (no negative `left`; was -200 ms left, an outside review)', async () => {
    const inner = new ManualClock(T0);
    let late = 0; // time the attempt takes without any timer firing: the loop is told before the deadline timer
    const clock = { now: () => inner.now() + late, setTimeout: inner.setTimeout.bind(inner), clearTimeout: inner.clearTimeout.bind(inner) };
    const call = track(
      retry(
        () => {
          late = 1_200;
          return Promise.reject(refusedConnect());
        },
        { clock, budget: null, backoff: constant(500), timeout: 1_000, maxAttempts: 10 },
      ),
      inner,
    );
    await flushMicrotasks();
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
    expect(call.error).toMatchObject({ left: undefined, attempts: 1 });
    expect((call.error as Error).message).toBe('deadline of 1000 ms exceeded after 1 attempt(s)');
    expect(((call.error as Error).cause as { code?: string }).code).toBe('ECONNREFUSED');
    expect(inner.pending).toBe(0);
  });

  it('maxAttempts names itself when it ends the call', async () => {
    const clock = new ManualClock(T0);
    const call = run(clock, () => Promise.reject(refusedConnect()), { maxAttempts: 3 });
    await clock.tick(100);
    expect(call.error).toBeInstanceOf(RetriesExhaustedError);
    expect((call.error as Error).message).toContain('3 attempt(s) allowed');
  });

  it('a call with no deadline arms no timer while its attempt runs', async () => {
    const clock = new ManualClock(T0);
    const controller = new AbortController();
    const call = run(clock, (a) => hang(a.signal), { signal: controller.signal });
    await flushMicrotasks();
    expect(clock.pending).toBe(0);
    controller.abort(new Error('done'));
    await flushMicrotasks();
    expect(call.state).toBe('rejected');
  });
});

describe('retry: the signals it is given', () => {
  it('leaves no listener on a long-lived signal or shutdown, whatever the outcome', async () => {
    const clock = new ManualClock(T0);
    const signal = new AbortController().signal;
    const shutdown = new AbortController().signal;
    const ok = run(clock, () => 'ok', { signal, shutdown });
    const failed = run(clock, () => Promise.reject(new Error('app')), { signal, shutdown });
    const slow = run(clock, () => after(clock, 10_000, { value: 'late' }), { signal, shutdown, timeout: 1_000 });
    await flushMicrotasks();
    expect(getEventListeners(shutdown, 'abort')).toHaveLength(1); // the slow call still watches it
    await clock.tick(1_000);
    expect([ok.state, failed.state, slow.state]).toEqual(['resolved', 'rejected', 'rejected']);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    expect(getEventListeners(shutdown, 'abort')).toHaveLength(0);
  });

  it('a shutdown already under way: the attempt never runs', async () => {
    const clock = new ManualClock(T0);
    const owner = new AbortController();
    const reason = new Error('shutting down');
    owner.abort(reason);
    let calls = 0;
    const call = run(
      clock,
      () => {
        calls++;
        return 'ran';
      },
      { shutdown: owner.signal },
    );
    await flushMicrotasks();
    expect(call.error).toBe(reason);
    expect(calls).toBe(0);
  });

  it('the first interruption wins: a shutdown right after the caller aborted does not replace its reason', async () => {
    const clock = new ManualClock(T0);
    const caller = new AbortController();
    const owner = new AbortController();
    const call = run(clock, () => Promise.reject(refusedConnect()), {
      signal: caller.signal,
      shutdown: owner.signal,
      backoff: constant(1_000),
      maxAttempts: 5,
    });
    await flushMicrotasks(); // now waiting before the second attempt
    const mine = new Error('caller gave up');
    caller.abort(mine);
    owner.abort(new Error('shutdown'));
    await flushMicrotasks();
    expect(call.error).toBe(mine);
  });

  it("an attempt's signal is one object, and read after the call was halted it is already aborted", async () => {
    const clock = new ManualClock(T0);
    const caller = new AbortController();
    const reads: AbortSignal[] = [];
    let release!: () => void;
    const call = run(
      clock,
      async (a) => {
        await new Promise<void>((resolve) => (release = resolve)); // ignores its signal while it works
        reads.push(a.signal, a.signal);
        return 'late';
      },
      { signal: caller.signal },
    );
    await flushMicrotasks();
    const reason = new Error('caller gave up');
    caller.abort(reason);
    await flushMicrotasks();
    expect(call.error).toBe(reason); // rejected at once, the attempt still running
    release();
    await flushMicrotasks();
    expect(reads[0]).toBe(reads[1]);
    expect(reads[0]!.aborted).toBe(true);
    expect(reads[0]!.reason).toBe(reason);
  });
});

describe('retry: how a call is reported', () => {
  it('elapsed runs from the call start on the injected clock, success and failure alike', async () => {
    const clock = new ManualClock(T0);
    const results: RetryResult[] = [];
    run(clock, (a) => (a.number < 2 ? after(clock, 100, { error: refusedConnect() }) : after(clock, 100, { value: 'ok' })), {
      backoff: constant(300),
      onResult: (r) => results.push(r),
    });
    run(clock, () => after(clock, 250, { error: new Error('app') }), { onResult: (r) => results.push(r) });
    await clock.tick(1_000);
    expect(results).toContainEqual({ ok: true, attempts: 2, elapsed: 500 });
    expect(results).toContainEqual(expect.objectContaining({ ok: false, attempts: 1, elapsed: 250 }));
  });

  it('an onResult that throws becomes a process warning; the call keeps its outcome', async () => {
    const clock = new ManualClock(T0);
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      const quiet = run(clock, () => 'fine'); // no onResult: nothing to call, nothing to warn about
      const loud = run(clock, () => 'fine too', {
        onResult: () => {
          throw new Error('metrics bug');
        },
      });
      await flushMicrotasks();
      await flushMicrotasks();
      expect([quiet.value, loud.value]).toEqual(['fine', 'fine too']);
      expect(warnings).toEqual(['dialguard: retry onResult threw: Error: metrics bug']);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('retry: a retryable predicate that answers junk', () => {
  it('keeps the default decision for each attempt and warns once per predicate', async () => {
    const clock = new ManualClock(T0);
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      let appCalls = 0;
      const junk = (() => 'no') as unknown as RetryOptions['retryable']; // a string is truthy: it was read as "retry"
      const app = run(clock, () => {
        appCalls += 1;
        return Promise.reject(new Error('application error'));
      }, { retryable: junk, maxAttempts: 4 });
      const { starts, fail } = refusedEachTime(clock);
      const refusedConnects = run(clock, fail, { retryable: (() => 1) as unknown as RetryOptions['retryable'], maxAttempts: 3 });
      await clock.tick(1_000);
      await flushMicrotasks();
      expect(appCalls).toBe(1); // default: an application error is not retried
      expect((app.error as Error).message).toBe('application error');
      expect(starts).toHaveLength(3); // default: a refused connect was never sent, so it is retried
      expect(refusedConnects.error).toBeInstanceOf(RetriesExhaustedError);
      expect(warnings).toEqual([
        `dialguard: a retryable predicate's answer was ignored (not true, false or undefined): "no"`,
        `dialguard: a retryable predicate's answer was ignored (not true, false or undefined): 1`,
      ]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
