/**
 * Wait-for-ready (issue 18, break 2), against a stock grpc-js server that comes up late on a port
 * that refused at first: `client.waitForReady()` sees the guarded channel move from
 * TRANSIENT_FAILURE back to CONNECTING and READY, and a call with `waitForReady` in its metadata
 * options waits for a connection until its deadline, the breaker deciding when a dial may happen.
 * Dials are counted at the breaker (every dial reports to it), never by time alone. A breaker
 * meant to open on one failed dial says `minOutage: 0` (issue 11's default holds a host closed
 * until its failed rounds span 1.5 s).
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { reconnectDelay } from '../../../src/adapters/grpc/channel-connector.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, EchoServer, call, failure } from './helpers.js';

const cleanup = leakCheckEach();
const { READY, CONNECTING, TRANSIENT_FAILURE } = grpc.connectivityState;

function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient; breaker: HostBreaker } {
  const breaker = options.breaker ?? new HostBreaker({ failureThreshold: 100 });
  const guard = new GrpcGuard({ connectTimeout: 1_000, closeTimeout: 100, retry: false, ...options, breaker });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(async () => {
    await guard.close();
    expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
  });
  cleanup.push(() => client.close());
  return { guard, client, breaker };
}

/** A port that refuses now, and a stock grpc-js server that starts listening on it after `ms`. */
async function lateServer(ms: number): Promise<{ address: string; server: EchoServer; up: Promise<void> }> {
  const peer = await refusing();
  const server = new EchoServer();
  server.port = peer.port;
  cleanup.push(() => server.close());
  const up = new Promise<void>((resolve, reject) => setTimeout(() => server.listen().then(() => resolve(), reject), ms));
  cleanup.push(() => up);
  return { address: peer.address, server, up };
}

/** Every state the channel reports from `from` on, until `until` is seen or `deadline` passes. */
function recordStates(channel: grpc.Channel | grpc.ChannelInterface, until: grpc.connectivityState, deadline: number): Promise<grpc.connectivityState[]> {
  const seen: grpc.connectivityState[] = [];
  return new Promise((resolve) => {
    const next = (state: grpc.connectivityState): void => {
      seen.push(state);
      if (state === until) return resolve(seen);
      channel.watchConnectivityState(state, deadline, (err) => (err ? resolve(seen) : next(channel.getConnectivityState(false))));
    };
    next(channel.getConnectivityState(false));
  });
}

describe('grpc guard: wait-for-ready (issue 18 break 2)', () => {
  it('client.waitForReady: a server that comes up at 0.6 s is ready at about 1 s; the channel went TRANSIENT_FAILURE -> CONNECTING -> READY, in 2 dials', async () => {
    const { address, up } = await lateServer(600);
    const { client, breaker } = setup(address);
    const t0 = performance.now();
    const states = recordStates(client.getChannel(), READY, Date.now() + 4_000);
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 4_000, (err) => (err ? reject(err) : resolve())));
    const ms = performance.now() - t0;
    await up;
    expect(ms).toBeGreaterThan(600);
    expect(ms).toBeLessThan(2_000); // grpc's 1 s reconnect backoff (±20 %), not the 4 s deadline
    const seen = await states;
    expect(seen.slice(-3)).toEqual([TRANSIENT_FAILURE, CONNECTING, READY]);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 1 });
    expect(String(await call(client, 'Echo', 'up'))).toBe('up');
  });

  it('a call with waitForReady waits for the late server and is served once; without it, it fails at once', async () => {
    const { address, server } = await lateServer(600);
    const { client, breaker } = setup(address);
    const plain = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 3_000 }));
    expect(plain.code).toBe(grpc.status.UNAVAILABLE);
    const metadata = new grpc.Metadata({ waitForReady: true });
    const t0 = performance.now();
    const res = await new Promise<Buffer>((resolve, reject) =>
      client.Echo(Buffer.from('waited'), metadata, { deadline: Date.now() + 4_000 }, (err, r) => (err ? reject(err) : resolve(r!))),
    );
    expect(String(res)).toBe('waited');
    expect(performance.now() - t0).toBeLessThan(3_000);
    expect(server.calls.Echo).toBe(1);
    // The plain call's dial, the ones the backoff allowed while the server was down, the one that worked.
    expect(breaker.stats().succeeded).toBe(1);
    expect(breaker.stats().failed).toBeLessThanOrEqual(3);
  });

  it('a waitForReady call to a host the breaker refuses waits until its deadline (DEADLINE_EXCEEDED), dialling nothing while refused', async () => {
    const peer = await refusing();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const { client } = setup(peer.address, { breaker });
    await failure(call(client, 'Echo'));
    expect(breaker.state(peer.address)?.state).toBe('open');
    const dials = breaker.stats().failed + breaker.stats().succeeded;
    const t0 = performance.now();
    const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
      client.Echo(Buffer.from('x'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 300 }, (e) => (e ? resolve(e) : reject(new Error('served')))),
    );
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    expect(breaker.stats().failed + breaker.stats().succeeded).toBe(dials);
  });

  it('a waitForReady call to a refused host is served once the breaker lets its probe through and the server is back', async () => {
    const { address, server, up } = await lateServer(150);
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 400 });
    const { client } = setup(address, { breaker });
    await failure(call(client, 'Echo'));
    expect(breaker.state(address)?.state).toBe('open');
    await up;
    const t0 = performance.now();
    const res = await new Promise<Buffer>((resolve, reject) =>
      client.Echo(Buffer.from('probed'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 4_000 }, (e, r) => (e ? reject(e) : resolve(r!))),
    );
    expect(String(res)).toBe('probed');
    expect(performance.now() - t0).toBeLessThan(2_500); // the open window and one reconnect backoff at most
    expect(server.calls.Echo).toBe(1);
    // The failed dial that opened it, then the probe that succeeded: nothing while it was open.
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 1 });
  });

  it('a waitForReady call still waiting when the guard closes ends then, not at its deadline', async () => {
    const peer = await refusing();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const { client, guard } = setup(peer.address, { breaker });
    await failure(call(client, 'Echo'));
    const t0 = performance.now();
    const ended = new Promise<grpc.ServiceError>((resolve, reject) =>
      client.Echo(Buffer.from('x'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 5_000 }, (e) => (e ? resolve(e) : reject(new Error('served')))),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    await guard.close();
    const err = await ended;
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
  });

  // An outside review: ordinary calls (retried by default) each made connects that failed, and
  // every failed connect was one more backoff step (1 s x 1.6^n): the standing's next connect lay
  // ~2 minutes ahead, so a waitForReady call (or client.waitForReady) missed a server back at
  // 1.5 s and failed at its deadline, 7 of 7 runs. A grpc-js channel takes one step per
  // reconnect round; connects made while a backoff runs no longer add to it.
  it('after 10 ordinary calls failed (with their retries), a waitForReady call is served soon after the server is back, not at its deadline', { timeout: 20_000 }, async () => {
    const { address, server, up } = await lateServer(3_000);
    const { client, breaker } = setup(address, { retry: undefined }); // the guard's default retries
    const t0 = performance.now();
    for (let i = 0; i < 10; i++) expect((await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 150 }))).code).not.toBe(grpc.status.OK);
    expect(performance.now() - t0).toBeLessThan(2_500); // all before the server is back
    const failedBefore = breaker.stats().failed;
    expect(failedBefore).toBeGreaterThanOrEqual(5); // the calls dialled (a call arriving in the pool's redial pace joins the next dial)
    const res = await new Promise<Buffer>((resolve, reject) =>
      client.Echo(Buffer.from('waited'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 12_000 }, (err, r) => (err ? reject(err) : resolve(r!))),
    );
    await up;
    expect(String(res)).toBe('waited');
    // The server is up at 3 s. Rounds at ~0, ~1 s (1 s ±20 %) and ~2.6 s (+1.6 s ±20 %), then
    // one at 3.1-5.2 s (+2.56 s ±20 %) finds it: the calls' own connects took no step.
    expect(performance.now() - t0).toBeLessThan(8_000); // was: DEADLINE_EXCEEDED at its 12 s deadline (5.4-5.6 s here)
    expect(server.calls.Echo).toBe(1);
    expect(breaker.stats().failed - failedBefore).toBeLessThanOrEqual(3); // one dial per round while it waited
  });

  it('reconnectDelay: grpc\'s backoff, 1 s then 1.6 x per failure, ±20 %, capped, and the channel options honoured', () => {
    expect(reconnectDelay({}, 1, () => 0.5)).toBe(1_000);
    expect(reconnectDelay({}, 2, () => 0.5)).toBeCloseTo(1_600);
    expect(reconnectDelay({}, 1, () => 0)).toBe(800);
    expect(reconnectDelay({}, 1, () => 1)).toBeCloseTo(1_200);
    expect(reconnectDelay({}, 100, () => 0.5)).toBe(120_000);
    expect(reconnectDelay({ 'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 150 }, 3, () => 0.5)).toBe(150);
    expect(reconnectDelay({ 'grpc.initial_reconnect_backoff_ms': -1 }, 1, () => 0.5)).toBe(1_000);
  });
});
