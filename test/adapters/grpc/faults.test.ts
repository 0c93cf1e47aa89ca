/**
 * The guarded client against dead and misbehaving peers (seed 003): a blackholed target, a
 * refused port, a peer that accepts TCP and never speaks HTTP/2, a server killed with calls in
 * flight, a server restarted, a server answering application errors, stream resets, a silent peer
 * and a graceful GOAWAY. Connections are counted at the peer; nothing may be left open.
 */
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { ChannelConnectError, GrpcGuard, type GrpcGuardOptions, METADATA_CODE, METADATA_RETRY_AFTER } from '../../../src/adapters/grpc/index.js';
import { classify } from '../../../src/core/classify.js';
import { ConnectTimeoutError, ConnectionGoneError, HostUnavailableError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { http2Peer } from '../../../src/testing/http2-peer.js';
import { ManualClock, flushMicrotasks } from '../../../src/testing/manual-clock.js';
import { TcpPeer, refusing } from '../../../src/testing/tcp-peers.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer, echoService, failure } from './helpers.js';

const CONNECT_TIMEOUT = 300;
const cleanup = leakCheckEach();

/** Closes `guard` and checks it left no channel, connect attempt or call behind. */
async function closed(guard: GrpcGuard): Promise<void> {
  await guard.close();
  expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
}

function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient; breaker: HostBreaker } {
  const breaker = options.breaker ?? new HostBreaker({ minOutage: 0, openDuration: 30_000 }); // the classic count-only rules
  const guard = new GrpcGuard({ connectTimeout: CONNECT_TIMEOUT, retry: false, closeTimeout: 100, ...options, breaker });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => closed(guard));
  cleanup.push(() => client.close());
  return { guard, client, breaker };
}

async function timedAll<T>(ps: Array<Promise<T>>): Promise<{ ms: number; results: Array<PromiseSettledResult<T>> }> {
  const t0 = performance.now();
  const results = await Promise.allSettled(ps);
  return { ms: performance.now() - t0, results };
}

function reasons<T>(results: Array<PromiseSettledResult<T>>): Array<grpc.ServiceError & { cause?: unknown }> {
  return results.map((r) => {
    if (r.status === 'fulfilled') throw new Error('a call succeeded');
    return r.reason as grpc.ServiceError & { cause?: unknown };
  });
}

describe('grpc guard: a target that cannot be reached', () => {
  it('50 calls to a blackholed target share one bounded dial and fail together (phase tcp)', async () => {
    const peer = await blackhole();
    cleanup.push(() => peer.close());
    const { client, breaker } = setup(peer.address);
    const { ms, results } = await timedAll(Array.from({ length: 50 }, () => call(client, 'Echo')));
    const errs = reasons(results);
    for (const err of errs) {
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.details).toMatch(/^dialguard: connect to .* timed out after 300 ms \(stalled in tcp\)/);
      expect(err.cause).toBeInstanceOf(ConnectTimeoutError);
      expect(err.metadata.get(METADATA_CODE)).toEqual(['DIALGUARD_CONNECT_TIMEOUT']);
      expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true, transient: true });
    }
    expect(ms).toBeLessThan(CONNECT_TIMEOUT + 1_000);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 0 });
  });

  it('a refused port fails with grpc-js\'s own reason; once the breaker opens, calls are refused at once with no dial', async () => {
    const peer = await refusing();
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 2, openDuration: 60_000 });
    const { client, guard } = setup(peer.address, { breaker, connectTimeout: 5_000 });
    for (let i = 0; i < 2; i++) {
      const err = await failure(call(client, 'Echo'));
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.details).toMatch(/^No connection established\. Last error: .*ECONNREFUSED/);
      expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true, code: 'ECONNREFUSED' });
    }
    expect(breaker.state(peer.address)?.state).toBe('open');
    expect(client.getChannel().getConnectivityState(true)).toBe(grpc.connectivityState.TRANSIENT_FAILURE);
    const dials = guard.stats().opened + breaker.stats().failed;
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) {
      const err = await failure(call(client, 'Echo'));
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.cause).toBeInstanceOf(HostUnavailableError);
      expect(err.details).toMatch(/^dialguard: .* is unavailable/);
      expect(err.metadata.get(METADATA_CODE)).toEqual(['DIALGUARD_HOST_UNAVAILABLE']);
      const retryAfter = Number(err.metadata.get(METADATA_RETRY_AFTER)[0]);
      expect(retryAfter).toBeGreaterThan(50_000);
      expect(retryAfter).toBeLessThanOrEqual(60_000);
      expect(classify(err)).toMatchObject({ kind: 'refused', transient: false });
    }
    // 20 refusals cost far less than one connect timeout: nothing waited on a dial.
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(guard.stats().opened + breaker.stats().failed).toBe(dials);
    expect(breaker.stats().refused).toBe(20);
  });

  it('a refused connect rejects with a ChannelConnectError (instanceof holds for the ServiceError) whose cause is the ECONNREFUSED (issue 12 defect 10)', async () => {
    const peer = await refusing();
    const { client, guard } = setup(peer.address, { breaker: new HostBreaker({ failureThreshold: 5 }) });
    const err = await failure(call(client, 'Echo'));
    expect(err).toBeInstanceOf(ChannelConnectError);
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ code: grpc.status.UNAVAILABLE, target: peer.address });
    expect(err.details).toMatch(/^No connection established\. Last error: .*ECONNREFUSED/);
    const cause = err.cause as NodeJS.ErrnoException & { address?: string; port?: number };
    expect(cause).toBeInstanceOf(Error);
    expect(cause).toMatchObject({ code: 'ECONNREFUSED', syscall: 'connect', port: Number(peer.address.split(':').at(-1)) });
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true, code: 'ECONNREFUSED' });
    expect(guard.stats().opened).toBe(0);
  });

  it('a peer that accepts TCP and never speaks HTTP/2 fails in one connect timeout (phase handshake), and its socket is closed', async () => {
    // Accepts and reads (so it sees the client hang up), never answers.
    const peer = await new TcpPeer('accept-and-read', {}, (socket) => socket.resume()).listen();
    cleanup.push(() => peer.close());
    const { client, breaker } = setup(peer.address);
    const err = await failure(call(client, 'Echo'));
    expect(err.cause).toBeInstanceOf(ConnectTimeoutError);
    expect(err.cause).toMatchObject({ phase: 'handshake', timeout: CONNECT_TIMEOUT });
    expect(breaker.state(peer.address)?.failures).toBe(1);
    // grpc-js cannot cancel its own connect; the guard destroys the socket it was handed.
    expect(await eventually(() => peer.openSockets, (n) => n === 0)).toBe(0);
    expect(peer.attempts).toBe(1);
  });

  it('a call never outlives its deadline, even while its channel is still connecting', async () => {
    const peer = await blackhole();
    cleanup.push(() => peer.close());
    const { client } = setup(peer.address, { connectTimeout: 5_000 });
    const t0 = performance.now();
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 150 }));
    expect(performance.now() - t0).toBeLessThan(150 + 1_000);
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(classify(err)).toMatchObject({ kind: 'timeout', transient: false });
  });

  it('a NaN deadline or an Invalid Date is already passed, as grpc-js reads it: cold or warm, the call fails at once; waitForReady calls back', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { client } = setup(server.address);
    for (const deadline of [Number.NaN, new Date(Number.NaN)]) {
      // Cold (no channel yet; was: grpc-js's "Deadline is too far in the future" thrown uncaught), then warm.
      for (const round of ['cold', 'warm']) {
        const t0 = performance.now();
        const err = await failure(call(client, 'Echo', 'x', { deadline }));
        expect(err.code, `${String(deadline)} ${round}`).toBe(grpc.status.DEADLINE_EXCEEDED);
        expect(performance.now() - t0).toBeLessThan(1_000);
        await call(client, 'Echo');
      }
    }
    const idle = setup('127.0.0.1:1'); // never ready
    const t0 = performance.now();
    const waited = await new Promise<Error | undefined>((resolve) => idle.client.waitForReady(Number.NaN, resolve)); // was: never called back
    expect(waited).toBeInstanceOf(Error);
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(server.calls.Echo).toBe(4);
  });

  it('an ipv4: list whose first address is dead (and open for its own clients) is served by its live one, as grpc-js alone', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const dead = await refusing();
    cleanup.push(() => dead.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const direct = setup(dead.address, { breaker });
    await failure(call(direct.client, 'Echo'));
    expect(breaker.state(dead.address)?.state).toBe('open');
    const list = setup(`ipv4:${dead.address},${server.address}`, { breaker });
    expect(String(await call(list.client, 'Echo', 'served'))).toBe('served'); // was: refused, keyed by the dead first address
  });

  it('three calls cancelled while connecting to a healthy server count against nothing', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 1 });
    const { client } = setup(server.address, { breaker });
    for (let i = 0; i < 3; i++) {
      const err = await failure(call(client, 'Echo', 'x', { onCall: (c) => c.cancel() }));
      expect(err.code).toBe(grpc.status.CANCELLED);
    }
    expect(breaker.stats().failed).toBe(0);
    expect(String(await call(client, 'Echo', 'ok'))).toBe('ok');
  });
});

describe('grpc guard: a server that dies (seed 003, S5)', () => {
  it('killed with 16 calls in flight: all released within one connect timeout, and calls queued after it settle in one shared dial', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard, breaker } = setup(relay.address);
    await call(client, 'Echo');
    const inFlight = Array.from({ length: 16 }, () => failure(call(client, 'Hold')));
    await eventually(() => server.held.size, (n) => n === 16);
    const port = relay.port;
    await relay.kill();
    const t0 = performance.now();
    const released = await Promise.all(inFlight);
    expect(performance.now() - t0).toBeLessThan(CONNECT_TIMEOUT);
    for (const err of released) {
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(classify(err)).toMatchObject({ kind: 'connection', connectionDead: true });
    }
    expect(guard.stats()).toMatchObject({ connections: 0, leases: 0 });

    // The address goes dark (a pod gone from the network): calls queued now share one dial.
    const dark = await blackhole({ port });
    cleanup.push(() => dark.close());
    const failedBefore = breaker.stats().failed;
    const queued = await timedAll(Array.from({ length: 16 }, () => call(client, 'Echo')));
    expect(queued.ms).toBeLessThan(CONNECT_TIMEOUT + 1_000);
    for (const err of reasons(queued.results)) expect(err.cause).toBeInstanceOf(ConnectTimeoutError);
    expect(breaker.stats().failed - failedBefore).toBe(1);
    expect(relay.attempts).toBe(1);
  });

  it('an idempotent call whose server sent its headers, then died: fails at once, UNAVAILABLE on a dead connection, no dial for it (it could never be resent)', async () => {
    // A server that answers with headers, then holds the call (until its connection dies).
    const server = new grpc.Server();
    let runs = 0;
    const answering = { Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request) } as Record<string, grpc.UntypedHandleCall>;
    answering.Hold = (c: grpc.ServerUnaryCall<Buffer, Buffer>) => {
      runs++;
      c.sendMetadata(new grpc.Metadata());
    };
    for (const name of ['Fail', 'Count', 'Chat']) answering[name] = () => {};
    server.addService(echoService, answering);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    cleanup.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
    const relay = await countingRelay({ host: '127.0.0.1', port });
    cleanup.push(() => relay.close());
    const { client } = setup(relay.address, { idempotent: () => true });
    await call(client, 'Echo');
    let headers = 0;
    const answered = failure(call(client, 'Hold', 'x', { onCall: (c) => c.on('metadata', () => void headers++) }));
    await eventually(() => headers, (n) => n === 1);
    await relay.kill(); // its connection reset, its port closed
    const err = await answered;
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false }); // was a dial's ECONNREFUSED: kind 'dial', notSent true
    expect(relay.attempts).toBe(1); // was 2: a redial for a call committed to the dead channel
    expect(runs).toBe(1);
  });

  it('restarted: after the open window one probe gets through and traffic resumes on one new connection', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const clock = new ManualClock();
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 2, openDuration: 30_000, clock });
    const { client, guard } = setup(relay.address, { breaker });
    await call(client, 'Echo');
    await relay.kill();
    await eventually(() => guard.stats().connections, (n) => n === 0);
    for (let i = 0; i < 2; i++) expect(classify(await failure(call(client, 'Echo'))).kind).toBe('dial');
    expect(breaker.state(relay.address)?.state).toBe('open');

    await relay.listen(); // back on the same port, but the window is still open
    for (let i = 0; i < 5; i++) expect((await failure(call(client, 'Echo'))).cause).toBeInstanceOf(HostUnavailableError);
    expect(relay.attempts).toBe(1);

    clock.advance(30_000); // nothing sleeps through the window
    expect(String(await call(client, 'Echo', 'probe'))).toBe('probe');
    expect(breaker.state(relay.address)?.state).toBe('closed');
    const replies = await Promise.all(Array.from({ length: 16 }, (_, i) => call(client, 'Echo', String(i))));
    expect(replies.map(String)).toEqual(Array.from({ length: 16 }, (_, i) => String(i)));
    expect(relay.attempts).toBe(2); // the first connection and the probe's, which everyone rides
    expect(breaker.stats()).toMatchObject({ probesGranted: 1, succeeded: 2 });
  });
});

describe('grpc guard: what a status does to the channel', () => {
  it.each([
    [grpc.status.NOT_FOUND, 'no such key'],
    [grpc.status.PERMISSION_DENIED, 'denied'],
    [grpc.status.UNAVAILABLE, 'server is draining'],
    [grpc.status.RESOURCE_EXHAUSTED, 'quota'],
    [grpc.status.INTERNAL, 'bug'],
  ])('an application status %i reaches the caller; the breaker and the channel stay', async (code, details) => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 1 });
    const { client, guard } = setup(relay.address, { breaker });
    for (let i = 0; i < 5; i++) {
      const err = await failure(call(client, 'Fail', `${code}:${details}`));
      expect({ code: err.code, details: err.details }).toEqual({ code, details });
      expect(err.cause).toBeUndefined();
    }
    expect(String(await call(client, 'Echo', 'still'))).toBe('still');
    expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 1, opened: 0 });
    expect(relay.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 0, opened: 1 });
  });

  it.each([
    ['ENHANCE_YOUR_CALM (RESOURCE_EXHAUSTED)', http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, grpc.status.RESOURCE_EXHAUSTED],
    ['REFUSED_STREAM (UNAVAILABLE)', http2.constants.NGHTTP2_REFUSED_STREAM, grpc.status.UNAVAILABLE],
    ['CANCEL (CANCELLED)', http2.constants.NGHTTP2_CANCEL, grpc.status.CANCELLED],
  ])('a stream reset %s fails that call and drops nothing', async (_name, rst, code) => {
    const peer = await http2Peer();
    cleanup.push(() => peer.close());
    peer.rstStreams(rst);
    const { client, guard } = setup(peer.address);
    for (let i = 0; i < 3; i++) {
      const err = await failure(call(client, 'Echo'));
      expect(err.code).toBe(code);
      expect(classify(err).connectionDead).toBe(false);
    }
    expect(peer.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 0, connections: 1 });
  });

  it('DEADLINE_EXCEEDED on the wire drops nothing', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address);
    await call(client, 'Echo');
    const errs = await Promise.all(Array.from({ length: 4 }, () => failure(call(client, 'Hold', 'x', { deadline: Date.now() + 100 }))));
    for (const err of errs) expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    await call(client, 'Echo');
    expect(relay.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 0, connections: 1 });
  });

  it('a graceful GOAWAY retires the channel: calls in flight finish, new calls open a new one', async () => {
    const peer = await http2Peer({
      handler: (stream) => {
        // A minimal grpc answer after 100 ms: headers, one empty message, OK trailers.
        setTimeout(() => {
          if (stream.destroyed) return;
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
          stream.end(Buffer.from([0, 0, 0, 0, 2, 0x6f, 0x6b]));
        }, 100);
      },
    });
    cleanup.push(() => peer.close());
    const { client, guard } = setup(peer.address);
    const retired: string[] = [];
    guard.on('retired', (e) => retired.push(e.reason));
    const first = call(client, 'Echo');
    await eventually(() => peer.streams, (n) => n === 1);
    peer.goaway();
    expect(String(await first)).toBe('ok');
    expect(retired).toEqual(['goaway']);
    expect(String(await call(client, 'Echo'))).toBe('ok');
    expect(peer.attempts).toBe(2);
    expect(guard.stats().gone).toBe(0);
  });

  it('keep-alive finds a silent peer: the call riding it is released and the channel is gone', async () => {
    const peer = await http2Peer({ handler: () => {} });
    cleanup.push(() => peer.close());
    const { client, guard } = setup(peer.address, { keepAliveInterval: 150, keepAliveTimeout: 150 });
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 2_000, (e) => (e ? reject(e) : resolve())));
    const held = failure(call(client, 'Hold'));
    await eventually(() => peer.streams, (n) => n === 1);
    const t0 = performance.now();
    peer.silence();
    const err = await held;
    expect(performance.now() - t0).toBeLessThan(300 + 1_000);
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(classify(err).connectionDead).toBe(true);
    expect(guard.stats().gone + guard.stats().closed).toBeGreaterThanOrEqual(1);
    expect(guard.stats().connections).toBe(0);
  });
});

describe('grpc guard: channel identity and lifetime', () => {
  it('a late failure on a retired channel does not evict its replacement', async () => {
    // A raw HTTP/2 peer speaking just enough grpc: each stream is answered when released.
    const pending: Array<() => void> = [];
    const peer = await http2Peer({
      handler: (stream) => {
        pending.push(() => {
          if (stream.destroyed) return;
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
          stream.end(Buffer.from([0, 0, 0, 0, 2, 0x6f, 0x6b]));
        });
      },
    });
    cleanup.push(() => peer.close());
    const relay = await countingRelay(peer);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address, { keepAliveInterval: 100, keepAliveTimeout: 100 });
    const old = failure(call(client, 'Echo'));
    await eventually(() => pending.length, (n) => n === 1);
    peer.goaway(); // channel 1 retired; its call stays on it
    await eventually(() => guard.stats().connections, (n) => n === 1);
    const fresh = call(client, 'Echo');
    await eventually(() => pending.length, (n) => n === 2);
    pending[1]!();
    expect(String(await fresh)).toBe('ok');
    expect(relay.attempts).toBe(2);
    relay.silence(0); // channel 1's peer goes quiet: keep-alive finds its transport dead, late
    expect(classify(await old).connectionDead).toBe(true);
    const after = call(client, 'Echo');
    await eventually(() => pending.length, (n) => n === 3);
    pending[2]!();
    expect(String(await after)).toBe('ok');
    expect(relay.attempts).toBe(2); // channel 2 was not evicted: no third connection
  });

  it('a channel no call has used for idleTimeout is closed at the next sweep, and its connection with it', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const clock = new ManualClock();
    const { client, guard } = setup(relay.address, { clock, idleTimeout: 60_000, sweepInterval: 1_000 });
    await call(client, 'Echo');
    await flushMicrotasks(); // the pool's bookkeeping of that call, right behind its answer
    expect(relay.openSockets).toBe(1);
    clock.advance(61_000);
    await call(client, 'Echo'); // sweeps first: the idle channel goes, a new one serves the call
    expect(relay.attempts).toBe(2);
    expect(await eventually(() => relay.openSockets, (n) => n === 1)).toBe(1);
    expect(guard.stats()).toMatchObject({ opened: 2, closed: 1, connections: 1 });
  });
});

describe('grpc guard: a released call says why', () => {
  it('a call released because a sibling proved the channel dead carries ConnectionGoneError', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client } = setup(relay.address);
    const held = Array.from({ length: 4 }, () => failure(call(client, 'Hold')));
    await eventually(() => server.held.size, (n) => n === 4);
    await relay.kill();
    const errs = await Promise.all(held);
    const gone = errs.filter((e) => e.cause instanceof ConnectionGoneError);
    for (const e of gone) expect(e.details).toMatch(/^dialguard: connection #1 to .* is gone/);
    for (const e of errs) expect(classify(e)).toMatchObject({ kind: 'connection', connectionDead: true });
  });
});
