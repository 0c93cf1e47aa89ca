/**
 * A call retry() ends itself (out of attempts, of budget, of time) after an attempt that may have
 * reached the server never says "not sent", whatever its last attempt met: an idempotent call cut
 * after sending (ECONNRESET) whose retries were refused (ECONNREFUSED) ended with a
 * RetriesExhaustedError that classify read as a dial, not sent, and a layer above that is not
 * idempotent (a retry() of its own, a ServerSet) sent it again (an outside review, r138: a gRPC
 * handler ran twice). A call none of whose attempts was sent still says so (a ServerSet moves on).
 * On a manual clock, no sleeps.
 */
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { classify, copiedFrom, failedEstablishing, heardOnLiveConnection, leftHostRefusing, markLeftRefusing, neverSent, sentEarlier, toldAsSentEarlier } from '../../src/core/classify.js';
import { dialFailureOutcome, localFailure } from '../../src/guard/dial-outcome.js';
import { DeadlineExceededError, HostUnavailableError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
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

describe('retry(): an attempt\'s own error ending a call sent before is handed as a copy that is not "not sent"', () => {
  it('reset, then refused by the breaker: a copy of the refusal (class, code, host kept), the original unmarked', async () => {
    const refusal = new HostUnavailableError('h:1', 1_000, 'open');
    const err = await ended([resetMidRequest, () => refusal], { maxAttempts: 3 });
    expect(err).not.toBe(refusal);
    expect(err).toBeInstanceOf(HostUnavailableError);
    expect(err).toMatchObject({ code: refusal.code, host: 'h:1', message: refusal.message });
    expect(classify(err)).toMatchObject({ kind: 'refused', notSent: false });
    expect(classify(refusal).notSent).toBe(true); // shared with other calls: never marked
  });

  it("a copy of a refusal reads its retryAfter, counting down on the refusal's clock (was: TypeError, \"Cannot read private member\"; r147's process crashed)", async () => {
    const clock = new ManualClock(5_000);
    const refusal = new HostUnavailableError('h:1', 1_000, 'open', clock);
    const err = (await ended([resetMidRequest, () => refusal], { maxAttempts: 3 })) as HostUnavailableError;
    expect(err).not.toBe(refusal);
    expect(err.retryAfter).toBe(1_000);
    await clock.tick(400);
    expect([err.retryAfter, refusal.retryAfter]).toEqual([600, 600]);
    expect(inspect(refusal)).not.toMatch(/retryAt|Symbol\(now\)/); // nothing new in what it prints
    expect(JSON.stringify(err)).toBe(JSON.stringify(refusal));
  });

  it('reset, then a refused connect retryable says no to: a copy, code and syscall kept', async () => {
    const refused = refusedConnect();
    let n = 0;
    const err = await ended([resetMidRequest, () => refused], { maxAttempts: 3, retryable: () => n++ === 0 });
    expect(err).not.toBe(refused);
    expect(err).toMatchObject({ code: 'ECONNREFUSED', syscall: 'connect', message: refused.message, stack: refused.stack });
    expect(classify(err).notSent).toBe(false);
  });

  it('refused, then refused by the breaker: the refusal itself (nothing was sent)', async () => {
    const refusal = new HostUnavailableError('h:1', 1_000, 'open');
    const err = await ended([refusedConnect, () => refusal], { maxAttempts: 3 });
    expect(err).toBe(refusal);
  });

  it('reset, then an error that is not "not sent" itself: that error, not a copy', async () => {
    const reset = resetMidRequest();
    const err = await ended([refusedConnect, () => reset], { maxAttempts: 2 });
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    const last = await ended([resetMidRequest, () => reset], { maxAttempts: 3, retryable: (_e, _c, a) => a.number < 2 });
    expect(last).toBe(reset);
  });
});

describe('toldAsSentEarlier', () => {
  const marked = sentEarlier(new Error('made to end the call'));
  it('copies a "not sent" I/O error when the ending is marked, or `sent` says so; else the error itself', () => {
    const refused = refusedConnect();
    expect(toldAsSentEarlier(refused, new Error('unmarked'))).toBe(refused);
    expect(toldAsSentEarlier(refused, undefined)).toBe(refused);
    expect(toldAsSentEarlier(refused, 'marked? no: a string')).toBe(refused);
    for (const copy of [toldAsSentEarlier(refused, marked), toldAsSentEarlier(refused, undefined, true)]) {
      expect(copy).not.toBe(refused);
      expect(Object.getPrototypeOf(copy)).toBe(Object.getPrototypeOf(refused));
      expect(classify(copy).notSent).toBe(false);
      expect(toldAsSentEarlier(copy, marked)).toBe(copy); // marked already: no second copy
    }
    expect(classify(refused).notSent).toBe(true);
  });

  it('leaves alone what is not an I/O failure said "not sent", or not an object', () => {
    const reason = new DOMException('aborted', 'AbortError');
    const ac = new AbortController();
    ac.abort(reason);
    expect(toldAsSentEarlier(reason, marked)).toBe(reason);
    expect(toldAsSentEarlier('ECONNREFUSED', marked)).toBe('ECONNREFUSED');
    expect(toldAsSentEarlier(null, marked)).toBe(null);
    const reset = resetMidRequest();
    expect(toldAsSentEarlier(reset, marked)).toBe(reset);
  });

  it('what was said of the original holds of its copy: left its host refusing, heard live, establishing, a local failure', () => {
    const left = markLeftRefusing(refusedConnect());
    const leftCopy = toldAsSentEarlier(left, marked);
    expect(leftCopy).not.toBe(left);
    expect(leftHostRefusing(leftCopy)).toBe(true);
    expect(copiedFrom(leftCopy as object)).toBe(left);
    expect(copiedFrom(left)).toBe(left);
    const local = localFailure(refusedConnect()) as Error;
    const localCopy = toldAsSentEarlier(local, marked);
    expect(localCopy).not.toBe(local);
    expect(dialFailureOutcome(localCopy)).toBe('abandoned');
    expect(dialFailureOutcome(toldAsSentEarlier(refusedConnect(), marked))).toBe('failed');
    const establishing = failedEstablishing(new Error('ERROR Too many open connections'));
    expect(classify(establishing)).toMatchObject({ kind: 'dial', notSent: true });
    const estCopy = toldAsSentEarlier(establishing, marked);
    expect(estCopy).not.toBe(establishing);
    expect(classify(estCopy)).toMatchObject({ kind: 'dial', notSent: false });
    const live = Object.assign(new Error('refused?'), { code: 'ECONNREFUSED', syscall: 'connect' });
    heardOnLiveConnection(live);
    expect(toldAsSentEarlier(live, marked)).toBe(live); // a connection's death: maybe sent already
  });

  it('a wrapper over a marked copy is not "not sent" either (fetch\'s TypeError)', () => {
    const copy = toldAsSentEarlier(refusedConnect(), marked);
    expect(classify(new TypeError('fetch failed', { cause: copy })).notSent).toBe(false);
    expect(classify(new TypeError('fetch failed', { cause: refusedConnect() })).notSent).toBe(true);
  });
});

describe('retry(): a call none of whose attempts was sent, ended between attempts, says "not sent" (r145)', () => {
  it('refused, then a retry that cannot start before the deadline: DeadlineExceededError, not sent (was: maybe sent)', async () => {
    const err = await ended([refusedConnect], { maxAttempts: 3, timeout: 100, backoff: constant(500) });
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect(classify(err)).toMatchObject({ kind: 'timeout', notSent: true });
  });

  it('refused, the deadline passing during the backoff: not sent', async () => {
    const clock = new ManualClock(0);
    const call = retry(() => Promise.reject(refusedConnect()), { clock, budget: null, backoff: constant(50), timeout: 120, maxAttempts: 10 }).catch((e: unknown) => e);
    for (let i = 0; i < 20; i++) await clock.tick(10);
    const err = await call;
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect(classify(err).notSent).toBe(true);
  });

  it('the deadline cutting an attempt under way: maybe sent', async () => {
    const clock = new ManualClock(0);
    let n = 0;
    const call = retry(
      () => (n++ === 0 ? Promise.reject(refusedConnect()) : new Promise<never>(() => {})),
      { clock, budget: null, backoff: constant(10), timeout: 100, maxAttempts: 3 },
    ).catch((e: unknown) => e);
    for (let i = 0; i < 20; i++) await clock.tick(10);
    const err = await call;
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect(classify(err).notSent).toBe(false);
  });

  it('refused until out of attempts: RetriesExhaustedError, not sent; a deadline made by the caller is not marked', async () => {
    const err = await ended([refusedConnect], { maxAttempts: 2 });
    expect(err).toBeInstanceOf(RetriesExhaustedError);
    expect(classify(err).notSent).toBe(true);
    expect(classify(new DeadlineExceededError(100, 1)).notSent).toBe(false);
  });
});

describe('toldAsSentEarlier: which classifications are copied', () => {
  const marked = sentEarlier(new Error('ended'));
  const as = (kind: string, notSent = true) => ({ kind, notSent, connectionDead: false, transient: true, code: undefined, cause: undefined }) as unknown as Parameters<typeof toldAsSentEarlier>[3];
  it('a "not sent" dial, refusal, connection or stream failure is copied; a timeout, a cancellation, an unknown are not', () => {
    for (const kind of ['dial', 'refused', 'connection', 'stream']) {
      const e = new Error(kind);
      const copy = toldAsSentEarlier(e, marked, false, as(kind));
      expect(copy, kind).not.toBe(e);
      expect(copiedFrom(copy)).toBe(e);
    }
    for (const kind of ['timeout', 'cancelled', 'unknown', 'application']) {
      const e = new Error(kind);
      expect(toldAsSentEarlier(e, marked, false, as(kind)), kind).toBe(e);
    }
    const maybe = new Error('maybe');
    expect(toldAsSentEarlier(maybe, marked, false, as('dial', false))).toBe(maybe);
  });

  it('an object whose properties cannot be read (a hostile Proxy) is left as it is', () => {
    const hostile = new Proxy(new Error('x'), {
      ownKeys() {
        throw new Error('no keys');
      },
    });
    expect(toldAsSentEarlier(hostile, marked, false, as('dial'))).toBe(hostile);
  });

  it('marks only what the original carried: a plain copy is not left refusing', () => {
    const copy = toldAsSentEarlier(refusedConnect(), marked);
    expect(leftHostRefusing(copy)).toBe(false);
    expect(classify(copy)).toMatchObject({ kind: 'dial', notSent: false });
  });
});

describe('toldAsSentEarlier and neverSent: what is not an object', () => {
  const marked = sentEarlier(new Error('ended'));
  const dial = { kind: 'dial', notSent: true, connectionDead: false, transient: true, code: undefined, cause: undefined } as unknown as Parameters<typeof toldAsSentEarlier>[3];
  it('a string or null said to be a "not sent" dial is handed back as it is (nothing to copy)', () => {
    expect(toldAsSentEarlier('ECONNREFUSED', marked, false, dial)).toBe('ECONNREFUSED');
    expect(toldAsSentEarlier(null, marked, true, dial)).toBe(null);
    expect(toldAsSentEarlier(7, undefined, true, dial)).toBe(7);
  });

  it('a copy already marked is handed back, whatever it is said to be', () => {
    const copy = toldAsSentEarlier(refusedConnect(), marked);
    expect(toldAsSentEarlier(copy, marked, true, dial)).toBe(copy);
  });

  it('neverSent marks objects only: a string or null comes back, nothing thrown', () => {
    expect(neverSent('x')).toBe('x');
    expect(neverSent(null)).toBe(null);
    expect(neverSent(undefined)).toBe(undefined);
    const e = new Error('made');
    expect(neverSent(e)).toBe(e);
  });
});
