/**
 * Calls aborted while undici still queued them (an outside review, r127): with `connections: 1`
 * and a slow server, each call aborted at 5 ms was released by the GuardedAgent at once, but its
 * request stayed in undici's queue; when undici reached it, the attempt aborted it through the
 * `abort` undici hands its handler, which destroys the connection, and undici dialled a new one
 * for the next request in its queue. 3 000 such calls went on dialling ~700 connections a second
 * for ~4 s after every caller had been released, each request holding its call until then (raw
 * undici makes the same 3 000 connections, while its callers still wait). Now a request its call
 * left before undici connected it is failed by undici with nothing written, and the connection
 * is kept for the next. Counted against raw undici in the same run.
 */
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/agent.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { httpServer } from './helpers.js';

const CALLS = 200;

/** CALLS calls at once, each aborted 5 ms in, on a server that answers in 30 ms; how they ended. */
async function abortedBatch(origin: string, dispatcher: Agent | GuardedAgent): Promise<string[]> {
  const calls = Array.from({ length: CALLS }, () =>
    request(`${origin}/`, { dispatcher, signal: AbortSignal.timeout(5) }).then(
      async (r) => {
        await r.body.text();
        return 'ok';
      },
      (err: Error) => err.name,
    ),
  );
  return Promise.all(calls);
}

describe('GuardedAgent: calls aborted while undici queued them', () => {
  it('connections: 1, 200 calls aborted at 5 ms: the queue is dropped on the one connection, not redialled a connection per aborted request after the callers left', async () => {
    await using slow = await httpServer((_req, res) => setTimeout(() => res.end('ok'), 30));
    await using rawServer = await httpServer((_req, res) => setTimeout(() => res.end('ok'), 30));
    const guarded = new GuardedAgent({ breaker: new HostBreaker(), maxAttempts: 1, undici: { connections: 1 } });
    const raw = new Agent({ connections: 1 });
    try {
      const [g, r] = await Promise.all([abortedBatch(slow.origin, guarded), abortedBatch(rawServer.origin, raw)]);
      expect(new Set(g)).toEqual(new Set(['TimeoutError']));
      expect(new Set(r)).toEqual(new Set(['TimeoutError']));
      const atRelease = slow.connections;
      await new Promise((resolve) => setTimeout(resolve, 300)); // the old queue was worked through at ~700 connections/s
      // The request undici had written when its call aborted costs its connection (as raw); the
      // ones still queued cost none, then or later.
      expect(slow.connections, `at release ${atRelease}`).toBeLessThanOrEqual(3);
      expect(rawServer.connections).toBeGreaterThan(CALLS / 2); // raw undici: a connection for (nearly) each
      // The kept connection serves the next call.
      const after = await request(`${slow.origin}/`, { dispatcher: guarded });
      expect(after.statusCode).toBe(200);
      expect(await after.body.text()).toBe('ok');
      expect(slow.connections).toBeLessThanOrEqual(3);
    } finally {
      await Promise.all([guarded.close(), raw.close()]);
    }
  });
});
