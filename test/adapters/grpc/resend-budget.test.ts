/**
 * A call its dead channel cut goes back to a fresh channel as a resend, and a resend is a retry:
 * it withdraws from the guard's retry budget. A server that killed every other call's connection
 * cost 2 runs a call with the budget at zero (the pool's resends bypassed it). A stock grpc-js
 * server behind a relay whose connections are reset; runs counted at the server.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { RetryBudget } from '../../../src/retry/budget.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { type CountingRelay, EchoClient, type EchoServer, call, countingRelay, echoServer } from './helpers.js';

const cleanup = leakCheckEach();

/**
 * A stock echo server behind a counting relay, a guard with `retry` (every method idempotent) and
 * a client whose channel has served a call; then four Hold calls, held at the server, and every
 * connection reset under them. Returns the server, the relay, the guard and the calls' outcomes
 * (each the reply, or the error).
 */
async function fourCut(retry: GrpcGuardOptions['retry']): Promise<{ server: EchoServer; relay: CountingRelay; guard: GrpcGuard; held: Promise<unknown[]> }> {
  const server = await echoServer();
  cleanup.push(() => server.close());
  const relay = await countingRelay(server);
  cleanup.push(() => relay.close());
  const guard = new GrpcGuard({ breaker: new HostBreaker(), idempotent: () => true, closeTimeout: 100, retry });
  cleanup.push(() => guard.close());
  const client = new EchoClient(relay.address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => client.close());
  expect(String(await call(client, 'Echo', 'warm'))).toBe('warm'); // the channel has served a call
  const held = Promise.all(Array.from({ length: 4 }, (_, i) => call(client, 'Hold', String(i)).then(String, (err: grpc.ServiceError) => err)));
  await eventually(() => server.held.size, (n) => n === 4);
  await relay.resetConnections();
  return { server, relay, guard, held };
}

describe('grpc guard: the pool sends a cut call again only from the retry budget', () => {
  it.each([
    ['an empty budget: each cut call fails, sent once', { percentCanRetry: 0, minRetriesPerSec: 0 }, 4, 0],
    ['a budget with room: each goes again on a fresh channel', {}, 8, 4],
  ])('%s', async (_name, budgetOptions, runs, withdrawn) => {
    const budget = new RetryBudget(budgetOptions);
    const { server, held } = await fourCut({ maxAttempts: 2, backoff: () => 5_000, budget });
    if (withdrawn > 0) {
      await eventually(() => server.calls.Hold, (n) => n === runs);
      await eventually(() => server.held.size, (n) => n === 4);
      server.releaseHeld();
    }
    const results = await held;
    if (withdrawn > 0) expect(results).toEqual(['0', '1', '2', '3']);
    else for (const r of results) expect((r as grpc.ServiceError).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.calls.Hold).toBe(runs);
    expect(budget.stats().withdrawn).toBe(withdrawn);
  });

  it.each([
    ['retry: false', false as const],
    ['maxAttempts 1', { maxAttempts: 1, budget: new RetryBudget() }],
  ])('%s: a cut call is sent once, though the budget has room (was: sent again by the pool, up to retiredRetries)', async (_name, retry) => {
    const { server, guard, held } = await fourCut(retry);
    for (const r of await held) expect((r as grpc.ServiceError).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.calls.Hold).toBe(4);
    expect(guard.stats().turns).toBe(0);
  });

  it('maxAttempts 2, cut twice: each call runs twice in all, the pool\'s resend spent from its attempts (was: a retry more, three runs)', async () => {
    const { server, relay, held } = await fourCut({ maxAttempts: 2, backoff: () => 20, budget: new RetryBudget() });
    await eventually(() => server.calls.Hold, (n) => n === 8); // each sent again once, by the pool
    await eventually(() => server.held.size, (n) => n === 4);
    await relay.resetConnections();
    for (const r of await held) expect((r as grpc.ServiceError).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.calls.Hold).toBe(8);
  });
});
