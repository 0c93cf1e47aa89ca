/**
 * Retries and deadlines: each attempt gets the remaining deadline (read at the server), only what
 * is safe is retried (streaming calls too, until the server answers), a refusal ends the call, and
 * no call outlives the caller's deadline; the pool resends an idempotent call whose connection
 * died under it on a fresh channel.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { RetryBudget } from '../../../src/retry/budget.js';
import { callTrace, dialTrace } from '../../../src/observe/tracing.js';
import { type RetryEvents, onRetryEvent } from '../../../src/retry/retry.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { acceptAndHold, refusing } from '../../../src/testing/tcp-peers.js';
import { eventually } from '../../helpers/eventually.js';
import { whileTraced } from '../../helpers/tracing.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

/** Closes `guard` and checks it left no channel, connect attempt or call behind. */
async function closed(guard: GrpcGuard): Promise<void> {
  await guard.close();
  expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
}

const everything = (): boolean => true;

function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient; breaker: HostBreaker } {
  const breaker = options.breaker ?? new HostBreaker({ minOutage: 0, openDuration: 30_000 }); // the classic count-only rules
  const guard = new GrpcGuard({
    connectTimeout: 1_000,
    closeTimeout: 100,
    retry: { backoff: () => 100, budget: null },
    ...options,
    breaker,
  });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => closed(guard));
  cleanup.push(() => client.close());
  return { guard, client, breaker };
}

describe('grpc guard: retries', () => {
  /**
   * A opens the channel (its events run in A's context); B is held when the peer dies under it
   * and is back 50 ms later: the context each start of `channel` ran in while B was served again.
   */
  async function contextsOfResentCall(channel: Parameters<typeof whileTraced>[0]): Promise<Array<string | undefined>> {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { client } = setup(server.address, { idempotent: everything });
    const als = new AsyncLocalStorage<string>();
    const call = (name: string, method: 'Echo' | 'Hold'): Promise<unknown> =>
      als.run(name, () => new Promise((resolve, reject) => client[method](Buffer.from(name), new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (err: grpc.ServiceError | null, v?: Buffer) => (err === null ? resolve(String(v)) : reject(err)))));
    expect(await call('A', 'Echo')).toBe('A');
    const seen: Array<string | undefined> = [];
    await whileTraced(channel, { start: () => void seen.push(als.getStore()) }, async () => {
      const b = call('B', 'Hold');
      await eventually(() => server.held.size, (n) => n === 1);
      const port = server.port;
      await server.close();
      await new Promise((resolve) => setTimeout(resolve, 50));
      await server.listen(port);
      expect(await eventually(() => server.held.size, (n) => n === 1, 4_000)).toBe(1);
      server.releaseHeld();
      expect(await b).toBe('B');
    });
    return seen;
  }

  it('a retried call\'s loop runs in its own caller\'s context, not in that of the call that opened the channel (was: the first\'s, so its spans went into another trace; an outside review)', async () => {
    expect(await contextsOfResentCall(callTrace)).toEqual(['B']);
  });

  it('a call resent after its peer died redials in its own caller\'s context: its dial span is in its trace, not in that of the call that opened the channel (was: the opener\'s; an outside review)', async () => {
    const dials = await contextsOfResentCall(dialTrace);
    expect(dials.length).toBeGreaterThan(0);
    expect(dials.filter((d) => d !== 'B')).toEqual([]);
  });

  it('a retried call that succeeds: its caller hears after the retry loop (its dialguard:call trace) has ended (was: before, so the call span outlived the caller\'s own; an outside review)', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const { client } = setup(server.address, { idempotent: everything });
    const order: string[] = [];
    await whileTraced(callTrace, { asyncEnd: () => void order.push('call traced') }, () =>
      new Promise<void>((resolve, reject) =>
        client.Echo(Buffer.from('hi'), new grpc.Metadata(), { deadline: Date.now() + 3_000 }, (err: grpc.ServiceError | null) => {
          order.push('caller');
          if (err === null) resolve();
          else reject(err);
        }),
      ),
    );
    expect(server.calls.Echo).toBe(2);
    expect(order).toEqual(['call traced', 'caller']);
  });

  it('each attempt gets the remaining deadline, never a fresh one', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 2, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const { client } = setup(server.address, { idempotent: everything });
    expect(String(await call(client, 'Echo', 'hi', { deadline: Date.now() + 3_000 }))).toBe('hi');
    expect(server.calls.Echo).toBe(3);
    const [d1, d2, d3] = server.deadlines as [number, number, number];
    expect(d1).toBeLessThanOrEqual(3_000);
    // Each retry waited 100 ms first: its deadline is what was left, not another 3 s.
    expect(d2).toBeLessThanOrEqual(d1 - 100);
    expect(d3).toBeLessThanOrEqual(d2 - 100);
    expect(d3).toBeGreaterThan(1_000);
  });

  it('an interceptor of the caller\'s that adds a header adds it once on every attempt', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const guard = new GrpcGuard({ breaker: new HostBreaker(), idempotent: everything, retry: { backoff: () => 10, budget: null } });
    cleanup.push(() => closed(guard));
    const addToken: grpc.Interceptor = (options, next) =>
      new grpc.InterceptingCall(next(options), {
        start: (metadata, listener, go) => {
          metadata.add('x-token', 't');
          go(metadata, listener);
        },
      });
    const client = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions({ interceptors: [addToken] }));
    cleanup.push(() => client.close());
    expect(String(await call(client, 'Echo', 'hi'))).toBe('hi');
    expect(server.tokens).toEqual([['t'], ['t']]);
  });

  it('a failure the server may have seen is not retried for a method not declared idempotent', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const { client } = setup(server.address);
    const err = await failure(call(client, 'Echo'));
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' });
    expect(server.calls.Echo).toBe(1);
  });

  it('a server-streaming call is retried too, while the server has answered nothing', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const { client } = setup(server.address, { idempotent: everything });
    const got: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const s = client.Count(Buffer.from('3'), new grpc.Metadata(), { deadline: Date.now() + 3_000 });
      s.on('data', (d: Buffer) => got.push(String(d)));
      s.on('error', reject);
      s.on('end', () => resolve());
    });
    expect(got).toEqual(['0', '1', '2']);
    expect(server.calls.Count).toBe(2);
  });

  it('a streaming call the server has answered is never retried', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { client } = setup(server.address, { idempotent: everything });
    const got: string[] = [];
    const err = await failure(
      new Promise<void>((resolve, reject) => {
        const s = client.Count(Buffer.from('2:fail'), new grpc.Metadata(), { deadline: Date.now() + 3_000 });
        s.on('data', (d: Buffer) => got.push(String(d)));
        s.on('error', reject);
        s.on('end', () => resolve());
      }),
    );
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' });
    expect(got).toEqual(['0', '1']);
    expect(server.calls.Count).toBe(1);
  });

  it('a status the server chose is final, even for an idempotent method', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { client } = setup(server.address, { idempotent: everything });
    const err = await failure(call(client, 'Fail', `${grpc.status.UNAVAILABLE}:draining`));
    expect(err.details).toBe('draining');
    expect(server.calls.Fail).toBe(1);
  });

  it('a failed connect is retried for any method (never sent), and the call gets through once the server is back', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    await relay.kill(); // refused for now
    const { client, breaker } = setup(relay.address, { retry: { backoff: () => 300, budget: null } });
    const reply = call(client, 'Echo', 'late');
    await eventually(() => breaker.stats().failed, (n) => n === 1);
    await relay.listen();
    expect(String(await reply)).toBe('late');
    expect(server.calls.Echo).toBe(1);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 1 });
  });

  it('a refusal by the breaker ends the call at the first attempt', async () => {
    const peer = await refusing();
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 1 });
    const { client } = setup(peer.address, { breaker });
    // 1 dial, which opened the host: the call ends with that dial's own failure, not waiting a
    // backoff to be refused (or to probe after the window).
    expect(classify(await failure(call(client, 'Echo'))).kind).toBe('dial');
    const refusedBefore = breaker.stats().refused;
    const err = await failure(call(client, 'Echo'));
    expect(err.cause).toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats().refused - refusedBefore).toBe(1);
    expect(breaker.stats().failed).toBe(1);
  });

  it('retries against a blackholed target stop at the caller\'s deadline', async () => {
    const peer = await blackhole();
    cleanup.push(() => peer.close());
    const { client } = setup(peer.address, { connectTimeout: 200, retry: { backoff: () => 10, budget: null, maxAttempts: 10 } });
    const t0 = performance.now();
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 500 }));
    expect(performance.now() - t0).toBeLessThan(500 + 1_000);
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(classify(err)).toMatchObject({ kind: 'timeout', transient: false });
  });

  it("a retry that could not start before the deadline is not slept for: the caller gets the last attempt's own status (the deadline has not passed)", async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 5, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const { client } = setup(server.address, { idempotent: everything, retry: { backoff: () => 5_000, budget: null } });
    const t0 = performance.now();
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 1_000 }));
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(err).toMatchObject({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' }); // was DEADLINE_EXCEEDED, long before the deadline
    expect(server.calls.Echo).toBe(1);
  });

  it('an empty retry budget stops retries: the caller gets the last attempt\'s own status', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 5, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const budget = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 0 });
    const { client } = setup(server.address, { idempotent: everything, retry: { backoff: () => 10, budget } });
    const err = await failure(call(client, 'Echo'));
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' });
    expect(server.calls.Echo).toBe(1);
  });

  it('a caller that cancels during the backoff gets CANCELLED at once, and no further attempt runs', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    server.failNext = { count: 5, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    const { client } = setup(server.address, { idempotent: everything, retry: { backoff: () => 2_000, budget: null } });
    let unary: grpc.ClientUnaryCall | undefined;
    const pending = failure(call(client, 'Echo', 'x', { onCall: (c) => (unary = c) }));
    await eventually(() => server.calls.Echo, (n) => n === 1);
    const t0 = performance.now();
    unary!.cancel();
    const err = await pending;
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(err.code).toBe(grpc.status.CANCELLED);
    expect(server.calls.Echo).toBe(1);
  });
});

describe('grpc guard: a call resent on a fresh channel', () => {
  it('an idempotent call whose connection was reset under it is resent, and succeeds', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address, { idempotent: everything, retry: { maxAttempts: 2, backoff: () => 5_000, budget: null } });
    expect(String(await call(client, 'Echo', 'warm'))).toBe('warm'); // the channel works
    const held = Promise.all(Array.from({ length: 4 }, (_, i) => call(client, 'Hold', String(i))));
    await eventually(() => server.held.size, (n) => n === 4);
    await relay.resetConnections();
    // The pool went back for a fresh channel and resent all four.
    await eventually(() => server.calls.Hold, (n) => n === 8);
    await eventually(() => server.held.size, (n) => n === 4);
    server.releaseHeld();
    expect((await held).map(String)).toEqual(['0', '1', '2', '3']);
    expect(relay.attempts).toBe(2);
    expect(guard.stats()).toMatchObject({ gone: 1, connections: 1 });
  });

  it('an idempotent call on a channel that had served nothing is not resent by the pool when the connection dies: it may have died of the calls (with retry off, each fails once)', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address, { idempotent: everything, retry: false });
    const held = Array.from({ length: 4 }, (_, i) => failure(call(client, 'Hold', String(i))));
    await eventually(() => server.held.size, (n) => n === 4);
    await relay.resetConnections();
    for (const err of await Promise.all(held)) expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(server.calls.Hold).toBe(4); // was 16: each resent three times at once, no backoff, no budget
    expect(relay.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 1, turns: 0 });
  });

  it('a call that is not idempotent is released with the failure instead', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client } = setup(relay.address, { retry: false });
    const held = Array.from({ length: 4 }, () => failure(call(client, 'Hold')));
    await eventually(() => server.held.size, (n) => n === 4);
    await relay.resetConnections();
    for (const err of await Promise.all(held)) expect(classify(err)).toMatchObject({ kind: 'connection', connectionDead: true });
    expect(server.calls.Hold).toBe(4);
  });
});

describe('grpc guard: whole-call metrics (issue 12 defect 5)', () => {
  it('a call that succeeds on its second attempt settles ok, with an elapsed time covering the first attempt and the backoff', async () => {
    // A stock grpc-js server whose first answer takes 200 ms and relays a remote EOF (retried for
    // an idempotent method); the second answers at once.
    let answers = 0;
    const server = new grpc.Server();
    server.addService(echoService, {
      Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        answers++;
        if (answers === 1) setTimeout(() => cb({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' }), 200);
        else cb(null, c.request);
      },
      Hold: () => {},
      Fail: () => {},
      Count: () => {},
      Chat: () => {},
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    cleanup.push(() => server.forceShutdown());
    const { client } = setup(`127.0.0.1:${port}`, { idempotent: everything, retry: { backoff: () => 50, budget: null } });
    const settled: Array<RetryEvents['settled']> = [];
    const off = onRetryEvent('settled', (e) => settled.push(e));
    cleanup.push(off);
    const t0 = performance.now();
    expect(String(await call(client, 'Echo', 'twice'))).toBe('twice');
    // Only this call retried (another test's loop may still settle here, with other counts).
    const mine = (): Array<RetryEvents['settled']> => settled.filter((x) => x.attempts === 2);
    await eventually(() => mine().length, (n) => n === 1);
    const wall = performance.now() - t0;
    expect(answers).toBe(2);
    const [e] = mine();
    expect(e).toMatchObject({ ok: true, attempts: 2 });
    // The first attempt (200 ms at the server) and the backoff (50 ms) are inside it.
    expect(e!.elapsed).toBeGreaterThanOrEqual(250);
    expect(e!.elapsed).toBeLessThanOrEqual(wall);
  });
});

describe('grpc guard: a retry the deadline leaves no time for', () => {
  it('a server that is down fails the call as its last attempt did (UNAVAILABLE, as raw grpc-js), not DEADLINE_EXCEEDED long before the deadline', async () => {
    const peer = await refusing();
    cleanup.push(() => peer.close());
    // The next wait (2 s) would outlast the 300 ms deadline: the loop stops at once.
    const { client } = setup(peer.address, { retry: { backoff: () => 2_000, budget: null } });
    const t0 = performance.now();
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 300 }));
    expect(err.code).toBe(grpc.status.UNAVAILABLE); // was DEADLINE_EXCEEDED, after ~30 ms
    expect(performance.now() - t0).toBeLessThan(300);
  });

  it('while a deadline that did pass is still DEADLINE_EXCEEDED', async () => {
    const hole = await blackhole();
    cleanup.push(() => hole.close());
    const { client } = setup(`127.0.0.1:${hole.port}`, { connectTimeout: 5_000 });
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 300 }));
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  });
});


describe('grpc guard: a deadline far in the future', () => {
  it.each([
    ['20 years away', () => new Date(Date.now() + 20 * 365 * 86_400_000)],
    ['1 000 years away (grpc-js takes up to ~11 000)', () => new Date(Date.now() + 1_000 * 365 * 86_400_000)],
  ])('%s: a call to a port refusing, then served, is retried and answered (was: UNAVAILABLE, its cause a RangeError calling the deadline a Date.now() mix-up)', async (_name, deadline) => {
    const server = await echoServer();
    const port = server.port;
    await server.close(); // refused until it listens again
    const { client } = setup(`127.0.0.1:${port}`);
    const answer = call(client, 'Echo', 'far', { deadline: deadline() });
    await new Promise((resolve) => setTimeout(resolve, 150)); // the first attempt was refused
    await server.listen(port);
    cleanup.push(() => server.close());
    expect(String(await answer)).toBe('far');
    expect(server.calls.Echo).toBe(1);
  });
});

describe('grpc guard: a call whose dials open its host', () => {
  it('maxAttempts 6 with a backoff longer than the breaker\'s window: the call stops once its dials opened the host (3 connects), not a probe after every window (was: 6; the undici adapter\'s twin, an outside review)', async () => {
    await using peer = await acceptAndHold(); // TCP accepted, no HTTP/2 SETTINGS ever
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 100 });
    const { client } = setup(peer.address, { breaker, connectTimeout: 100, retry: { maxAttempts: 6, backoff: () => 300, budget: null } });
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 10_000 }));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(peer.attempts).toBe(3);
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 1 });
  });
});
