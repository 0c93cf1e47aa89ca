/**
 * A call retry() ends itself (out of attempts, of budget, of time) after an attempt that may have
 * reached the server never says "not sent", whatever its last attempt met: an idempotent call cut
 * after sending (ECONNRESET) whose retries were refused (ECONNREFUSED) ended with a
 * RetriesExhaustedError that classify read as a dial, not sent, and a layer above that is not
 * idempotent (a retry() of its own, a ServerSet) sent it again (an outside review, r138: a gRPC
 * handler ran twice). A call none of whose attempts was sent still says so (a ServerSet moves on).
 * On a manual clock, no sleeps.
 */
import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { classify } from '../../src/core/classify.js';
import { DeadlineExceededError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { refusedConnect, resetMidRequest } from './helpers.js';

/** retry() over `errors`, one per attempt in turn; the error it ends with. */
async function ended(errors: Array<() => Error>, options: Parameters<typeof retry>[1] = {}): Promise<unknown> {
  const clock = new ManualClock(0);
  let n = 0;
  const call = retry(
    () => {
      const e = errors[Math.min(n++, errors.length - 1)]!;
      return Promise.reject(e());
    },
    { clock, budget: null, backoff: constant(0), idempotent: true, ...options },
  ).catch((e: unknown) => e);
  for (let i = 0; i < 10; i++) await clock.tick(0);
  return call;
}

describe('retry(): a call an attempt of which may have reached the server never ends as "not sent"', () => {
  it('reset, then refused twice: RetriesExhaustedError, not "not sent" (was: a dial, not sent)', async () => {
    const err = await ended([resetMidRequest, refusedConnect, refusedConnect], { maxAttempts: 3 });
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: false });
  });

  it('refused three times: still not sent (a ServerSet moves on)', async () => {
    const err = await ended([refusedConnect], { maxAttempts: 3 });
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true });
  });

  it('reset, then refused until the budget is spent: RetryBudgetExhaustedError, not "not sent"', async () => {
    const budget = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 1, ttl: 1_000, clock: new ManualClock(0) });
    while (budget.tryWithdraw());
    const err = await ended([resetMidRequest, refusedConnect], { maxAttempts: 3, budget });
    expect(err).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(classify(err).notSent).toBe(false);
  });

  it('reset, then a retry that cannot start before the deadline: DeadlineExceededError, not "not sent"', async () => {
    const err = await ended([resetMidRequest, refusedConnect], { maxAttempts: 3, timeout: 100, backoff: constant(500) });
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect(classify(err).notSent).toBe(false);
  });
});
