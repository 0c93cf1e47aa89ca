/**
 * A reconnect backoff grpc-js would turn into a redial loop is refused where the channel is made
 * (an outside review's "odd value"). grpc-js takes `grpc.initial_reconnect_backoff_ms: -1` as given:
 * its backoff is `min(previous * 1.6, max)`, which never grows past a negative start, and Node runs
 * a negative timer after 1 ms, so the channel redials a dead server about every millisecond (seed
 * 001's spiral). Measured with raw grpc-js 1.14 against a peer that resets each connection, one
 * wait-for-ready call of 1 s: 870 connections (1 with the default), and grpc-js's own re-resolution
 * timer threw 188 unhandled rejections ("Invalid time value"), each enough to end a Node process.
 * Not a test here: those rejections are grpc-js's, outside anything a test can catch. Through the
 * guard (before this check) the same client made 2 connections in that second: the guard's
 * connector paces reconnects itself and silently took grpc's 1 s default for a value it could not
 * use, so the option the user set was not what any channel did. These check that such a client
 * is refused at construction instead, naming the option, before any channel or dial.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { resetOnAccept } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, failure } from './helpers.js';

const cleanup = leakCheckEach();

describe('grpc reconnect backoff options', () => {
  it.each<[string, unknown, RegExp]>([
    ['a negative initial backoff', { 'grpc.initial_reconnect_backoff_ms': -1 }, /options\['grpc\.initial_reconnect_backoff_ms'\] must be >= 1/],
    ['a negative max backoff', { 'grpc.max_reconnect_backoff_ms': -5 }, /options\['grpc\.max_reconnect_backoff_ms'\] must be >= 1/],
    ['a zero backoff (grpc-js silently took 1 s)', { 'grpc.initial_reconnect_backoff_ms': 0 }, /grpc\.initial_reconnect_backoff_ms/],
    ['an infinite backoff (a timer that fires at once)', { 'grpc.max_reconnect_backoff_ms': Infinity }, /grpc\.max_reconnect_backoff_ms.* finite/],
    ['a backoff past 2^31-1 ms (fires at once)', { 'grpc.initial_reconnect_backoff_ms': 2 ** 31 }, /at most 2147483647/],
    ['a backoff that is not a number', { 'grpc.initial_reconnect_backoff_ms': '1000' }, /grpc\.initial_reconnect_backoff_ms/],
  ])('a stock client given %s through clientOptions() throws at construction, naming it; nothing is opened', async (_name, bad, message) => {
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker });
    cleanup.push(() => guard.close());
    expect(() => new EchoClient('127.0.0.1:1', grpc.credentials.createInsecure(), guard.clientOptions(bad as grpc.ClientOptions))).toThrow(message);
    expect(guard.stats().opened).toBe(0);
    expect(breaker.stats().hosts).toBe(0);
  });

  it('the guard-wide channelOptions are checked the same way, at the guard\'s construction', () => {
    expect(() => new GrpcGuard({ channelOptions: { 'grpc.max_reconnect_backoff_ms': -1 } })).toThrow(
      /channelOptions\['grpc\.max_reconnect_backoff_ms'\] must be >= 1/,
    );
  });

  it('a valid backoff is taken as given: the client is made and calls', async () => {
    const peer = await resetOnAccept();
    cleanup.push(() => peer.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), retry: false });
    cleanup.push(() => guard.close());
    const client = new EchoClient(peer.address, grpc.credentials.createInsecure(), guard.clientOptions({ 'grpc.initial_reconnect_backoff_ms': 50, 'grpc.max_reconnect_backoff_ms': 2 ** 31 - 1 }));
    cleanup.push(() => client.close());
    const err = await failure(call(client, 'Echo'));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(peer.attempts).toBeGreaterThanOrEqual(1);
  });
});
