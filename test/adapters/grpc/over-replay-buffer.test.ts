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
    const { client, guard } = setup(address, { idempotent: () => true, retry: { maxAttempts: 2, backoff: () => 5_000, budget: null } });
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

  it('a stream that goes past the buffer while its call waits for the fresh channel ends with the old channel\'s status; the fresh channel and the call riding it are untouched', async () => {
    const id = (b: Buffer): Buffer => b;
    const bytes = { requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id };
    const service = {
      Sink: { path: '/t.S/Sink', requestStream: true, responseStream: false, ...bytes },
      Hold: { path: '/t.S/Hold', requestStream: false, responseStream: false, ...bytes },
    } as const;
    const seen = { Sink: 0, Hold: 0 };
    const held: Array<() => void> = [];
    const server = new grpc.Server();
    server.addService(service, {
      Sink: (c: grpc.ServerReadableStream<Buffer, Buffer>) => {
        seen.Sink++;
        c.on('data', () => {});
        c.on('error', () => {});
      },
      Hold: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        seen.Hold++;
        held.push(() => cb(null, c.request));
      },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    cleanup.push(() => server.forceShutdown());
    const relay = await countingRelay({ host: '127.0.0.1', port });
    cleanup.push(() => relay.close());
    const guard = new GrpcGuard({ connectTimeout: 1_000, closeTimeout: 100, replayBufferSize: LIMIT, idempotent: () => true, retry: { maxAttempts: 2, backoff: () => 5_000, budget: null }, breaker: new HostBreaker({ failureThreshold: 100 }) });
    const Client = grpc.makeGenericClientConstructor(service, 'S');
    const client = new Client(relay.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => guard.close());
    cleanup.push(() => client.close());
    const hold = (body: string): Promise<string> =>
      new Promise((resolve, reject) => client.makeUnaryRequest(service.Hold.path, id, id, Buffer.from(body), (e, r) => (e ? reject(e) : resolve(String(r)))));
    const warm = hold('warm'); // a channel that served: its calls may go back when it dies
    await eventually(() => held.length, (n) => n === 1);
    held.splice(0)[0]!();
    expect(await warm).toBe('warm');
    let sink!: grpc.ClientWritableStream<Buffer>;
    const sunk = new Promise<grpc.ServiceError | undefined>((resolve) => {
      sink = client.makeClientStreamRequest(service.Sink.path, id, id, new grpc.Metadata(), {}, (err) => resolve(err ?? undefined));
    });
    sink.write(Buffer.alloc(600)); // within the buffer: resendable
    const small = hold('small');
    await eventually(() => seen.Sink + seen.Hold, (n) => n === 3);
    const gone: number[] = [];
    guard.on('gone', (e) => {
      gone.push(e.id);
      if (gone.length === 1) sink.write(Buffer.alloc(600)); // past the buffer, while both wait for a fresh channel
    });
    await relay.resetConnections();
    const err = await sunk;
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    await eventually(() => seen.Hold, (n) => n === 3); // the small call, resent on the fresh channel
    for (const answer of held.splice(0)) answer();
    expect(await small).toBe('small');
    expect(seen.Sink).toBe(1);
    expect(gone).toHaveLength(1); // was 2: the fresh channel dropped too, the small call with it
  });
});

