/**
 * GuardedAgent.close() is bounded as ConnectionPool.close() is: a dial still out SETTLE_TIMEOUT
 * after close() began (a user connector that never calls back, with `connectTimeout: 0` and so no
 * dial timeout) is abandoned, its request fails with PoolClosedError, and close() resolves. (It
 * used to wait for that connector forever: undici's close waits for every queued request.)
 */
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent, guardedConnector, guardedRetry } from '../../../src/adapters/undici/index.js';
import { PoolClosedError } from '../../../src/core/errors.js';
import { SETTLE_TIMEOUT } from '../../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../../src/testing/manual-clock.js';
import { eventually } from '../../helpers/eventually.js';
import { answer, httpServer, leakChecked } from './helpers.js';

/** Loopback; never dialled (the connector below never opens a socket). */
const URL = 'http://127.0.0.1:9/';

/** `p`'s outcome, or 'pending' if it has not settled within `ms` of real time (a bound on a failing run only). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const out = await Promise.race([p, new Promise<'pending'>((resolve) => (timer = setTimeout(resolve, ms, 'pending')))]);
  clearTimeout(timer);
  return out;
}

/** Runs pending I/O callbacks and microtasks a few times (undici hands the dial over asynchronously). */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    await flushMicrotasks();
  }
}

/**
 * A GuardedAgent with `connectTimeout: 0` on a manual clock whose connector never calls back, and
 * one request dialling through it (its outcome, never rejected).
 */
async function stuckDial(): Promise<{ clock: ManualClock; agent: GuardedAgent; call: Promise<unknown>; dials: () => number }> {
  const clock = new ManualClock(0);
  let dials = 0;
  const agent = new GuardedAgent({
    breaker: null,
    clock,
    undici: {
      connectTimeout: 0,
      connect: () => {
        dials++; // never calls back
      },
    },
  });
  const call = request(URL, { dispatcher: agent }).then(
    () => 'answered',
    (err: unknown) => err,
  );
  await turns();
  return { clock, agent, call, dials: () => dials };
}

describe('GuardedAgent.close() with connectTimeout: 0 and a connector that never calls back', () => {
  it('abandons the dial SETTLE_TIMEOUT after close() began: the request gets PoolClosedError and close() resolves', async () => {
    const { clock, agent, call, dials } = await stuckDial();
    expect(dials()).toBe(1);
    const closing = agent.close();
    await turns();
    expect(await within(closing, 10)).toBe('pending'); // graceful first: the dial may still land
    clock.advance(SETTLE_TIMEOUT);
    expect(await within(closing, 2_000)).not.toBe('pending');
    expect(await call).toBeInstanceOf(PoolClosedError);
    expect(dials()).toBe(1);
    expect(clock.pending).toBe(0);
  });

  it('destroy() abandons the dial at once: its request fails and no dial timer is left on the clock', async () => {
    const { clock, agent, call, dials } = await stuckDial();
    expect(dials()).toBe(1);
    expect(clock.pending).toBe(1); // the dial's timer (connectTimeout 0: the longest Node can arm)
    await agent.destroy();
    expect(await call).toBeInstanceOf(Error);
    expect(clock.pending).toBe(0);
  });

  it("guardedConnector's closing option must be an AbortSignal (TypeError naming it)", () => {
    expect(() => guardedConnector({ breaker: null, closing: {} as AbortSignal })).toThrow(/closing must be an AbortSignal/);
  });
});

describe('GuardedAgent close() or destroy() while a call waits out a retry', () => {
  leakChecked();

  for (const how of ['close', 'destroy'] as const) {
    it(`${how}(): a 503 held back for its Retry-After (3 s) goes to the caller at once, as the answer it was; nothing is sent again`, async () => {
      await using server = await httpServer(answer(503, 'busy, come back later', { 'retry-after': '3' }));
      const agent = new GuardedAgent({ breaker: null, budget: null });
      const call = request(`${server.origin}/`, { dispatcher: agent }).then(async (r) => ({ status: r.statusCode, body: await r.body.text() }));
      await eventually(() => server.requests, (n) => n === 1);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the 503 is in, held back
      const t0 = performance.now();
      await (how === 'close' ? agent.close() : agent.destroy());
      expect(await within(call, 2_000)).toEqual({ status: 503, body: 'busy, come back later' }); // was: UND_ERR_DESTROYED, 3 s later
      expect(performance.now() - t0).toBeLessThan(1_000);
      expect(server.requests).toBe(1);
    });
  }

  it('close() while backing off after a refused connect: the call fails at once with that ECONNREFUSED, not after the backoff', async () => {
    await using server = await httpServer(answer(200));
    const port = server.port;
    await server.close();
    const agent = new GuardedAgent({ breaker: null, budget: null, backoff: () => 5_000, maxAttempts: 3 });
    const t0 = performance.now();
    const call = request(`http://127.0.0.1:${port}/`, { dispatcher: agent }).then(
      () => 'answered',
      (err: unknown) => err,
    );
    await new Promise((resolve) => setTimeout(resolve, 100)); // the first attempt failed; the backoff runs
    await agent.close();
    const err = await within(call, 2_000);
    expect(err).toMatchObject({ code: 'ECONNREFUSED' });
    expect(performance.now() - t0).toBeLessThan(2_000);
  });

  it('an interceptor over an Agent the user closes: the retry undici refuses leaves the caller the 503 it held', async () => {
    await using server = await httpServer(answer(503, 'busy', { 'retry-after': '1' }));
    const base = new Agent();
    const dispatcher = base.compose(guardedRetry({ budget: null }));
    const call = request(`${server.origin}/`, { dispatcher }).then(async (r) => ({ status: r.statusCode, body: await r.body.text() }));
    await eventually(() => server.requests, (n) => n === 1);
    await base.close();
    expect(await within(call, 3_000)).toEqual({ status: 503, body: 'busy' }); // was: ClientClosedError after the wait
    expect(server.requests).toBe(1);
  });
});
