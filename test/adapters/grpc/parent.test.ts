/**
 * A guarded call made inside a server handler with `{ parent: call }` honours its parent as grpc-js
 * does (resolving-call.js): the parent's deadline bounds it (the DEADLINE flag) and the parent's
 * cancellation ends it with CANCELLED "Cancelled by parent call" (the CANCELLATION flag), for the
 * whole of its life: while it waits for a channel (wait-for-ready to a backend that is down, or a
 * connect that never completes) as much as on a channel. Before, only the grpc-js call on the
 * channel saw the parent: a wait-for-ready child to a dead backend stayed pending until the
 * backend came back (then ran, after its caller had given up), and a child waiting on a connect
 * that hung was held for `connectTimeout`, not the parent's deadline.
 *
 * A stock grpc-js front server's handler calls a guarded backend client with `{ parent: call }`.
 * Each test counts what the backend saw (dials at the breaker or the peer, calls at its handler)
 * once it is reachable again, not only how long the child took, and checks the child left no
 * listener on its parent.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { acceptAndHold, refusing } from '../../../src/testing/tcp-peers.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, EchoServer, echoService } from './helpers.js';

const cleanup = leakCheckEach();
const PARENT_CANCELLED = 'Cancelled by parent call';

/** How the child call ended, seen from the front server's handler. */
interface Child {
  code: grpc.status;
  details: string;
  /** performance.now() when the child's callback ran. */
  at: number;
  /** The parent's 'cancelled' listeners before the child was made, and when it ended. */
  listenersBefore: number;
  listenersAfter: number;
}

/**
 * A stock grpc-js server whose Echo handler calls `backend.Echo` with `{ parent: call }` (and
 * `options`), waitForReady when asked, and answers with the child's outcome.
 */
async function frontServer(
  backend: EchoClient,
  options: { waitForReady: boolean; propagate_flags?: number },
): Promise<{ client: EchoClient; started: Promise<void>; child: Promise<Child> }> {
  let started!: () => void;
  let ended!: (child: Child) => void;
  const startedP = new Promise<void>((resolve) => (started = resolve));
  const child = new Promise<Child>((resolve) => (ended = resolve));
  const server = new grpc.Server();
  server.addService(echoService, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const listenersBefore = call.listenerCount('cancelled');
      const metadata = new grpc.Metadata(options.waitForReady ? { waitForReady: true } : {});
      const callOptions: grpc.CallOptions = { parent: call };
      if (options.propagate_flags !== undefined) callOptions.propagate_flags = options.propagate_flags;
      backend.Echo(call.request, metadata, callOptions, (err, res) => {
        ended({ code: err?.code ?? grpc.status.OK, details: err?.details ?? '', at: performance.now(), listenersBefore, listenersAfter: call.listenerCount('cancelled') });
        cb(err, res);
      });
      started();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  cleanup.push(() => server.forceShutdown());
  const client = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  cleanup.push(() => client.close());
  return { client, started: startedP, child };
}

/** A guarded backend client to `address` (a breaker that never opens, no retries). */
function guardedBackend(address: string, connectTimeout: number): { guard: GrpcGuard; backend: EchoClient; breaker: HostBreaker } {
  const breaker = new HostBreaker({ failureThreshold: 100 });
  const guard = new GrpcGuard({ connectTimeout, closeTimeout: 100, retry: false, breaker });
  // A short reconnect backoff: the backend, once back, is reached in ms, not grpc's 1 s.
  const backend = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions({ 'grpc.initial_reconnect_backoff_ms': 50 }));
  cleanup.push(async () => {
    await guard.close();
    expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
  });
  cleanup.push(() => backend.close());
  return { guard, backend, breaker };
}

/** `p`, or a failure naming `what` once `ms` passed (the timer cleared either way). */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** One front call; resolves with its error (or null). */
function frontCall(client: EchoClient, options: grpc.CallOptions): { call: grpc.ClientUnaryCall; result: Promise<grpc.ServiceError | null> } {
  let call!: grpc.ClientUnaryCall;
  const result = new Promise<grpc.ServiceError | null>((resolve) => {
    call = client.Echo(Buffer.from('front'), new grpc.Metadata(), options, (err) => resolve(err));
  });
  return { call, result };
}

/**
 * The backend comes up on `port`, and a fresh wait-for-ready call (no parent) reaches it: the
 * channel is READY, so a child still waiting would have run by now too. Returns the calls the
 * backend's handler saw.
 */
async function backendBack(backend: EchoClient, port: number): Promise<number> {
  const server = new EchoServer();
  server.port = port;
  await server.listen();
  cleanup.push(() => server.close());
  await new Promise<void>((resolve, reject) =>
    backend.Echo(Buffer.from('after'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 5_000 }, (err) => (err ? reject(err) : resolve())),
  );
  return server.calls.Echo;
}

describe('grpc guard: a child call honours its parent (deadline and cancellation) while it waits for a channel', () => {
  it("deadline: a waitForReady child to a backend that is down ends at the parent's deadline (DEADLINE flag), and is never sent when the backend is back", async () => {
    const peer = await refusing();
    const { backend, breaker } = guardedBackend(peer.address, 1_000);
    const front = await frontServer(backend, { waitForReady: true, propagate_flags: grpc.propagate.DEADLINE });
    const t0 = performance.now();
    const { result } = frontCall(front.client, { deadline: Date.now() + 300 });
    await front.started;
    const child = await within(front.child, 3_000, 'the child call');
    const ms = child.at - t0;
    // As grpc-js: the earlier of its own deadline (none) and the parent's, on the wait for a channel too.
    expect(child.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(1_300);
    expect((await result)?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(child.listenersAfter).toBe(child.listenersBefore);
    expect(breaker.stats().succeeded).toBe(0);
    // Back up: only the fresh call reaches the handler; one connect succeeded, for it.
    expect(await backendBack(backend, peer.port)).toBe(1);
    expect(breaker.stats().succeeded).toBe(1);
  });

  it('cancel: a waitForReady child to a backend that is down ends "Cancelled by parent call" when the front client cancels, and is never sent when the backend is back', async () => {
    const peer = await refusing();
    const { backend, breaker } = guardedBackend(peer.address, 1_000);
    const front = await frontServer(backend, { waitForReady: true }); // grpc's default flags
    const { call, result } = frontCall(front.client, {}); // no deadline anywhere: only the cancel can end it
    await front.started;
    // The child's first dial failed: it now waits for a channel (wait-for-ready).
    expect(await eventually(() => breaker.stats().failed, (n) => n >= 1)).toBeGreaterThanOrEqual(1);
    const t0 = performance.now();
    call.cancel();
    const child = await within(front.child, 3_000, 'the child call');
    expect(child).toMatchObject({ code: grpc.status.CANCELLED, details: PARENT_CANCELLED });
    expect(child.at - t0).toBeLessThan(1_000);
    expect((await result)?.code).toBe(grpc.status.CANCELLED);
    expect(child.listenersAfter).toBe(child.listenersBefore);
    expect(await backendBack(backend, peer.port)).toBe(1);
    expect(breaker.stats().succeeded).toBe(1);
  });

  it("a child without waitForReady, to a backend that accepts TCP and never answers, ends by the parent's deadline (default flags), not connectTimeout, after one dial", async () => {
    const peer = await acceptAndHold();
    cleanup.push(() => peer.close());
    const { backend, breaker } = guardedBackend(peer.address, 4_000);
    const front = await frontServer(backend, { waitForReady: false });
    const t0 = performance.now();
    const { result } = frontCall(front.client, { deadline: Date.now() + 300 });
    await front.started;
    const child = await within(front.child, 3_000, 'the child call');
    const ms = child.at - t0;
    // Whichever grpc-js would see first at the parent's deadline: the parent's cancellation or the deadline itself.
    if (child.code === grpc.status.CANCELLED) expect(child.details).toBe(PARENT_CANCELLED);
    else expect(child.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(1_300);
    expect((await result)?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(child.listenersAfter).toBe(child.listenersBefore);
    expect(await eventually(() => peer.attempts, (n) => n >= 1)).toBe(1);
    // The shared connect carries on for its own bound; the child's end counts nothing against the host.
    expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 0 });
  });
});
