/**
 * A caller's own abort while the agent holds back a 429/502/503/504 for a retry (found by an
 * outside review): the raw agent hands that answer over at once; the guarded one held it for its
 * backoff or Retry-After, and a caller's `AbortSignal.timeout(300)` then failed the call with a
 * TimeoutError at 300 ms: the server's answer was replaced by an error. The call now ends with the
 * answer it held, as it does when the agent closes meanwhile. fetch() settles on its own signal
 * before any dispatcher can answer, so there the caller still gets the signal's reason: the agent's
 * `timeout` (a deadline the layer knows) is the way to keep a short-lived fetch's answer.
 */
import { Agent, fetch, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { answer, httpServer, leakChecked } from './helpers.js';

leakChecked();

const BUSY = answer(503, 'busy, come back later', { 'retry-after': '1' });

describe('GuardedAgent: the caller aborts while a retryable status is held back', () => {
  it('request() with AbortSignal.timeout(300) and a 503 with Retry-After 1: the 503 at the abort, sent once (was: TimeoutError; raw: the 503 at once)', async () => {
    await using server = await httpServer(BUSY);
    const raw = new Agent();
    const agent = new GuardedAgent({ breaker: null, budget: null });
    try {
      const call = async (dispatcher: Agent | GuardedAgent): Promise<unknown> => {
        try {
          const r = await request(`${server.origin}/`, { dispatcher, signal: AbortSignal.timeout(300) });
          return { status: r.statusCode, body: await r.body.text() };
        } catch (err) {
          return (err as Error).name;
        }
      };
      expect(await call(raw)).toEqual({ status: 503, body: 'busy, come back later' });
      const t0 = performance.now();
      expect(await call(agent)).toEqual({ status: 503, body: 'busy, come back later' });
      expect(performance.now() - t0).toBeLessThan(900); // at the abort, not after the Retry-After
      expect(server.requests).toBe(2); // one each: the guarded call never sent it again
    } finally {
      await Promise.all([raw.close(), agent.close()]);
    }
  });

  it('an AbortController aborted during the backoff: the held 503, as the answer the server gave', async () => {
    await using server = await httpServer(answer(503, 'busy'));
    const agent = new GuardedAgent({ breaker: null, budget: null, backoff: () => 5_000 });
    try {
      const ac = new AbortController();
      const call = request(`${server.origin}/`, { dispatcher: agent, signal: ac.signal }).then(async (r) => ({ status: r.statusCode, body: await r.body.text() }));
      for (let i = 0; i < 100 && server.requests === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      await new Promise((resolve) => setTimeout(resolve, 50)); // the 503 is in, held back
      ac.abort();
      expect(await call).toEqual({ status: 503, body: 'busy' });
      expect(server.requests).toBe(1);
    } finally {
      await agent.close();
    }
  });

  it('fetch() with AbortSignal.timeout(300): fetch rejects with the signal\'s reason on its own; the delivery after it is harmless (no unhandled error), and nothing is sent again', async () => {
    await using server = await httpServer(BUSY);
    const agent = new GuardedAgent({ breaker: null, budget: null });
    try {
      const err = await fetch(`${server.origin}/`, { dispatcher: agent, signal: AbortSignal.timeout(300) }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as Error).name).toBe('TimeoutError');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(server.requests).toBe(1);
    } finally {
      await agent.close();
    }
  });

  it('an abort with no answer held (backing off after a refused connect) still fails with the abort reason', async () => {
    await using server = await httpServer(answer(200));
    const port = server.port;
    await server.close();
    const agent = new GuardedAgent({ breaker: null, budget: null, backoff: () => 5_000 });
    try {
      const ac = new AbortController();
      const call = request(`http://127.0.0.1:${port}/`, { dispatcher: agent, signal: ac.signal }).then(
        () => 'answered',
        (e: unknown) => (e as Error).name,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      ac.abort();
      expect(await call).toBe('AbortError');
    } finally {
      await agent.close();
    }
  });
});
