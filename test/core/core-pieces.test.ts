import { getEventListeners } from 'node:events';
import { classify } from '../../src/core/classify.js';
import { describe, expect, it } from 'vitest';
import { constant, decorrelatedJitter, exponential, fullJitter, proportionalJitter } from '../../src/core/backoff.js';
import { sleep } from '../../src/core/clock.js';
import {
  ConnectTimeoutError,
  ConnectionGoneError,
  DeadlineExceededError,
  DialguardError,
  ErrorCodes,
  HostUnavailableError,
  KeepAliveTimeoutError,
  NoServerAvailableError,
  PoolClosedError,
  RequestTimeoutError,
  RetriesExhaustedError,
  RetryBudgetExhaustedError,
  TransportClosedError,
  isPermanent,
} from '../../src/core/errors.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';

// The small core pieces every layer stands on: the backoff schedules, sleep, and the error
// classes (their codes and messages are what a log reader and a caller's branch see).

describe('backoff schedules', () => {
  it('exponential: base, growing by the multiplier, capped at max; no jitter', () => {
    const s = exponential({ base: 100, max: 1_000 });
    expect([1, 2, 3, 4, 5, 6].map((n) => s(n, 0, () => 0.5))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    const triple = exponential({ base: 10, max: 10_000, multiplier: 3 });
    expect([0, 1, 2, 3].map((n) => triple(n, 0, Math.random))).toEqual([10, 10, 30, 90]);
  });

  it('proportional jitter spreads ±jitter around the exponential delay', () => {
    const s = proportionalJitter({ base: 100, max: 400, jitter: 0.5 });
    expect(s(1, 0, () => 0)).toBe(50);
    expect(s(1, 0, () => 0.5)).toBe(100);
    expect(s(3, 0, () => 1)).toBe(600); // the cap before jitter: max * (1 + jitter)
    expect(proportionalJitter({ base: 100, max: 400 })(1, 0, () => 0)).toBe(50); // default ±50 %
  });

  it('full jitter is uniform under the exponential delay', () => {
    const s = fullJitter({ base: 100, max: 400 });
    expect(s(3, 0, () => 0.25)).toBe(100);
    expect(s(9, 0, () => 0.5)).toBe(200);
  });

  it('decorrelated jitter draws in [base, previous * 3], capped at max', () => {
    const s = decorrelatedJitter({ base: 100, max: 1_000 });
    expect(s(1, 0, () => 0.5)).toBe(100); // nothing drawn yet: base
    expect(s(2, 200, () => 0)).toBe(100);
    expect(s(2, 200, () => 0.5)).toBe(350); // 100 + (600 - 100) / 2
    expect(s(2, 900, () => 1)).toBe(1_000);
  });

  it('constant is constant', () => {
    expect(constant(250)(7, 3, Math.random)).toBe(250);
  });

  it('checks its options, naming the schedule', () => {
    expect(() => exponential({ base: 100, max: 50 })).toThrow('exponential.max (50) must be >= base (100)');
    expect(exponential({ base: 100, max: 100 })(5, 0, Math.random)).toBe(100); // equal is fine
    expect(() => fullJitter({ base: 100, max: 50 })).toThrow(/^fullJitter\.max/);
    expect(() => decorrelatedJitter({ base: 100, max: 50 })).toThrow(/^decorrelatedJitter\.max/);
    expect(() => proportionalJitter({ base: 1, max: 2, jitter: 2 })).toThrow(/proportionalJitter\.jitter/);
    expect(() => proportionalJitter({ base: 100, max: 50 })).toThrow(/^proportionalJitter\.max/);
    expect(() => constant(-1)).toThrow(/constant/);
  });
});

describe('sleep', () => {
  it('resolves after ms on the clock and leaves no listener on the signal', async () => {
    const clock = new ManualClock(0);
    const signal = new AbortController().signal;
    let done = false;
    void sleep(clock, 100, signal).then(() => (done = true));
    expect(getEventListeners(signal, 'abort')).toHaveLength(1);
    await clock.tick(99);
    expect(done).toBe(false);
    await clock.tick(1);
    expect(done).toBe(true);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('an abort rejects with the reason and clears the timer; an aborted signal rejects at once', async () => {
    const clock = new ManualClock(0);
    const controller = new AbortController();
    const p = sleep(clock, 100, controller.signal);
    const reason = new Error('stop');
    controller.abort(reason);
    await expect(p).rejects.toBe(reason);
    expect(clock.pending).toBe(0);
    await expect(sleep(clock, 100, controller.signal)).rejects.toBe(reason);
    expect(clock.pending).toBe(0); // never armed
    const plain = sleep(clock, 5);
    await clock.tick(5);
    await expect(plain).resolves.toBeUndefined();
  });
});

describe('errors', () => {
  const clock = new ManualClock(0);
  const cause = new Error('root');
  it.each([
    [`new HostUnavailableError('a:1', 500, 'open', clock)`, () => new HostUnavailableError('a:1', 500, 'open', clock), ErrorCodes.HOST_UNAVAILABLE, 'a:1 is unavailable (0 consecutive failed dial round(s), last error unknown); refused without dialling; a probe may run in 500 ms'],
    [`new HostUnavailableError('a:1', 500, 'half-open')`, () => new HostUnavailableError('a:1', 500, 'half-open'), ErrorCodes.HOST_UNAVAILABLE, 'a:1 is unavailable (a probe dial is deciding whether it is back; last error unknown); refused without dialling; retry in 500 ms'],
    [`new ConnectTimeoutError('a:1', 2_000, 'tls')`, () => new ConnectTimeoutError('a:1', 2_000, 'tls'), ErrorCodes.CONNECT_TIMEOUT, 'connect to a:1 timed out after 2000 ms (stalled in tls)'],
    [`new ConnectionGoneError('a:1', 7, { cause })`, () => new ConnectionGoneError('a:1', 7, { cause }), ErrorCodes.CONNECTION_GONE, 'connection #7 to a:1 is gone'],
    [`new KeepAliveTimeoutError(1_000, 500)`, () => new KeepAliveTimeoutError(1_000, 500), ErrorCodes.KEEPALIVE_TIMEOUT, 'keep-alive PING unanswered for 500 ms (sent every 1000 ms): peer is silent'],
    [`new TransportClosedError('a:1')`, () => new TransportClosedError('a:1'), ErrorCodes.TRANSPORT_CLOSED, 'the connection to a:1 closed'],
    [`new TransportClosedError('a:1', 'session')`, () => new TransportClosedError('a:1', 'session'), ErrorCodes.TRANSPORT_CLOSED, 'the session to a:1 closed'],
    [`new PoolClosedError()`, () => new PoolClosedError(), ErrorCodes.POOL_CLOSED, 'pool is closed'],
    [`new PoolClosedError('client')`, () => new PoolClosedError('client'), ErrorCodes.POOL_CLOSED, 'client is closed'],
    [`new RequestTimeoutError(50)`, () => new RequestTimeoutError(50), ErrorCodes.REQUEST_TIMEOUT, 'request timed out after 50 ms'],
    [`new DeadlineExceededError(300_000, 2)`, () => new DeadlineExceededError(300_000, 2), ErrorCodes.DEADLINE_EXCEEDED, 'deadline of 300000 ms exceeded after 2 attempt(s)'],
    [`new DeadlineExceededError(299.87654, 0)`, () => new DeadlineExceededError(299.87654, 0), ErrorCodes.DEADLINE_EXCEEDED, 'deadline of 300 ms exceeded after 0 attempt(s)'],
    [`new DeadlineExceededError(200, 1, { left: 199.6, wait: 412.3 })`, () => new DeadlineExceededError(200, 1, { left: 199.6, wait: 412.3 }), ErrorCodes.DEADLINE_EXCEEDED, 'deadline of 200 ms would pass before the next attempt (200 ms left, the wait before it 412 ms) after 1 attempt(s)'],
    [`new RetriesExhaustedError([cause, cause], '2 attempt(s) allowed')`, () => new RetriesExhaustedError([cause, cause], '2 attempt(s) allowed'), ErrorCodes.RETRIES_EXHAUSTED, 'gave up after 2 attempt(s): 2 attempt(s) allowed'],
    [`new RetryBudgetExhaustedError({ cause })`, () => new RetryBudgetExhaustedError({ cause }), ErrorCodes.RETRY_BUDGET_EXHAUSTED, 'retry budget exhausted; not retrying'],
    [`new NoServerAvailableError(3, 1_234.2)`, () => new NoServerAvailableError(3, 1_234.2), ErrorCodes.NO_SERVER_AVAILABLE, 'none of 3 server(s) is available; earliest retry in 1235 ms'],
  ] as const)('%s', (_name, make, code, message) => {
    // Made inside the test, so that coverage attributes the constructor to it.
    const err = make();
    expect(err).toBeInstanceOf(DialguardError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe(code);
    expect(err.message).toBe(message);
    expect(err.name).toBe(err.constructor.name);
    expect(err.permanent).toBe(err instanceof HostUnavailableError); // only a refusal is permanent
  });

  it('TransportClosedError says whether it closed in its handshake (only when told so), and classify reads it', () => {
    expect(new TransportClosedError('a:1').handshake).toBe(false);
    expect(new TransportClosedError('a:1', 'session', { handshake: 1 as never }).handshake).toBe(false);
    const early = new TransportClosedError('a:1', 'session', { handshake: true });
    expect(early.handshake).toBe(true);
    expect(classify(early)).toMatchObject({ kind: 'dial', notSent: true });
    expect(classify(new TransportClosedError('a:1'))).toMatchObject({ kind: 'connection', notSent: false });
  });

  it('keeps the cause it was given', () => {
    expect(new ConnectionGoneError('a:1', 1, { cause }).cause).toBe(cause);
    expect(new RetriesExhaustedError([new Error('first'), cause], 'x').cause).toBe(cause); // the last attempt's
  });

  it('DeadlineExceededError: `left` only when the deadline was still ahead; no cause unless given', () => {
    const passed = new DeadlineExceededError(300, 2);
    expect(passed.left).toBeUndefined();
    expect('cause' in passed).toBe(false);
    const ahead = new DeadlineExceededError(300, 2, { left: 12, wait: 400, cause: 'x' });
    expect([ahead.left, ahead.cause]).toEqual([12, 'x']);
  });

  it('instanceof checks the brand: any value is safe to test, and one class is not another', () => {
    for (const v of [null, undefined, 0, 'DIALGUARD_HOST_UNAVAILABLE', {}, new Error('x')]) {
      expect(v instanceof DialguardError).toBe(false);
      expect(isPermanent(v)).toBe(false);
    }
    expect(new RequestTimeoutError(1) instanceof HostUnavailableError).toBe(false);
    // A copy of the package elsewhere marks its errors with the same registered symbol.
    const foreign = Object.assign(Object.create(null) as object, { [Symbol.for(`dialguard.error.${ErrorCodes.HOST_UNAVAILABLE}`)]: true });
    expect(foreign instanceof HostUnavailableError).toBe(true);
  });

  it("a caller's own subclass is told apart from its parent (it inherits no brand of its own)", () => {
    class MyTimeout extends ConnectTimeoutError {}
    class MyOtherTimeout extends MyTimeout {}
    const mine = new MyTimeout('a:1', 1, 'tcp');
    const plain = new ConnectTimeoutError('a:1', 1, 'tcp');
    expect(plain instanceof MyTimeout).toBe(false); // was true: every ConnectTimeoutError was a MyTimeout
    expect(mine instanceof MyTimeout).toBe(true);
    expect(mine instanceof ConnectTimeoutError).toBe(true);
    expect(mine instanceof DialguardError).toBe(true);
    expect(mine instanceof MyOtherTimeout).toBe(false);
    expect(new MyOtherTimeout('a:1', 1, 'tcp') instanceof MyTimeout).toBe(true);
    expect(mine instanceof HostUnavailableError).toBe(false);
    expect(mine.code).toBe(ErrorCodes.CONNECT_TIMEOUT);
  });

  it('isPermanent: a refusal yes, everything else no, whatever it claims', () => {
    expect(isPermanent(new HostUnavailableError('a:1', 1, 'open'))).toBe(true);
    expect(isPermanent(new ConnectTimeoutError('a:1', 1, 'tcp'))).toBe(false);
    expect(isPermanent(Object.assign(new Error('x'), { permanent: true }))).toBe(false); // not ours: not trusted
  });

  it('retryAfter counts down on the clock it was given, and never below zero', async () => {
    const c = new ManualClock(1_000);
    const err = new HostUnavailableError('a:1', 500, 'open', c);
    expect(err.retryAfter).toBe(500);
    await c.tick(200);
    expect(err.retryAfter).toBe(300);
    await c.tick(1_000);
    expect(err.retryAfter).toBe(0);
    await flushMicrotasks();
    expect(new HostUnavailableError('a:1', 500, 'open').retryAfter).toBe(500); // no clock: a fixed value
  });
});
