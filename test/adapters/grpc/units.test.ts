/**
 * The grpc adapter's pure parts: breaker keys of grpc targets, which clients share a channel,
 * option checks and defaults, the client options it hands out, and the statuses it makes up
 * (and how classify reads them). No sockets.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, METADATA_CODE, METADATA_RETRY_AFTER, grpcHostKey } from '../../../src/adapters/grpc/index.js';
import { ChannelConnectError, quotedCause } from '../../../src/adapters/grpc/connect-error.js';
import { grpcSettings } from '../../../src/adapters/grpc/options.js';
import { statusFor } from '../../../src/adapters/grpc/status.js';
import { SpecTable, targetOfKey } from '../../../src/adapters/grpc/target.js';
import { classify, toldAsSentEarlier } from '../../../src/core/classify.js';
import { ConnectTimeoutError, ConnectionGoneError, DeadlineExceededError, HostUnavailableError, PoolClosedError } from '../../../src/core/errors.js';
import { ADAPTER_CONNECT_TIMEOUT } from '../../../src/core/restart-backoff.js';
import { hostKey } from '../../../src/guard/host-key.js';
import { ManualClock } from '../../../src/testing/manual-clock.js';
import { TEST_CERT } from '../../../src/testing/test-cert.js';

describe('grpcHostKey: one breaker key per host, however the target is spelled', () => {
  it.each([
    ['127.0.0.1:50051', '127.0.0.1:50051'],
    ['dns:127.0.0.1:50051', '127.0.0.1:50051'],
    ['dns:///Echo.Internal.:50051', 'echo.internal.:50051'], // the absolute name keeps its dot
    ['dns://8.8.8.8/echo.internal:50051', 'echo.internal:50051'],
    ['echo.internal', 'echo.internal:443'],
    ['localhost:50051', 'localhost:50051'],
    ['ipv4:127.0.0.1:50051', '127.0.0.1:50051'],
    ['ipv4:127.0.0.2:50051,127.0.0.1:50051', 'ipv4/127.0.0.1/50051,127.0.0.2/50051'], // a list: the whole list, sorted
    ['ipv4:127.0.0.1:50051,127.0.0.2:50051,', 'ipv4/127.0.0.1/50051,127.0.0.2/50051'],
    ['ipv6:[::1]:1,[::1]:2', 'ipv6/[//1]/1,[//1]/2'],
    ['ipv6:[::1]:50051', '[::1]:50051'],
    ['[::1]:50051', '[::1]:50051'],
    ['::1', '[::1]:443'],
    ['unix:/run/echo.sock', 'unix:/run/echo.sock'],
    ['unix:/run/Echo.sock', 'unix:/run/Echo.sock'], // a path is case-sensitive (was: one key with echo.sock)
    ['unix:/run/a:b', 'unix:/run/a:b'], // and may hold a colon (was: one key with /run/a/b)
    ['UNIX:/run/a', 'unix:/run/a'],
  ])('%s -> %s', (target, key) => {
    expect(grpcHostKey(target)).toBe(key);
  });

  it('rejects a target that names no host', () => {
    expect(() => grpcHostKey('')).toThrow(TypeError);
  });

  it('a key is its own key (the breaker normalises what it is given again)', () => {
    for (const target of ['ipv4:127.0.0.2:50051,127.0.0.1:50051', 'ipv6:[::1]:1,[::1]:2', 'unix:/run/echo.sock', 'unix:/run/Echo:1.sock', 'dns:///Echo.Internal.:50051']) {
      const key = grpcHostKey(target);
      expect(hostKey(key)).toBe(key);
    }
  });
});

describe('which clients share a channel', () => {
  const table = new SpecTable({ 'grpc.keepalive_time_ms': 10_000 });

  it('equal credentials (two createInsecure calls) and equal options share one key', () => {
    const a = table.acquire('h:1', grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 10 });
    const b = table.acquire('h:1', grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 10 });
    expect(a).toBe(b);
    expect(a.clients).toBe(2);
    expect(targetOfKey(a.key)).toBe('h:1');
  });

  it('other options, other credentials or another target each get their own', () => {
    const base = table.acquire('h:2', grpc.credentials.createInsecure(), {});
    const keys = new Set([
      base.key,
      table.acquire('h:2', grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 10 }).key,
      table.acquire('h:2', grpc.credentials.createSsl(Buffer.from(TEST_CERT)), {}).key,
      table.acquire('h:3', grpc.credentials.createInsecure(), {}).key,
    ]);
    expect(keys.size).toBe(4);
  });

  it('every channel owns its connection, and the guard\'s keep-alive reaches it', () => {
    const spec = table.acquire('h:4', grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 0 });
    expect(spec.options).toMatchObject({ 'grpc.use_local_subchannel_pool': 1, 'grpc.keepalive_time_ms': 10_000 });
  });

  it('a spec is forgotten once no client or call holds it, and made again with the same key', () => {
    const spec = table.acquire('h:5', grpc.credentials.createInsecure(), {});
    table.release(spec);
    expect(table.get(spec.key)).toBeUndefined();
    expect(table.acquire('h:5', grpc.credentials.createInsecure(), {}).key).toBe(spec.key);
  });
});

describe('grpc guard options', () => {
  it('keep-alive is on by default: 10 s interval, 10 s timeout, pinging while idle (seed 003)', () => {
    expect(grpcSettings({}).channelOptions).toEqual({
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 10_000,
      'grpc.keepalive_permit_without_calls': 1,
    });
    expect(grpcSettings({ keepAliveInterval: 0 }).channelOptions).toEqual({});
    expect(grpcSettings({ channelOptions: { 'grpc.keepalive_time_ms': 30_000 } }).channelOptions['grpc.keepalive_time_ms']).toBe(30_000);
  });

  it('defaults: 2.5 s connect timeout (ADAPTER_CONNECT_TIMEOUT), 3 attempts, 256 KiB replay buffer, nothing idempotent', () => {
    const s = grpcSettings({});
    expect(s).toMatchObject({ connectTimeout: ADAPTER_CONNECT_TIMEOUT, replayBufferSize: 262_144, retry: { maxAttempts: 3 } });
    expect(s.idempotent('/a.B/C')).toBe(false);
  });

  it.each<[string, object, RegExp]>([
    ['connectTimeout', { connectTimeout: 0 }, /connectTimeout/],
    ['keepAliveInterval', { keepAliveInterval: -1 }, /keepAliveInterval/],
    ['keepAliveTimeout', { keepAliveTimeout: 0 }, /keepAliveTimeout/],
    ['keepAliveWhileIdle', { keepAliveWhileIdle: 'yes' }, /keepAliveWhileIdle/],
    ['replayBufferSize', { replayBufferSize: 1.5 }, /replayBufferSize/],
    ['idempotent', { idempotent: true }, /idempotent/],
    ['retry', { retry: 3 }, /retry/],
    ['retry.maxAttempts', { retry: { maxAttempts: 0 } }, /retry\.maxAttempts/],
    ['retry.budget', { retry: { budget: {} } }, /retry\.budget/],
    ['channelOptions', { channelOptions: 'x' }, /channelOptions/],
    ['idleTimeout (checked by the pool)', { idleTimeout: -5 }, /idleTimeout/],
    ['clock', { clock: {} }, /clock/],
  ])('a bad %s is an error naming it', (_name, options, message) => {
    expect(() => new GrpcGuard(options as never)).toThrow(message);
  });

  it('clientOptions: the caller\'s options with the channel factory', async () => {
    const guard = new GrpcGuard({ clock: new ManualClock() });
    const mine: grpc.Interceptor = (o, next) => new grpc.InterceptingCall(next(o));
    const options = guard.clientOptions({ interceptors: [mine], 'grpc.max_receive_message_length': 5 });
    expect(options).toEqual({ interceptors: [mine], 'grpc.max_receive_message_length': 5, channelFactoryOverride: guard.channelFactory });
    expect(guard.clientOptions()).toEqual({ channelFactoryOverride: guard.channelFactory });
    await guard.close();
    expect(() => guard.channel('h:1', grpc.credentials.createInsecure())).toThrow(/shut down/);
  });
});

describe('statuses the guard makes up, and what classify reads in them', () => {
  it('a refusal: UNAVAILABLE, the error as cause, its code and retry-after in the metadata', () => {
    const clock = new ManualClock();
    const err = new HostUnavailableError('h:1', 12_345.2, 'open', clock);
    const s = statusFor(err);
    expect(s).toMatchObject({ code: grpc.status.UNAVAILABLE, cause: err });
    expect(s.details).toMatch(/^dialguard: h:1 is unavailable/);
    expect(s.metadata.get(METADATA_CODE)).toEqual(['DIALGUARD_HOST_UNAVAILABLE']);
    expect(s.metadata.get(METADATA_RETRY_AFTER)).toEqual(['12346']);
    expect(classify(s)).toMatchObject({ kind: 'refused', transient: false, notSent: true });
  });

  it('an error that cannot be read (a getter that throws) still makes a status: never an exception out of a grpc-js callback', () => {
    const err = new HostUnavailableError('h:1', 1_000, 'open');
    Object.defineProperty(err, 'retryAfter', { get: () => { throw new TypeError('unreadable'); } });
    const s = statusFor(err);
    expect(s).toMatchObject({ code: grpc.status.UNAVAILABLE, cause: err });
    expect(s.details).toMatch(/^dialguard: an error that could not be read \(TypeError: unreadable\)/);
  });

  it('a copy of a refusal handed to a call that may have been sent: its retry-after too (was: a TypeError from a private field, uncaught; r147)', () => {
    const clock = new ManualClock();
    const copy = toldAsSentEarlier(new HostUnavailableError('h:1', 12_345.2, 'open', clock), undefined, true);
    const s = statusFor(copy);
    expect(s.metadata.get(METADATA_RETRY_AFTER)).toEqual(['12346']);
    expect(classify(s)).toMatchObject({ kind: 'refused', notSent: false });
  });

  it.each<[string, unknown, number, object]>([
    ['a connect timeout', new ConnectTimeoutError('h:1', 100, 'tcp'), grpc.status.UNAVAILABLE, { kind: 'dial', notSent: true, transient: true }],
    ['a dead connection', new ConnectionGoneError('h:1', 2), grpc.status.UNAVAILABLE, { kind: 'connection', connectionDead: true }],
    ['a spent deadline', new DeadlineExceededError(100, 0), grpc.status.DEADLINE_EXCEEDED, { kind: 'timeout', transient: false }],
    ['a closed guard', new PoolClosedError(), grpc.status.UNAVAILABLE, { kind: 'cancelled' }],
  ])('%s', (_name, err, code, verdict) => {
    const s = statusFor(err, code);
    expect(s.code).toBe(code);
    expect(s.cause).toBe(err);
    expect(classify(s)).toMatchObject(verdict);
  });

  it('a failed connect keeps grpc-js\'s own words (and reads as a dial)', () => {
    const err = new ChannelConnectError('h:1', {
      code: grpc.status.UNAVAILABLE,
      details: 'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1',
      metadata: new grpc.Metadata(),
    });
    const s = statusFor(err);
    expect(s.details).toBe(err.details);
    expect(s.cause).toBe(err.cause);
    expect(s).toBeInstanceOf(ChannelConnectError); // the brand rides on the status, for grpc-js's ServiceError
    expect(err.cause).toMatchObject({ message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED', syscall: 'connect', address: '127.0.0.1', port: 1 });
    expect(classify(s)).toMatchObject({ kind: 'dial', code: 'ECONNREFUSED' });
    expect(classify(err)).toMatchObject({ kind: 'dial', code: 'ECONNREFUSED' });
  });

  it.each([
    ['connect ECONNREFUSED ::1 in brackets', 'No connection established. Last error: connect ECONNREFUSED [::1]:50051. Resolution note: ', { code: 'ECONNREFUSED', syscall: 'connect', address: '::1', port: 50051 }],
    ['getaddrinfo ENOTFOUND', 'No connection established. Last error: getaddrinfo ENOTFOUND nope.invalid', { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname: 'nope.invalid' }],
    ['a TLS failure, kept as text', 'No connection established. Last error: Client network socket disconnected before secure TLS connection was established', { message: 'Client network socket disconnected before secure TLS connection was established' }],
  ])('a ChannelConnectError rebuilds the failure grpc-js quoted as its cause: %s', (_name, details, want) => {
    const err = new ChannelConnectError('h:1', { code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() });
    expect(err.cause).toMatchObject(want);
  });

  it.each([['No connection established'], ['No connection established. Last error: null'], ['something else']])('nothing quoted, no cause: %s', (details) => {
    expect(new ChannelConnectError('h:1', { code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() }).cause).toBeUndefined();
    expect(quotedCause(details)).toBeUndefined();
  });

  it('instanceof ChannelConnectError holds for the class and its branded status only', () => {
    expect(new Error('x')).not.toBeInstanceOf(ChannelConnectError);
    expect({ code: 14, details: 'x', metadata: new grpc.Metadata() }).not.toBeInstanceOf(ChannelConnectError);
    expect(null).not.toBeInstanceOf(ChannelConnectError);
  });

  it('a status grpc-js delivered passes through untouched', () => {
    const status = { code: grpc.status.NOT_FOUND, details: 'x', metadata: new grpc.Metadata() };
    expect(statusFor(status)).toBe(status);
  });
});
