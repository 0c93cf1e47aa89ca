/**
 * A call larger than `replayBufferSize` that no grpc-js call ever took (no channel could be had)
 * has sent nothing: its first attempt is still to come, so it waits for a channel (waitForReady)
 * and is retried like any never-sent call. Before, passing the buffer's limit meant "never sent
 * again" even with every byte still queued: a 300 000-byte call with waitForReady failed
 * UNAVAILABLE in 48 ms while its server restarted (raw grpc-js: served at ~1 s). Once a grpc-js
 * call has taken it, the limit holds: such a call is never sent again.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer, failure } from './helpers.js';

const cleanup = leakCheckEach();
const LIMIT = 1_024;
const BIG = 'x'.repeat(4 * LIMIT);

function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient; breaker: HostBreaker } {
  const breaker = new HostBreaker({ failureThreshold: 100 });
  const guard = new GrpcGuard({ connectTimeout: 1_000, closeTimeout: 100, replayBufferSize: LIMIT, retry: { backoff: () => 100, budget: null }, ...options, breaker });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(async () => {
    await guard.close();
    expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
  });
  cleanup.push(() => client.close());
  return { guard, client, breaker };
}

/** A server behind a relay that refuses now (its port closed): `up()` opens it. */
async function downServer() {
  const server = await echoServer();
  cleanup.push(() => server.close());
  const relay = await countingRelay(server);
  cleanup.push(() => relay.close());
  await relay.kill();
  return { address: relay.address, calls: () => server.calls.Echo + server.calls.Hold, up: () => relay.listen(), relay, server };
}

describe('grpc guard: a call over the replay buffer', () => {
  it('with waitForReady it waits for the server and is served once', async () => {
    const { address, calls, up } = await downServer();
    const { client, breaker } = setup(address, { retry: false });
    const reply = new Promise<Buffer>((resolve, reject) =>
      client.Echo(Buffer.from(BIG), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 4_000 }, (err, r) => (err ? reject(err) : resolve(r!))),
    );
    await eventually(() => breaker.stats().failed, (n) => n >= 1);
    await up();
    expect(String(await reply)).toBe(BIG);
    expect(calls()).toBe(1);
  });

  it('without it, a failed connect is retried for it as for any call (never sent), and it is served once', async () => {
    const { address, calls, up } = await downServer();
    const { client, breaker } = setup(address, { retry: { backoff: () => 300, budget: null } });
    const reply = call(client, 'Echo', BIG, { deadline: Date.now() + 4_000 });
    await eventually(() => breaker.stats().failed, (n) => n === 1);
    await up();
    expect(String(await reply)).toBe(BIG);
    expect(calls()).toBe(1);
  });

  it('once a grpc-js call took it, the limit holds: reset under it, it is not sent again, and a call riding with it is resent on the fresh channel as if alone', async () => {
    const { address, calls, up, relay, server } = await downServer();
    await up();
    const { client, guard } = setup(address, { idempotent: () => true, retry: false });
    expect(String(await call(client, 'Echo', 'warm'))).toBe('warm'); // a channel that served
    const big = failure(call(client, 'Hold', BIG));
    const small = call(client, 'Hold', 'small');
    await eventually(() => calls(), (n) => n === 3);
    await relay.resetConnections();
    expect((await big).code).toBe(grpc.status.UNAVAILABLE);
    // The small one went back and rides the fresh channel. Before, the big one boarded it too,
    // found it could not be sent again, and its failure there took the fresh channel down with
    // the small one on it ("connection #2 is gone").
    await eventually(() => server.held.size, (n) => n === 1);
    expect(calls()).toBe(4);
    server.releaseHeld();
    expect(String(await small)).toBe('small');
    expect(guard.stats()).toMatchObject({ gone: 1, connections: 1 });
  });
});
