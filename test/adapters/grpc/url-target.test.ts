/**
 * A grpc target written as a URL, or naming another resolver (an outside review, r129): its
 * text was read as `host:port`, so `http://127.0.0.1:35935` and `grpc://127.0.0.1:35935` were
 * filed under `127.0.0.1:443` (the port dropped, grpc's default put in). grpc-js never resolves
 * such a target (plain: every call UNAVAILABLE in ~1 ms), the guard counted its failures as
 * failed dials there, and a live server on 127.0.0.1:443 was refused to every client of the
 * breaker (20 of 20 connects). And `xds:///name` or a scheme the user registered threw.
 * Now an `http:`/`https:` URL is a TypeError naming the target to write instead, and any other
 * resolver's target is one entry of its own.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { grpcHostKey } from '../../../src/adapters/grpc/target.js';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { hostKey } from '../../../src/guard/host-key.js';
import { EchoClient, call, echoServer, failure } from './helpers.js';

describe('grpc targets that are not host:port', () => {
  it('an http:/https: URL is a TypeError at the client, naming the target to write', async () => {
    const server = await echoServer();
    const guard = new GrpcGuard({ breaker: new HostBreaker() });
    try {
      for (const url of [`http://127.0.0.1:${server.port}`, `https://127.0.0.1:${server.port}/`]) {
        expect(() => new EchoClient(url, grpc.credentials.createInsecure(), guard.clientOptions())).toThrow(TypeError);
        expect(() => new EchoClient(url, grpc.credentials.createInsecure(), guard.clientOptions())).toThrow(`name the server as "127.0.0.1:${server.port}"`);
      }
    } finally {
      await guard.close();
      await server.close();
    }
  });

  it('another resolver\'s target is an entry of its own, never a host\'s (grpc:// was 127.0.0.1:443)', () => {
    const key = grpcHostKey('grpc://127.0.0.1:35935');
    expect(key).not.toBe(hostKey('127.0.0.1', 443));
    expect(key).not.toBe(hostKey('127.0.0.1', 35935));
    expect(grpcHostKey('grpc://127.0.0.1:35936')).not.toBe(key);
    expect(grpcHostKey('xds:///svc.test')).not.toBe(grpcHostKey('xds:///other.test'));
    expect(grpcHostKey('mine:svc')).not.toBe(grpcHostKey('svc:443'));
    // What reads as a scheme but is host:port stays a host's key.
    expect(grpcHostKey('localhost:50051')).toBe(hostKey('localhost', 50051));
    expect(grpcHostKey('dns:///svc.test:50051')).toBe(hostKey('svc.test', 50051));
  });

  it('calls to a target grpc-js cannot resolve fail UNAVAILABLE as plain, and leave 127.0.0.1:443 alone', async () => {
    const server = await echoServer();
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker });
    const target = `grpc://127.0.0.1:${server.port}`;
    const plain = new EchoClient(target, grpc.credentials.createInsecure());
    const guarded = new EchoClient(target, grpc.credentials.createInsecure(), guard.clientOptions());
    try {
      for (let i = 0; i < 4; i++) {
        const options = { deadline: Date.now() + 3_000 };
        expect((await failure(call(plain, 'Echo', 'x', options))).code).toBe(grpc.status.UNAVAILABLE);
        expect((await failure(call(guarded, 'Echo', 'x', options))).code).toBe(grpc.status.UNAVAILABLE);
      }
      expect(server.calls.Echo).toBe(0);
      const permit = breaker.tryAdmit(hostKey('127.0.0.1', 443));
      expect(permit).not.toBeInstanceOf(HostUnavailableError);
      if (!(permit instanceof HostUnavailableError)) permit.abandoned();
    } finally {
      plain.close();
      guarded.close();
      await guard.close();
      await server.close();
    }
  }, 30_000);
});
