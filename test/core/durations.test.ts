/**
 * Every duration option and argument past 2^31-1 ms (issue 12, defect 6). Node fires a timer set
 * beyond that after 1 ms, so `timeout: 2**31` used to mean "at once". Now checkDuration (the one
 * place) rejects it with a RangeError naming the option, and the code that waits a long time on
 * purpose (retry's deadline, sleep, a gRPC call's deadline) waits in steps. Each named case is
 * checked by what matters: no dial counted, no stream sent, no PING sent, nothing fired early.
 * `NodeLikeClock` is a manual clock that fires an over-long timer after 1 ms, as Node does.
 */
import http2 from 'node:http2';
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../src/adapters/grpc/guard.js';
import { GuardedCall, type CallHost } from '../../src/adapters/grpc/guarded-call.js';
import { SpecTable, grpcHostKey, targetOfKey } from '../../src/adapters/grpc/target.js';
import { RedisGuard } from '../../src/adapters/redis/guard.js';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { constant, exponential } from '../../src/core/backoff.js';
import { type Clock, type TimerHandle, sleep } from '../../src/core/clock.js';
import { DeadlineExceededError } from '../../src/core/errors.js';
import { MAX_DURATION, checkDuration } from '../../src/core/validate.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { retry } from '../../src/retry/retry.js';
import { logStateChanges } from '../../src/observe/log-state-changes.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { FakeConnector } from '../pool/fake-connector.js';

const cleanup = leakCheckEach();
const TOO_LONG = 2 ** 31;

/** A manual clock with Node's overflow: a timer set past 2^31-1 ms (or NaN) fires after 1 ms. */
class NodeLikeClock implements Clock {
  readonly inner = new ManualClock();
  now(): number {
    return this.inner.now();
  }
  setTimeout(callback: () => void, ms: number): TimerHandle {
    return this.inner.setTimeout(callback, ms > MAX_DURATION || Number.isNaN(ms) ? 1 : ms);
  }
  clearTimeout(handle: TimerHandle): void {
    this.inner.clearTimeout(handle);
  }
}

/** An h2c server on loopback that counts the PINGs and streams it receives. */
async function countingH2(): Promise<{ origin: string; pings: () => number; streams: () => number; close: () => Promise<void> }> {
  let pings = 0;
  let streams = 0;
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('ping', () => pings++);
    s.on('error', () => {});
    s.once('close', () => sessions.delete(s));
  });
  server.on('stream', (stream) => {
    streams++;
    setTimeout(() => {
      if (stream.destroyed) return;
      stream.respond({ ':status': 200 });
      stream.end('ok');
    }, 30);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    pings: () => pings,
    streams: () => streams,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('checkDuration: the one place every duration is checked', () => {
  it('2^31-1 ms passes, 2^31 is a RangeError naming the option; Infinity only where allowed', () => {
    expect(checkDuration('t', MAX_DURATION)).toBe(MAX_DURATION);
    expect(() => checkDuration('t', TOO_LONG)).toThrow(RangeError);
    expect(() => checkDuration('t', TOO_LONG)).toThrow(/^t must be at most 2147483647 ms/);
    expect(() => checkDuration('t', TOO_LONG, 0, true)).toThrow(/or Infinity for none/);
    expect(checkDuration('t', Infinity, 0, true)).toBe(Infinity);
    expect(() => checkDuration('t', Infinity)).toThrow(/must be finite/);
  });
});

describe('a 2^31 ms duration never fires early', () => {
  it('dial({ timeout: 2**31 }) rejects with a RangeError before the breaker: no dial made, none counted as failed', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1 });
    let established = 0;
    const establish = async (): Promise<string> => {
      established++;
      return 'c';
    };
    await expect(dial('127.0.0.1:1', establish, { timeout: TOO_LONG, breaker })).rejects.toThrow(RangeError);
    expect(established).toBe(0);
    expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 0, abandoned: 0 });
    expect(breaker.state('127.0.0.1:1')?.state ?? 'closed').toBe('closed');
    // The longest a timer holds is accepted and does not fire before the dial settles.
    const slow = (): Promise<string> => new Promise((resolve) => setTimeout(() => resolve('c'), 30));
    await expect(dial('127.0.0.1:1', slow, { timeout: MAX_DURATION, breaker })).resolves.toBe('c');
    expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 1 });
  });

  it('Http2Client: a request timeout of 2**31 is a RangeError and sends no stream; 2^31-1 lets a 30 ms answer through', async () => {
    const server = await countingH2();
    cleanup.push(server.close);
    expect(() => new Http2Client({ requestTimeout: TOO_LONG })).toThrow(/requestTimeout must be at most/);
    const c = new Http2Client({ breaker: null, keepAliveInterval: 0 });
    cleanup.push(() => c.close());
    await expect(c.request(`${server.origin}/`, { timeout: TOO_LONG })).rejects.toThrow(/timeout must be at most/);
    expect(server.streams()).toBe(0);
    const res = await c.request(`${server.origin}/`, { timeout: MAX_DURATION });
    expect(res.status).toBe(200);
    expect(server.streams()).toBe(1);
  });

  it('Http2Client: keepAliveInterval 2**31 is a RangeError; at 2^31-1 no PING is sent in 200 ms of a live session', async () => {
    const server = await countingH2();
    cleanup.push(server.close);
    expect(() => new Http2Client({ keepAliveInterval: TOO_LONG })).toThrow(/keepAliveInterval must be at most/);
    const c = new Http2Client({ breaker: null, keepAliveInterval: MAX_DURATION });
    cleanup.push(() => c.close());
    expect((await c.request(`${server.origin}/`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 200)); // a window for PINGs that should not come
    expect(server.pings()).toBe(0);
  });

  it('a keep-alive interval of a fraction of a ms (a PING every millisecond) is a RangeError; 0 (off) and 10 ms are taken', () => {
    for (const tiny of [1e-9, 0.5, 9]) {
      expect(() => new Http2Client({ breaker: null, keepAliveInterval: tiny })).toThrow(/keepAliveInterval must be 0 \(off\) or >= 10 ms/);
      expect(() => new GrpcGuard({ breaker: null, keepAliveInterval: tiny })).toThrow(/keepAliveInterval must be 0 \(off\) or >= 10 ms/);
    }
    for (const fine of [0, 10]) {
      const c = new Http2Client({ breaker: null, keepAliveInterval: fine });
      cleanup.push(() => c.close());
      expect(() => new GrpcGuard({ breaker: null, keepAliveInterval: fine })).not.toThrow();
    }
  });

  it('RedisGuard maxBackoff under the first round\'s 50 ms is a RangeError (0 spaced the redials by nothing: a storm)', () => {
    for (const tiny of [0, 1e-9, 49]) expect(() => new RedisGuard({ maxBackoff: tiny })).toThrow(/maxBackoff must be >= 50/);
    expect(() => new RedisGuard({ maxBackoff: 50 })).not.toThrow();
  });

  it('ConnectionPool closeTimeout 2**31 is a RangeError (it would have released the in-flight request at once)', () => {
    expect(() => new ConnectionPool({ connector: new FakeConnector(), closeTimeout: TOO_LONG })).toThrow(/closeTimeout must be at most/);
  });

  it('GuardedAgent({ timeout: 2**31 }) is a RangeError (it gave DEADLINE_EXCEEDED after 7 ms), and so is every other duration of it', () => {
    for (const key of ['timeout', 'connectTimeout', 'headersTimeout', 'bodyTimeout', 'maxRetryAfter', 'keepAliveInitialDelay']) {
      expect(() => new GuardedAgent({ [key]: TOO_LONG }), key).toThrow(RangeError);
    }
  });

  it('GrpcGuard keepAliveInterval, keepAliveTimeout, connectTimeout and the pool durations of 2**31 are RangeErrors', () => {
    for (const key of ['keepAliveInterval', 'keepAliveTimeout', 'connectTimeout', 'closeTimeout', 'idleTimeout', 'sweepInterval']) {
      expect(() => new GrpcGuard({ [key]: TOO_LONG }), key).toThrow(RangeError);
    }
  });

  it('every other duration option of every public constructor and schedule: 2**31 is a RangeError naming it', () => {
    const cases: Array<[string, () => unknown]> = [
      ...['connectTimeout', 'keepAliveTimeout', 'idleTimeout', 'sweepInterval', 'closeTimeout'].map(
        (key) => [`Http2Client.${key}`, () => new Http2Client({ [key]: TOO_LONG })] as [string, () => unknown],
      ),
      ...['connectTimeout', 'idleTimeout', 'sweepInterval'].map(
        (key) => [`ConnectionPool.${key}`, () => new ConnectionPool({ connector: new FakeConnector(), [key]: TOO_LONG })] as [string, () => unknown],
      ),
      ...['openDuration', 'probeTimeout', 'idleRetention', 'sweepInterval'].map(
        (key) => [`HostBreaker.${key}`, () => new HostBreaker({ [key]: TOO_LONG })] as [string, () => unknown],
      ),
      ['RetryBudget.ttl', () => new RetryBudget({ ttl: TOO_LONG })],
      ['logStateChanges.budgetInterval', () => logStateChanges({ warn: () => {}, info: () => {} }, { budgetInterval: TOO_LONG })],
      ['exponential.max', () => exponential({ base: 1, max: TOO_LONG })],
      ['constant', () => constant(TOO_LONG)],
    ];
    for (const [what, make] of cases) {
      const key = what.split('.').pop()!;
      expect(make, what).toThrow(RangeError);
      expect(make, what).toThrow(new RegExp(`${key}.* must be at most|${key} must be at most`));
    }
  });

  it('retry: retryWindow 2**31 is a RangeError; timeout 2**31 is allowed (retry re-arms its deadline)', async () => {
    await expect(retry(() => 'ok', { retryWindow: TOO_LONG, budget: null })).rejects.toThrow(/retryWindow must be at most/);
    await expect(retry(() => 'ok', { timeout: TOO_LONG, budget: null })).resolves.toBe('ok');
  });

  it('a gRPC call whose deadline is 2^31 ms away does not end while it waits for a channel', async () => {
    const clock = new NodeLikeClock();
    const specs = new SpecTable({});
    const spec = specs.acquire('fake:1', grpc.credentials.createInsecure(), {});
    const connector = new FakeConnector();
    const pool = new ConnectionPool({ breaker: null, hostOf: (key: string) => grpcHostKey(targetOfKey(key)), clock, connectTimeout: 1_000, connector });
    const host = { pool, ready: () => false, mistake: () => undefined, specs, clock, replayBufferSize: 1_024, idempotent: () => false, retry: undefined } as unknown as CallHost;
    const statuses: grpc.StatusObject[] = [];
    const call = new GuardedCall(host, spec, '/fake.S/M', Date.now() + TOO_LONG + 1_000, undefined, null, 0);
    call.start(new grpc.Metadata(), { onReceiveMetadata: () => {}, onReceiveMessage: () => {}, onReceiveStatus: (s) => statuses.push(s) });
    await flushMicrotasks();
    await clock.inner.tick(100);
    expect(statuses).toHaveLength(0); // it used to end with DEADLINE_EXCEEDED after 1 ms
    call.cancelWithStatus(grpc.status.CANCELLED, 'test over');
    await flushMicrotasks(); // a status the call makes up itself arrives on a later tick (issue 18 break 3)
    expect(statuses.map((s) => s.code)).toEqual([grpc.status.CANCELLED]);
    await pool.close();
  });

  it('a gRPC channel watch whose deadline is 2^31 ms away is not called back with "deadline passed" early', async () => {
    const clock = new NodeLikeClock();
    const guard = new GrpcGuard({ clock, breaker: null });
    const channel = guard.channel('127.0.0.1:1', grpc.credentials.createInsecure());
    const calls: Array<Error | undefined> = [];
    channel.watchConnectivityState(grpc.connectivityState.IDLE, Date.now() + TOO_LONG + 1_000, (err) => calls.push(err));
    await clock.inner.tick(100);
    expect(calls).toEqual([]); // it used to fail after 1 ms
    channel.close(); // SHUTDOWN: a state change, so the watcher is called without an error
    await flushMicrotasks(); // watchers are called on a later tick (issue 18 break 3)
    expect(calls).toEqual([undefined]);
    await guard.close();
  });

  it('retry({ timeout: 2**31 }) keeps its whole deadline: no DEADLINE_EXCEEDED early; then one, on time', async () => {
    const clock = new NodeLikeClock();
    let settled: unknown = 'pending';
    const call = retry((a) => new Promise((_resolve, reject) => a.signal.addEventListener('abort', () => reject(a.signal.reason))), {
      timeout: TOO_LONG,
      clock,
      budget: null,
    }).catch((err: unknown) => {
      settled = err;
    });
    await clock.inner.tick(MAX_DURATION);
    expect(settled).toBe('pending');
    await clock.inner.tick(1);
    await call;
    expect(settled).toBeInstanceOf(DeadlineExceededError);
  });

  it('sleep(clock, 2**31) waits 2^31 ms, not 1', async () => {
    const clock = new NodeLikeClock();
    let done = false;
    const p = sleep(clock, TOO_LONG).then(() => {
      done = true;
    });
    await clock.inner.tick(MAX_DURATION);
    expect(done).toBe(false);
    await clock.inner.tick(1);
    await p;
    expect(done).toBe(true);
  });
});
