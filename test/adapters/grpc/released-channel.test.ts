/**
 * A pooled channel no client holds any more closes 10 s after its last client closed (or after
 * the guard's `idleTimeout`, when shorter), as grpc-js frees a subchannel no channel holds; a
 * client made again meanwhile with equal credentials and options rides it. Left to the idle
 * sweep, a channel whose identity no later client shares (a `createSsl()` per client, per-user
 * call credentials, a per-tenant option) stayed open and pinging for `idleTimeout` (10 min), and
 * then until some call ran the sweep: 500 clients made and closed left 500 connections, where
 * plain grpc-js left none (an outside review, r123). Counted at a relay in front of a stock
 * grpc-js server; the guard's timers on a manual clock.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ManualClock } from '../../../src/testing/manual-clock.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer } from './helpers.js';

const cleanup = leakCheckEach();

async function scene(options: GrpcGuardOptions = {}): Promise<{ clock: ManualClock; guard: GrpcGuard; relay: Awaited<ReturnType<typeof countingRelay>>; client: (agent: string) => EchoClient }> {
  const server = await echoServer();
  cleanup.push(() => server.close());
  const relay = await countingRelay(server);
  cleanup.push(() => relay.close());
  const clock = new ManualClock();
  const guard = new GrpcGuard({ breaker: new HostBreaker({ clock }), clock, closeTimeout: 100, ...options });
  cleanup.push(() => guard.close());
  // Each agent string is an identity of its own: options that differ never share a channel.
  const client = (agent: string): EchoClient => new EchoClient(relay.address, grpc.credentials.createInsecure(), guard.clientOptions({ 'grpc.primary_user_agent': agent }));
  return { clock, guard, relay, client };
}

describe('grpc guard: a channel no client holds any more', () => {
  it('closes 10 s after its last client closed, one per identity; none before', async () => {
    const { clock, guard, relay, client } = await scene();
    for (let i = 0; i < 5; i++) {
      const c = client(`tenant-${i}`);
      await call(c, 'Echo', `call ${i}`);
      c.close();
    }
    expect(relay.attempts).toBe(5);
    expect(guard.stats().connections).toBe(5);
    clock.advance(9_999);
    expect(guard.stats().connections).toBe(5);
    clock.advance(1);
    // Was 5 until idleTimeout (10 min) and then until a call swept them.
    expect(await eventually(() => relay.openSockets, (n) => n === 0, 300)).toBe(0);
    expect(guard.stats().connections).toBe(0);
  });

  it('a client made again meanwhile with the same identity rides it: no new connection, and it stays', async () => {
    const { clock, guard, relay, client } = await scene();
    const first = client('per-request');
    await call(first, 'Echo', 'one');
    first.close();
    clock.advance(5_000);
    const second = client('per-request');
    cleanup.push(() => second.close());
    await call(second, 'Echo', 'two');
    clock.advance(10_000); // past the first release's linger: the second client holds the channel
    expect(guard.stats().connections).toBe(1);
    expect(String(await call(second, 'Echo', 'three'))).toBe('three');
    expect(relay.attempts).toBe(1);
  });

  it('the last release counts, and a shorter idleTimeout is the wait', async () => {
    const { clock, guard, client } = await scene({ idleTimeout: 2_000 });
    const first = client('t');
    await call(first, 'Echo');
    first.close();
    clock.advance(1_500);
    const second = client('t');
    await call(second, 'Echo');
    second.close(); // released again: 2 s from now, not from the first close
    clock.advance(1_000);
    expect(guard.stats().connections).toBe(1);
    clock.advance(1_000);
    // Within 300 ms of real time: grpc-js's own idle timer (2 s, real) has no part in it.
    expect(await eventually(() => guard.stats().connections, (n) => n === 0, 300)).toBe(0);
  });
});
