/**
 * A `grpc.service_config` method `timeout` is the call's deadline in grpc-js (the earlier of the
 * two, from the call's start); the guard did not read it, so an idempotent call's retries and a
 * call's wait for a channel ran past it (an outside review, r138: a 1 s timeout, a handler
 * sleeping 3 s: 4.5 s and 3 runs where grpc-js ends at 1 s with one; a silent peer: UNAVAILABLE at
 * 9 s where grpc-js says DEADLINE_EXCEEDED at 1 s). Raw grpc-js in the same test, and the
 * timeout's reading as grpc-js reads it.
 */
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { methodTimeouts } from '../../../src/adapters/grpc/method-timeout.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoServer, failure } from './helpers.js';

const cleanup = leakCheckEach();
const config = (methodConfig: unknown[]): Record<string, string> => ({ 'grpc.service_config': JSON.stringify({ methodConfig }) });
/** 400 ms for Hold, as an object (grpc-js reads a string's fraction as nanoseconds: "0.4s" is 4 ns). */
const HOLD_400 = config([{ name: [{ service: 'dialguard.test.Echo', method: 'Hold' }], timeout: { seconds: 0, nanos: 400_000_000 } }]);

/** How a Hold call through `client` ended, and when. */
async function hold(client: EchoClient): Promise<{ code: grpc.status; ms: number }> {
  const t0 = performance.now();
  const err = await failure(call(client, 'Hold'));
  return { code: err.code, ms: performance.now() - t0 };
}

describe("GrpcGuard: a service config's method timeout is the call's deadline, as in grpc-js", () => {
  it('an idempotent call to a handler that never answers: DEADLINE_EXCEEDED at the timeout, run once, as raw grpc-js (was: retried, 3 runs)', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const raw = new EchoClient(server.address, grpc.credentials.createInsecure(), HOLD_400);
    cleanup.push(() => raw.close());
    const rawEnd = await hold(raw);
    const guard = new GrpcGuard({ breaker: new HostBreaker(), closeTimeout: 100, idempotent: () => true, retry: { retryableStatusCodes: ['DEADLINE_EXCEEDED'] } });
    cleanup.push(() => guard.close());
    const guarded = new EchoClient(server.address, grpc.credentials.createInsecure(), { ...HOLD_400, ...guard.clientOptions() });
    cleanup.push(() => guarded.close());
    const guardedEnd = await hold(guarded);
    expect(rawEnd.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(guardedEnd.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(guardedEnd.ms).toBeLessThan(900); // a retry's backoff alone is 400-600 ms more
    expect(server.calls.Hold).toBe(2); // one each
  });

  it('a peer that accepts and never speaks HTTP/2: DEADLINE_EXCEEDED at the timeout, as raw grpc-js (was: UNAVAILABLE after the connect timeouts)', async () => {
    const held = new Set<net.Socket>();
    const silent = net.createServer((s) => void held.add(s.on('error', () => {})));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => {
      for (const s of held) s.destroy();
      return new Promise((resolve) => silent.close(resolve));
    });
    const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const raw = new EchoClient(address, grpc.credentials.createInsecure(), HOLD_400);
    cleanup.push(() => raw.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), closeTimeout: 100, connectTimeout: 3_000 });
    cleanup.push(() => guard.close());
    const guarded = new EchoClient(address, grpc.credentials.createInsecure(), { ...HOLD_400, ...guard.clientOptions() });
    cleanup.push(() => guarded.close());
    const [rawEnd, guardedEnd] = await Promise.all([hold(raw), hold(guarded)]);
    expect(rawEnd.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(guardedEnd.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(guardedEnd.ms).toBeLessThan(1_500);
  });
});

describe('methodTimeouts reads the service config as grpc-js does', () => {
  const path = '/pkg.Svc/Get';
  it.each([
    ['no service config', {}, undefined],
    ['no timeout in it', config([{ name: [{ service: 'pkg.Svc' }] }]), undefined],
    ['a config that does not parse', { 'grpc.service_config': '{' }, undefined],
    ['a string in whole seconds', config([{ name: [{}], timeout: '2s' }]), 2_000],
    ["a string's fraction is whole nanoseconds (grpc-js: '0.3s' is 3 ns)", config([{ name: [{}], timeout: '0.3s' }]), 0],
    ['nine fraction digits', config([{ name: [{}], timeout: '1.250000000s' }]), 1_250],
    ['an object', config([{ name: [{}], timeout: { seconds: 1, nanos: 500_000_000 } }]), 1_500],
    ['a string grpc-js refuses', config([{ name: [{}], timeout: '2 s' }]), undefined],
    [
      'service and method beat service, which beats an empty name, whatever the order',
      config([
        { name: [{}], timeout: '9s' },
        { name: [{ service: 'pkg.Svc' }], timeout: '5s' },
        { name: [{ service: 'pkg.Svc', method: 'Get' }], timeout: '1s' },
      ]),
      1_000,
    ],
    ['a service name without the method', config([{ name: [{}], timeout: '9s' }, { name: [{ service: 'pkg.Svc' }], timeout: '5s' }]), 5_000],
    ['another method of the service: the service-wide one', config([{ name: [{ service: 'pkg.Svc', method: 'Put' }], timeout: '1s' }, { name: [{}], timeout: '9s' }]), 9_000],
    ['a matching config without a timeout: none, even when a less specific one has one', config([{ name: [{ service: 'pkg.Svc' }] }, { name: [{}], timeout: '9s' }]), undefined],
  ])('%s', (_name, options, expected) => {
    expect(methodTimeouts(options)?.(path)).toBe(expected);
  });
});
