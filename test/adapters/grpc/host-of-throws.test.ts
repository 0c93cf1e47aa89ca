/**
 * A `hostOf` of the user's that throws is a bug in the caller's own code, not a server that
 * cannot be reached: the call failed UNAVAILABLE, the status every retry policy (grpc-js's
 * service config, a user's loop) retries, so a broken `hostOf` was retried as an outage (an outside
 * review, r134). It now fails INTERNAL, at once, with the thrown error as its `cause` and its
 * message in the details; nothing is dialled and no host is counted.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoServer, failure } from './helpers.js';

const cleanup = leakCheckEach();

describe('GrpcGuard: a hostOf that throws', () => {
  it.each([true, false])('perAddress %s: the call fails INTERNAL with the thrown error as its cause, never sent, nothing counted', async (perAddress) => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const breaker = new HostBreaker();
    const bug = new TypeError('cannot read properties of undefined');
    const guard = new GrpcGuard({ breaker, perAddress, connectTimeout: 1_000, closeTimeout: 100, hostOf: () => { throw bug; } });
    cleanup.push(() => guard.close());
    for (const target of [server.address, `localhost:${server.port}`]) {
      const client = new EchoClient(target, grpc.credentials.createInsecure(), guard.clientOptions());
      cleanup.push(() => client.close());
      const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 2_000 }));
      expect(err.code, target).toBe(grpc.status.INTERNAL);
      expect(err.details).toContain('cannot read properties of undefined');
      expect(err.cause).toBe(bug);
    }
    expect(server.calls.Echo).toBe(0);
    expect(breaker.state(server.address)?.failures ?? 0).toBe(0);
  });

  it('a hostOf that answers no key (undefined) fails the call INTERNAL naming what it returned', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), connectTimeout: 1_000, closeTimeout: 100, hostOf: (() => undefined) as never });
    cleanup.push(() => guard.close());
    const client = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => client.close());
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 2_000 }));
    expect(err.code).toBe(grpc.status.INTERNAL);
    expect(err.details).toContain(`hostOf("${server.address}") must return a non-empty string, got undefined`);
    expect(server.calls.Echo).toBe(0);
  });
});
