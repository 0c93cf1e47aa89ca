import { afterEach, describe, expect, it, vi } from 'vitest';
import { constant, decorrelatedJitter, fullJitter } from '../../src/core/backoff.js';
import {
  DeadlineExceededError,
  HostUnavailableError,
  NoServerAvailableError,
  RetriesExhaustedError,
  RetryBudgetExhaustedError,
} from '../../src/core/errors.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { markLeftRefusing } from '../../src/core/classify.js';
import { REPORTED_BY_CALLER } from '../../src/retry/retry-options.js';
import { type RetryAttempt, type RetryEvents, type RetryOptions, type RetryResult, onRetryEvent, retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { after, hang, refusedConnect, resetMidRequest, seeded, track } from './helpers.js';

const S = 1_000;

/** retry() on a manual clock, no budget, no jitter unless a test asks. */
function run<T>(
  clock: ManualClock,
  fn: (attempt: RetryAttempt) => Promise<T> | T,
  options: RetryOptions = {},
): ReturnType<typeof track<T>> {
  return track(retry(fn, { clock, budget: null, backoff: constant(0), ...options }), clock);
}

const offs: Array<() => void> = [];
afterEach(() => {
  for (const off of offs.splice(0)) off();
});

function record<K extends keyof RetryEvents>(event: K): Array<RetryEvents[K]> {
  const seen: Array<RetryEvents[K]> = [];
  offs.push(onRetryEvent(event, (e) => seen.push(e)));
  return seen;
}

describe('retry: the remaining deadline is passed on (seed 004)', () => {
  it('a 300 s long poll failing at 240 s is retried with 60 s, and the call never exceeds 300 s', async () => {
    const clock = new ManualClock(0);
    const seen: Array<{ n: number; remaining: number; deadline: number }> = [];
    let second: RetryAttempt | undefined;
    const call = run(
      clock,
      (a) => {
        seen.push({ n: a.number, remaining: a.remaining, deadline: a.deadline });
        if (a.number === 1) return after(clock, 240 * S, { error: resetMidRequest() });
        second = a;
        return hang(); // the retried poll waits its whole remaining time and ignores the signal
      },
      { timeout: 300 * S, idempotent: true },
    );
    await clock.tick(240 * S);
    expect(seen).toEqual([
      { n: 1, remaining: 300 * S, deadline: 300 * S },
      { n: 2, remaining: 60 * S, deadline: 300 * S },
    ]);
    await clock.tick(60 * S - 1);
    expect(call.state).toBe('pending');
    await clock.tick(1);
    expect(call.state).toBe('rejected');
    expect(call.at).toBe(300 * S);
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
    expect(call.error).toMatchObject({ timeout: 300 * S, attempts: 2 });
    expect((call.error as Error).cause).toMatchObject({ code: 'ECONNRESET' });
    expect(second?.signal.aborted).toBe(true);
    expect(second?.signal.reason).toBeInstanceOf(DeadlineExceededError);
    expect(clock.pending).toBe(0);
  });

  it('remaining shrinks by the backoff too, and reads live', async () => {
    const clock = new ManualClock(5_000);
    const remaining: number[] = [];
    const call = run(
      clock,
      async (a) => {
        remaining.push(a.remaining);
        if (a.number < 3) await after(clock, 1 * S, { error: refusedConnect() });
        return 'ok';
      },
      { timeout: 10 * S, backoff: constant(500) },
    );
    await clock.tick(10 * S);
    expect(call.value).toBe('ok');
    expect(remaining).toEqual([10 * S, 10 * S - 1_500, 10 * S - 3_000]);
  });

  it('with an absolute deadline, and with both (the earlier wins)', async () => {
    const clock = new ManualClock(1_000);
    const got: number[] = [];
    const probe = (a: RetryAttempt): string => {
      got.push(a.deadline, a.remaining);
      return 'ok';
    };
    await retry(probe, { clock, deadline: 4_000, budget: null });
    await retry(probe, { clock, deadline: 4_000, timeout: 500, budget: null });
    await retry(probe, { clock, budget: null });
    expect(got).toEqual([4_000, 3_000, 1_500, 500, Infinity, Infinity]);
  });
});

describe('retry: nothing outlives the deadline', () => {
  it('no attempt starts at or after the deadline: a wait that would end past it fails now', async () => {
    const clock = new ManualClock(0);
    const starts: number[] = [];
    const call = run(
      clock,
      (a) => {
        starts.push(clock.now());
        void a;
        return after(clock, 100, { error: refusedConnect() });
      },
      { timeout: 2_500, backoff: constant(1_000), maxAttempts: Infinity },
    );
    await clock.tick(3 * S);
    expect(starts).toEqual([0, 1_100, 2_200]);
    expect(call.at).toBe(2_300); // not 2 500: sleeping until the deadline would be useless
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
    // Says that the deadline is still ahead ("exceeded" at 0 ms of 200 read as a bug; an outside review).
    expect(call.error).toMatchObject({ left: 200, attempts: 3 });
    expect((call.error as Error).message).toBe('deadline of 2500 ms would pass before the next attempt (200 ms left, the wait before it 1000 ms) after 3 attempt(s)');
    const cause = (call.error as Error).cause as RetriesExhaustedError;
    expect(cause).toBeInstanceOf(RetriesExhaustedError);
    expect(cause.errors).toHaveLength(3);
    expect(clock.pending).toBe(0);
  });

  it('attempt.remaining of a deadline past 2^31-1 ms is 2^31-1: a timer can hold it (AbortSignal.timeout took it for 1 ms)', async () => {
    const clock = new ManualClock(0);
    const seen: number[] = [];
    const call = run(
      clock,
      (a) => {
        seen.push(a.remaining);
        AbortSignal.timeout(a.remaining); // throws ERR_OUT_OF_RANGE past 2^53, warns and fires at once past 2^31-1
        return 'ok';
      },
      { timeout: 2 ** 31 + 10_000 },
    );
    await clock.tick(0);
    expect(call.value).toBe('ok');
    expect(seen).toEqual([2 ** 31 - 1]);
  });

  it('a backoff answering Infinity (or 2^31-1 ms), with or without a deadline, ends the retries at once, not 24.8 days later, as running out of attempts (was: with a deadline, DeadlineExceededError with nearly all of it left; an outside review)', async () => {
    for (const [wait, timeout] of [
      [Infinity, undefined],
      [2 ** 31 - 1, undefined],
      [Infinity, 3_000],
      [2 ** 31 - 1, 3_000],
    ] as const) {
      const clock = new ManualClock(0);
      let attempts = 0;
      const call = run(
        clock,
        () => {
          attempts++;
          return after(clock, 10, { error: refusedConnect() });
        },
        { backoff: () => wait, maxAttempts: 3, ...(timeout === undefined ? {} : { timeout }) },
      );
      await clock.tick(100);
      expect(attempts).toBe(1);
      expect(call.at).toBe(10); // was: still waiting (an outside review: unsettled at 6 s, the process held)
      expect(call.error).toBeInstanceOf(RetriesExhaustedError);
      expect((call.error as Error).message).toMatch(/backoff answered 2147483647 ms or more/);
      expect(clock.pending).toBe(0);
    }
  });

  describe('a timeout signal of the caller\'s own that outlives its attempt (made outside fn)', () => {
    const timeoutReason = (): DOMException => new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    /** A call whose attempt n fails 10 ms in with `errorOf(n)` (from 0): its attempts and its error. */
    async function failingWith(errorOf: (n: number) => unknown, maxAttempts: number): Promise<{ attempts: number; error: unknown }> {
      const clock = new ManualClock(0);
      let attempts = 0;
      const call = run(clock, () => after(clock, 10, { error: errorOf(attempts++) }), { idempotent: true, maxAttempts });
      await clock.tick(1_000);
      return { attempts, error: call.error };
    }

    // What each client rejects with once its signal ended by AbortSignal.timeout: fetch the reason
    // itself; node:http an AbortError whose cause it is; axios a CanceledError whose config's signal holds it.
    const shapes: Array<[string, (reason: DOMException) => unknown]> = [
      ['fetch: the reason itself', (reason) => reason],
      ['node:http: an AbortError around it', (reason) => Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR', cause: reason })],
      ['axios: a CanceledError, its config\'s signal holding it', (reason) => Object.assign(new Error('canceled'), { name: 'CanceledError', code: 'ERR_CANCELED', config: { signal: { aborted: true, reason } } })],
    ];

    it.each(shapes)('%s: the same reason twice ends the call with it (every later attempt failed at once, unsent, each after a backoff; an outside review)', async (_shape, make) => {
      const reason = timeoutReason();
      const { attempts, error } = await failingWith(() => make(reason), 5);
      expect(attempts).toBe(2);
      expect(error).not.toBeInstanceOf(RetriesExhaustedError);
      expect(error).toMatchObject({ name: make(reason) === reason ? 'TimeoutError' : expect.any(String) });
    });

    it.each(shapes)('%s: a fresh reason each attempt (a timeout made inside fn) is retried as any timeout', async (_shape, make) => {
      const { attempts, error } = await failingWith(() => make(timeoutReason()), 3);
      expect(attempts).toBe(3);
      expect(error).toBeInstanceOf(RetriesExhaustedError);
    });

    it('a reason seen before, then another failure, then the same reason: retried (only back to back is the same signal)', async () => {
      const reason = timeoutReason();
      const errors = [reason, refusedConnect(), reason];
      const { attempts, error } = await failingWith((n) => errors[n], 3);
      expect(attempts).toBe(3);
      expect(error).toBeInstanceOf(RetriesExhaustedError);
    });
  });

  it('a hung attempt is cut at the deadline, within one tick, and its signal aborts', async () => {
    const clock = new ManualClock(0);
    let signal: AbortSignal | undefined;
    const call = run(
      clock,
      (a) => {
        signal = a.signal;
        return hang();
      },
      { timeout: 1_234 },
    );
    for (let t = 0; t < 2 * S && call.state === 'pending'; t += 10) await clock.tick(10);
    expect(call.at).toBeLessThanOrEqual(1_234 + 10);
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
    expect((call.error as Error).cause).toBeUndefined(); // the abort reason is not an attempt's own error
    expect(signal?.aborted).toBe(true);
  });

  it('timeout 0 is honoured, not replaced by a default: no attempt at all', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const call = run(clock, () => ++calls, { timeout: 0 });
    await clock.tick(0);
    expect(calls).toBe(0);
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
  });

  it('a deadline already past fails at once', async () => {
    const clock = new ManualClock(10_000);
    const call = run(clock, () => 'never', { deadline: 9_000 });
    await clock.tick(0);
    expect(call.error).toBeInstanceOf(DeadlineExceededError);
  });
});

describe("retry: the caller's abort and shutdown", () => {
  it('an abort during the wait ends the call at once with signal.reason, not a deadline error', async () => {
    const clock = new ManualClock(0);
    const controller = new AbortController();
    let calls = 0;
    const call = run(
      clock,
      () => {
        calls++;
        return after(clock, 10, { error: refusedConnect() });
      },
      { signal: controller.signal, backoff: constant(5 * S), timeout: 60 * S },
    );
    await clock.tick(1 * S); // first attempt failed at 10 ms; now waiting until 5 010 ms
    const reason = new Error('user left');
    controller.abort(reason);
    await clock.tick(0);
    expect(call.error).toBe(reason);
    expect(call.at).toBe(1 * S);
    await clock.tick(10 * S);
    expect(calls).toBe(1);
    expect(clock.pending).toBe(0); // the wait and the deadline timer are both gone
  });

  it('an abort during an attempt rejects at once even if the attempt ignores it', async () => {
    const clock = new ManualClock(0);
    const controller = new AbortController();
    let seen: AbortSignal | undefined;
    const call = run(
      clock,
      (a) => {
        seen = a.signal;
        return hang();
      },
      { signal: controller.signal },
    );
    await clock.tick(100);
    controller.abort('stop');
    await clock.tick(0);
    expect(call.error).toBe('stop');
    expect(seen?.reason).toBe('stop');
  });

  it('an already aborted signal: fn never runs, the budget is not charged', async () => {
    const clock = new ManualClock(0);
    const budget = new RetryBudget({ clock });
    let calls = 0;
    const call = run(clock, () => ++calls, { signal: AbortSignal.abort('gone'), budget });
    await clock.tick(0);
    expect(call.error).toBe('gone');
    expect(calls).toBe(0);
    expect(budget.stats().deposited).toBe(0);
  });

  it('shutdown cuts the wait and rejects with its reason (seed 004 shutdownCh)', async () => {
    const clock = new ManualClock(0);
    const shutdown = new AbortController();
    const call = run(clock, () => after(clock, 10, { error: refusedConnect() }), { shutdown: shutdown.signal, backoff: constant(S) });
    await clock.tick(500);
    shutdown.abort(new Error('agent shutting down'));
    await clock.tick(0);
    expect((call.error as Error).message).toBe('agent shutting down');
    expect(call.at).toBe(500);
  });
});

describe('retry: what is retried', () => {
  it('a refusal by the breaker ends the loop at once, even for an idempotent call with a yes-predicate', async () => {
    const clock = new ManualClock(0);
    for (const refusal of [new HostUnavailableError('a:1', 5_000, 'open'), new NoServerAvailableError(3, 1_000)]) {
      let calls = 0;
      const call = run(
        clock,
        () => {
          calls++;
          throw refusal;
        },
        { idempotent: true, retryable: () => true, maxAttempts: 10 },
      );
      await clock.tick(S);
      expect(call.error).toBe(refusal);
      expect(calls).toBe(1);
    }
  });

  it('a maybe-sent failure is retried only when the call is idempotent', async () => {
    const clock = new ManualClock(0);
    for (const idempotent of [false, true]) {
      let calls = 0;
      const call = run(
        clock,
        () => {
          calls++;
          return Promise.reject(resetMidRequest());
        },
        { idempotent, maxAttempts: 3 },
      );
      await clock.tick(S);
      expect(calls).toBe(idempotent ? 3 : 1);
      if (idempotent) expect(call.error).toBeInstanceOf(RetriesExhaustedError);
      else expect(call.error).toMatchObject({ code: 'ECONNRESET' }); // the error itself, unwrapped
    }
  });

  it('a not-sent failure is retried for a non-idempotent call', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const call = run(clock, () => (++calls < 3 ? Promise.reject(refusedConnect()) : 'created'), { idempotent: false });
    await clock.tick(S);
    expect(call.value).toBe('created');
    expect(calls).toBe(3);
  });

  it('application errors, timeouts of a non-idempotent call and cancellations are not retried by default', async () => {
    const clock = new ManualClock(0);
    const cases = [
      Object.assign(new Error('Not Found'), { statusCode: 404 }),
      Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' }),
      new DOMException('aborted', 'AbortError'),
      new TypeError('undefined is not a function'),
    ];
    for (const err of cases) {
      let calls = 0;
      run(clock, () => {
        calls++;
        throw err;
      });
      await clock.tick(S);
      expect(calls, String(err)).toBe(1);
    }
  });

  it('a predicate can make "No cluster leader" retryable for a write, or veto a refused connect', async () => {
    const clock = new ManualClock(0);
    const noLeader = (): Error => Object.assign(new Error('Unexpected response code: 500 (No cluster leader)'), { statusCode: 500 });
    let calls = 0;
    const call = run(clock, () => (++calls < 3 ? Promise.reject(noLeader()) : 'written'), {
      retryable: (err) => ((err as Error).message.includes('No cluster leader') ? true : undefined),
    });
    await clock.tick(S);
    expect(call.value).toBe('written');

    const predicateSaw: Array<[string, number]> = [];
    let refusedCalls = 0;
    run(
      clock,
      () => {
        refusedCalls++;
        throw refusedConnect();
      },
      {
        retryable: (_err, c, a) => {
          predicateSaw.push([c.kind, a.number]);
          return false;
        },
      },
    );
    await clock.tick(S);
    expect(refusedCalls).toBe(1);
    expect(predicateSaw).toEqual([['dial', 1]]);
  });

  it('classify patterns from the options are used', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const call = run(clock, () => (++calls < 2 ? Promise.reject(new Error('No cluster leader')) : 'ok'), {
      classify: { patterns: [{ match: 'No cluster leader', transient: true, notSent: true }] },
    });
    await clock.tick(S);
    expect(call.value).toBe('ok');
  });

  it('maxAttempts exhausted keeps every error, in order, the last as cause', async () => {
    const clock = new ManualClock(0);
    const thrown: Error[] = [];
    const call = run(
      clock,
      () => {
        const e = refusedConnect();
        thrown.push(e);
        throw e;
      },
      { maxAttempts: 4 },
    );
    await clock.tick(S);
    const err = call.error as RetriesExhaustedError;
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect(err.errors).toEqual(thrown);
    expect(err.cause).toBe(thrown[3]);
  });

  it('a synchronous throw is an attempt failure like any other', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const call = run(clock, () => {
      if (++calls === 1) throw refusedConnect();
      return 'second time';
    });
    await clock.tick(0);
    expect(call.value).toBe('second time');
  });
});

describe('retry: the retry window (seed 004 RPCHoldTimeout)', () => {
  it('a 5 s hold time makes a long poll failing at 240 s unretryable; the default window is the deadline', async () => {
    const clock = new ManualClock(0);
    const poll = (a: RetryAttempt): Promise<string> =>
      a.number === 1 ? after(clock, 240 * S, { error: resetMidRequest() }) : after(clock, 1 * S, { value: 'fresh index' });
    const held = run(clock, poll, { timeout: 300 * S, idempotent: true, retryWindow: 5 * S });
    const fixed = run(clock, poll, { timeout: 300 * S, idempotent: true });
    const stretched = run(clock, poll, { timeout: 300 * S, idempotent: true, retryWindow: 5 * S + 300 * S });
    await clock.tick(300 * S);
    expect(held.error).toBeInstanceOf(RetriesExhaustedError);
    expect((held.error as Error).message).toContain('retry window of 5000 ms passed');
    expect(fixed.value).toBe('fresh index');
    expect(stretched.value).toBe('fresh index');
  });
});

describe('retry: backoff', () => {
  it('the schedule gets the retry number and its previous delay (decorrelated jitter needs it)', async () => {
    const clock = new ManualClock(0);
    const calls: Array<[number, number]> = [];
    const schedule = (n: number, previous: number): number => {
      calls.push([n, previous]);
      return n * 100;
    };
    run(clock, () => Promise.reject(refusedConnect()), { backoff: schedule, maxAttempts: 4 });
    await clock.tick(S);
    expect(calls).toEqual([
      [1, 0],
      [2, 100],
      [3, 200],
    ]);
  });

  it("a schedule answering NaN, a negative number, a string or undefined waits the default schedule's wait, warned once (was: no wait, a tight loop; an outside review: 751 attempts in 1 s)", async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      for (const answer of [Number.NaN, -5, '200', undefined]) {
        const clock = new ManualClock(0);
        let calls = 0;
        const call = run(
          clock,
          () => {
            calls++;
            throw refusedConnect();
          },
          { backoff: () => answer as number, maxAttempts: 3, random: () => 0 },
        );
        await clock.tick(0);
        await clock.tick(399);
        expect(calls, String(answer)).toBe(1); // restartSpanningBackoff's first wait, no jitter: 400 ms
        await clock.tick(1);
        expect(calls, String(answer)).toBe(2);
        await clock.tick(799);
        expect(calls, String(answer)).toBe(2); // its second: 800 ms
        await clock.tick(1);
        expect(calls, String(answer)).toBe(3);
        expect(call.error).toBeInstanceOf(RetriesExhaustedError);
      }
      const odd = warn.mock.calls.filter(([m]) => String(m).includes("a backoff's answer is not a wait"));
      expect(odd).toHaveLength(1);
      expect(String(odd[0]![0])).toContain('the backoff answered NaN');
    } finally {
      warn.mockRestore();
    }
  });

  it('jitter spreads 200 clients that failed together across the first window', async () => {
    const clock = new ManualClock(0);
    const random = seeded(42);
    const retryAt: number[] = [];
    for (let i = 0; i < 200; i++) {
      run(clock, (a) => (a.number === 1 ? Promise.reject(refusedConnect()) : (retryAt.push(clock.now()), 'ok')), {
        backoff: fullJitter({ base: 100, max: 10 * S }),
        random,
      });
    }
    await clock.tick(200);
    expect(retryAt).toHaveLength(200);
    const sorted = [...retryAt].sort((a, b) => a - b);
    expect(sorted[0]).toBeLessThan(10);
    expect(sorted[199]).toBeGreaterThan(90);
    expect(sorted[199]).toBeLessThanOrEqual(100);
    expect(new Set(retryAt).size).toBeGreaterThan(150); // not a synchronised wave
  });

  it.each([
    ['NaN', () => NaN],
    ['Infinity', () => Infinity],
    ['7', () => 7],
    ['a throw', () => {
      throw new Error('rng bug');
    }],
  ])('a random answering %s: the backoff draws Math.random instead (was: NaN, a 0 ms backoff for every client)', async (_name, random) => {
    const clock = new ManualClock(0);
    const drawn: number[] = [];
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    run(clock, () => Promise.reject(refusedConnect()), {
      backoff: (_n, _p, r) => {
        drawn.push(r());
        return 10;
      },
      random,
      maxAttempts: 3,
    });
    await clock.tick(S);
    expect(drawn).toHaveLength(2);
    for (const r of drawn) expect(r >= 0 && r < 1).toBe(true);
    warn.mockRestore();
  });

  it('decorrelated jitter works as a drop-in schedule', async () => {
    const clock = new ManualClock(0);
    const delays = record('scheduled');
    run(clock, () => Promise.reject(refusedConnect()), {
      backoff: decorrelatedJitter({ base: 100, max: 1_000 }),
      random: () => 0.999,
      maxAttempts: 5,
    });
    await clock.tick(10 * S);
    const ds = delays.map((e) => Math.round(e.delay));
    expect(ds[0]).toBe(100);
    expect(ds.slice(1).every((d) => d <= 1_000)).toBe(true);
    expect(ds[1]).toBeGreaterThan(ds[0]!);
  });
});

describe('retry: a dial that left its host refused', () => {
  it('ends the call with its own error: no backoff, no probe a window later (an outside review: 3 dials and ~1.4 s a window)', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const call = run(clock, () => {
      calls++;
      return Promise.reject(markLeftRefusing(refusedConnect()));
    }, { backoff: constant(300) });
    await clock.tick(S);
    expect(call.state).toBe('rejected');
    expect(call.error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(calls).toBe(1);
  });

  it('a dial that left it open, an unmarked failure of another kind, and the last attempt go as before', async () => {
    const clock = new ManualClock(0);
    const plan = [refusedConnect(), markLeftRefusing(resetMidRequest())];
    const call = run(clock, (a) => (a.number <= plan.length ? Promise.reject(plan[a.number - 1]) : Promise.reject(markLeftRefusing(refusedConnect()))), { idempotent: true, maxAttempts: 3 });
    await clock.tick(S);
    expect(call.state).toBe('rejected');
    expect(call.error).toBeInstanceOf(RetriesExhaustedError); // the third, marked, was the last
    expect((call.error as RetriesExhaustedError).errors).toHaveLength(3);
  });
});

describe('retry: budget', () => {
  it('an exhausted budget stops retries with RetryBudgetExhaustedError, reported once as an event', async () => {
    const clock = new ManualClock(0);
    const exhausted = record('budget-exhausted');
    const budget = new RetryBudget({ clock, percentCanRetry: 0, minRetriesPerSec: 0.2, ttl: 10 * S }); // 2 retries per 10 s
    const results: Array<ReturnType<typeof track<string>>> = [];
    for (let i = 0; i < 3; i++) {
      results.push(run(clock, (a) => (a.number === 1 ? Promise.reject(refusedConnect()) : 'ok'), { budget }));
      await clock.tick(0);
    }
    expect(results.map((r) => r.state)).toEqual(['resolved', 'resolved', 'rejected']);
    const err = results[2]!.error as RetryBudgetExhaustedError;
    expect(err).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(err.cause).toMatchObject({ code: 'ECONNREFUSED' });
    expect(exhausted).toEqual([{ attempt: 1 }]);
    expect(budget.stats()).toMatchObject({ deposited: 3, withdrawn: 2, refused: 1 });
  });

  it('a retry whose call ended before it started gives its withdrawal back (abort, deadline, shutdown, a throwing onRetry)', async () => {
    // A shutdown that met calls in their backoff left the budget spent for 10 s (an outside review).
    const ends: Array<[string, (c: AbortController) => RetryOptions, (c: AbortController, clock: ManualClock) => void]> = [
      ['caller abort in the backoff', (c) => ({ signal: c.signal }), (c) => c.abort(new Error('caller'))],
      ['shutdown in the backoff', (c) => ({ shutdown: c.signal }), (c) => c.abort(new Error('down'))],
      ['deadline in the backoff', () => ({ timeout: 500, backoff: constant(400) }), (_c, clock) => void clock.advance(450)],
      ['onRetry throws', () => ({ onRetry: () => { throw new Error('hook'); } }), () => undefined],
      ['onRetry rejects', () => ({ onRetry: () => Promise.reject(new Error('hook')) }), () => undefined],
    ];
    for (const [name, options, end] of ends) {
      const clock = new ManualClock(0);
      const budget = new RetryBudget({ clock, percentCanRetry: 0, minRetriesPerSec: 0.1, ttl: 10 * S }); // 1 retry per 10 s
      const c = new AbortController();
      const call = run(clock, () => Promise.reject(refusedConnect()), { budget, backoff: constant(300), ...options(c) });
      await clock.tick(100);
      end(c, clock);
      await clock.tick(0);
      expect(call.state, name).toBe('rejected');
      expect(budget.stats(), name).toMatchObject({ withdrawn: 1, refunded: 1, retries: 0, available: 1 });
    }
  });

  it('a retry that started keeps its withdrawal, and a call that withdrew nothing gives nothing back', async () => {
    const clock = new ManualClock(0);
    const budget = new RetryBudget({ clock, percentCanRetry: 0, minRetriesPerSec: 0.2, ttl: 10 * S });
    const c = new AbortController();
    // The second attempt hangs until aborted: its withdrawal was spent on a real send.
    const call = run(clock, (a) => (a.number === 1 ? Promise.reject(refusedConnect()) : hang()), { budget, signal: c.signal, backoff: constant(100) });
    await clock.tick(200);
    c.abort(new Error('caller'));
    await clock.tick(0);
    expect(call.state).toBe('rejected');
    const other = new AbortController();
    const idle = run(clock, () => hang(), { budget, signal: other.signal });
    other.abort(new Error('caller'));
    await clock.tick(0);
    expect(idle.state).toBe('rejected');
    expect(budget.stats()).toMatchObject({ withdrawn: 1, refunded: 0, retries: 1, available: 1 });
  });

  it('is on by default: the process-wide budget is charged', async () => {
    const { sharedRetryBudget } = await import('../../src/retry/budget.js');
    const before = sharedRetryBudget().stats().deposited;
    await retry(() => 'ok');
    expect(sharedRetryBudget().stats().deposited).toBe(before + 1);
  });
});

describe('retry: reporting', () => {
  it("emits 'scheduled' per retry with a bounded payload", async () => {
    const clock = new ManualClock(0);
    const scheduled = record('scheduled');
    run(clock, (a) => (a.number < 3 ? Promise.reject(refusedConnect()) : 'ok'), { backoff: constant(250) });
    await clock.tick(S);
    expect(scheduled).toEqual([
      { attempt: 2, delay: 250, code: 'ECONNREFUSED', kind: 'dial' },
      { attempt: 3, delay: 250, code: 'ECONNREFUSED', kind: 'dial' },
    ]);
  });

  it('onResult covers the whole call: every attempt and the waits between them', async () => {
    const clock = new ManualClock(0);
    const results: RetryResult[] = [];
    run(clock, (a) => (a.number < 3 ? after(clock, 100, { error: refusedConnect() }) : after(clock, 100, { value: 'ok' })), {
      backoff: constant(1_000),
      onResult: (r) => results.push(r),
    });
    run(clock, () => Promise.reject(resetMidRequest()), { onResult: (r) => results.push(r) });
    await clock.tick(5 * S);
    expect(results).toHaveLength(2);
    expect(results).toContainEqual({ ok: true, attempts: 3, elapsed: 2_300 });
    expect(results).toContainEqual(
      expect.objectContaining({ ok: false, attempts: 1, elapsed: 0, classification: expect.objectContaining({ kind: 'connection' }) }),
    );
  });

  it('a throwing predicate rejects the call and leaves no timer behind', async () => {
    const clock = new ManualClock(0);
    const bug = new Error('predicate bug');
    const call = run(clock, () => Promise.reject(refusedConnect()), {
      timeout: 60 * S,
      retryable: () => {
        throw bug;
      },
    });
    await clock.tick(0);
    expect(call.error).toBe(bug);
    expect(clock.pending).toBe(0);
  });

  it('a successful call leaves no timer behind', async () => {
    const clock = new ManualClock(0);
    const call = run(clock, () => 'ok', { timeout: 60 * S });
    await clock.tick(0);
    expect(call.value).toBe('ok');
    expect(clock.pending).toBe(0);
  });
});

describe('retry: options are checked on every call', () => {
  const fn = (): string => 'ok';
  it.each<[string, RetryOptions, RegExp]>([
    ['negative timeout', { timeout: -1 }, /timeout must be >= 0, got -1/],
    ['NaN timeout', { timeout: Number.NaN }, /timeout must be >= 0, got NaN/],
    ['string timeout', { timeout: '5s' as unknown as number }, /timeout must be a number, got "5s"/],
    ['deadline not a number', { deadline: null as unknown as number }, /deadline must be a number, got null/],
    // Was accepted: on performance.now() it lay 55 years ahead, so the loop below ran unbounded.
    ['a Date.now() deadline on the default clock', { deadline: Date.now() + 100, maxAttempts: Infinity }, /deadline is on the clock, performance.now\(\) by default, not Date.now\(\): got \d+, 5\d years away; pass performance.now\(\) \+ ms, or a timeout$/],
    ['maxAttempts 0', { maxAttempts: 0 }, /maxAttempts must be between 1 and \d+, got 0/],
    ['maxAttempts 1.5', { maxAttempts: 1.5 }, /maxAttempts must be an integer, got 1.5/],
    ['unbounded', { maxAttempts: Infinity }, /maxAttempts Infinity needs a timeout or deadline/],
    ['idempotent "yes"', { idempotent: 'yes' as unknown as boolean }, /idempotent must be a boolean, got "yes"/],
    ['negative retryWindow', { retryWindow: -5 }, /retryWindow must be >= 0, got -5/],
    ['backoff not a function', { backoff: 100 as never }, /backoff must be a function, got 100/],
    ['retryable not a function', { retryable: true as never }, /retryable must be a function, got true/],
    ['budget not a RetryBudget', { budget: {} as never }, /budget must be a RetryBudget or null, got an object/],
    ['clock without timers', { clock: { now: () => 0 } as never }, /clock.setTimeout must be a function/],
    ['signal not an AbortSignal', { signal: 'stop' as never }, /signal must be an AbortSignal, got "stop"/],
    ['shutdown not an AbortSignal', { shutdown: {} as never }, /shutdown must be an AbortSignal/],
    ['random not a function', { random: 0.5 as never }, /random must be a function, got 0.5/],
    ['bad classify pattern', { classify: { patterns: [{ match: 3 as never }] } }, /classify.patterns\[0\].match must be a string or RegExp, got 3/],
    ['onResult not a function', { onResult: 'log' as never }, /onResult must be a function/],
  ])('rejects %s', async (_name, options, message) => {
    await expect(retry(fn, { budget: null, ...options })).rejects.toThrow(message);
  });

  it('a deadline up to ten years ahead on the default clock is taken; on a clock of the caller\'s own, any', async () => {
    const year = 365.25 * 24 * 3_600_000;
    await expect(retry(fn, { budget: null, deadline: performance.now() + 9.9 * year })).resolves.toBe('ok');
    await expect(retry(fn, { budget: null, start: 0, deadline: 10.01 * year })).rejects.toThrow(/deadline is on the clock/);
    await expect(retry(fn, { budget: null, clock: new ManualClock(0), deadline: Date.now() + 100 })).resolves.toBe('ok');
  });

  it('rejects a non-function fn', async () => {
    await expect(retry(undefined as never)).rejects.toThrow(/fn must be a function/);
  });
});

describe('retry: the default backoff spans a server restart (an outside review)', () => {
  it('a port refusing for 1 s (a deploy restarting the server) is reached by the defaults: the three attempts span more than 1.2 s (was: full jitter from 100 ms, all three within ~300 ms, RETRIES_EXHAUSTED with most of a long poll\'s deadline left)', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const clock = new ManualClock(0);
      const at: number[] = [];
      const call = track(
        retry(
          () => {
            at.push(clock.now());
            if (clock.now() < 1_000) throw refusedConnect();
            return 'polled';
          },
          { clock, budget: null, random: seeded(seed), timeout: 300 * S, idempotent: true },
        ),
        clock,
      );
      for (let i = 0; i < 40 && call.state === 'pending'; i++) await clock.tick(100);
      expect({ seed, state: call.state, value: call.value }).toEqual({ seed, state: 'resolved', value: 'polled' });
      expect(at.length).toBeLessThanOrEqual(3);
      expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(400); // the first wait: 400-600 ms
    }
  });
});

describe('retry: a loop an adapter reports itself', () => {
  it('with REPORTED_BY_CALLER its end is not published on settled (the adapter reports the call), but onResult still hears it', async () => {
    const settled = record('settled');
    const results: boolean[] = [];
    await retry(() => 'a', { budget: null, onResult: (r) => void results.push(r.ok) });
    await retry(() => 'b', { budget: null, onResult: (r) => void results.push(r.ok), [REPORTED_BY_CALLER]: true });
    await retry(() => Promise.reject(refusedConnect()), { budget: null, maxAttempts: 1, [REPORTED_BY_CALLER]: true }).catch(() => {});
    expect(settled.map((e) => e.ok)).toEqual([true]); // the first call only
    expect(results).toEqual([true, true]);
  });
});
