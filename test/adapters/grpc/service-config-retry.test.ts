/**
 * A client whose channel options carry grpc-js's own retry (a `grpc.service_config` retryPolicy)
 * on a guard that also retries statuses (`retry.retryableStatusCodes`): both layers retried a
 * status, each attempt of one a whole series of the other, so a handler that failed with
 * UNAVAILABLE ran 9 times (3 × 3) and the call took 1.8 s, where raw grpc-js ran it 3 times. The
 * client's constructor now refuses that pair with a TypeError saying how to keep one; either
 * alone runs a failing handler 3 times. Against a stock grpc-js server, counting handler runs.
 */
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { serviceConfigRetries } from '../../../src/adapters/grpc/options.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

const serviceConfig = JSON.stringify({
  methodConfig: [
    {
      name: [{ service: 'dialguard.test.Echo' }],
      retryPolicy: { maxAttempts: 3, initialBackoff: '0.01s', maxBackoff: '0.02s', backoffMultiplier: 2, retryableStatusCodes: ['UNAVAILABLE'] },
    },
  ],
});

/** A stock grpc-js server whose Echo always fails with UNAVAILABLE, counting its runs. */
async function unavailableServer(): Promise<{ address: string; runs: () => number }> {
  let runs = 0;
  const server = new grpc.Server();
  const refuse = (_c: unknown, cb: grpc.sendUnaryData<Buffer>): void => {
    runs++;
    cb({ code: grpc.status.UNAVAILABLE, details: 'busy' });
  };
  server.addService(echoService, { Echo: refuse, Count: () => {}, Hold: () => {}, Fail: () => {}, Sum: () => {}, Chat: () => {} } as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  cleanup.push(() => server.forceShutdown());
  return { address: `127.0.0.1:${port}`, runs: () => runs };
}

const statusRetries = { idempotent: () => true, retry: { retryableStatusCodes: ['UNAVAILABLE' as const], backoff: (): number => 5, budget: null } };

describe('grpc guard: a service config retryPolicy beside the guard’s status retries', () => {
  it('the pair is refused at the client’s constructor, naming both and the way out; nothing is held for it', async () => {
    const server = await unavailableServer();
    const guard = new GrpcGuard({ breaker: new HostBreaker(), ...statusRetries });
    cleanup.push(() => guard.close());
    const options = guard.clientOptions({ 'grpc.service_config': serviceConfig });
    expect(() => new EchoClient(server.address, grpc.credentials.createInsecure(), options)).toThrow(TypeError);
    expect(() => new EchoClient(server.address, grpc.credentials.createInsecure(), options)).toThrow(/retryableStatusCodes.*retryPolicy.*grpc\.enable_retries/);
    expect(guard.stats()).toMatchObject({ targets: 0, opened: 0 });
    expect(server.runs()).toBe(0);
  });

  it.each([
    ['grpc-js retrying (the guard retries no status)', { idempotent: () => true, retry: { backoff: (): number => 5, budget: null } }, {}],
    ['the guard retrying (grpc-js retries off)', statusRetries, { 'grpc.enable_retries': 0 }],
  ])('%s: a handler failing with UNAVAILABLE runs 3 times, not 9', async (_name, guardOptions, extra) => {
    const server = await unavailableServer();
    const guard = new GrpcGuard({ breaker: new HostBreaker(), ...guardOptions });
    cleanup.push(() => guard.close());
    const client = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions({ 'grpc.service_config': serviceConfig, ...extra }));
    cleanup.push(() => client.close());
    expect((await failure(call(client, 'Echo', 'x'))).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.runs()).toBe(3);
  });

  it('a service config with no retryPolicy sits beside the guard’s status retries', async () => {
    const server = await unavailableServer();
    const guard = new GrpcGuard({ breaker: new HostBreaker(), ...statusRetries });
    cleanup.push(() => guard.close());
    const plain = JSON.stringify({ methodConfig: [{ name: [{ service: 'dialguard.test.Echo' }], timeout: '5s' }] });
    const client = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions({ 'grpc.service_config': plain }));
    cleanup.push(() => client.close());
    expect((await failure(call(client, 'Echo', 'x'))).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.runs()).toBe(3);
  });

  it('reads a retry or hedging policy in any method config, unless grpc-js retries are off', () => {
    const config = (methodConfig: unknown): string => JSON.stringify({ methodConfig });
    const hedging = config([{ name: [{}], timeout: '1s' }, { name: [{ service: 's' }], hedgingPolicy: { maxAttempts: 2 } }]);
    expect(serviceConfigRetries({ 'grpc.service_config': hedging })).toBe(true);
    expect(serviceConfigRetries({ 'grpc.service_config': serviceConfig, 'grpc.enable_retries': 1 })).toBe(true);
    expect(serviceConfigRetries({ 'grpc.service_config': serviceConfig, 'grpc.enable_retries': 0 })).toBe(false);
    for (const none of [config([{ name: [{}], timeout: '1s' }]), config([null, 'retryPolicy']), config({ retryPolicy: {} }), '{}', 'null', 'not json']) {
      expect(serviceConfigRetries({ 'grpc.service_config': none })).toBe(false);
    }
    expect(serviceConfigRetries({})).toBe(false);
  });
});

/**
 * A stock grpc-js server behind a loopback TCP relay; its Echo counts the run, then the relay
 * cuts every connection (the handler ran, no answer went out: a crash or a network cut).
 */
async function cuttingServer(): Promise<{ address: string; runs: () => number; connections: () => number }> {
  let runs = 0;
  let connections = 0;
  const pairs = new Set<net.Socket>();
  const server = new grpc.Server();
  const cut = (): void => {
    for (const s of pairs) s.destroy();
    pairs.clear();
  };
  const run = (): void => {
    runs++;
    setImmediate(cut);
  };
  server.addService(echoService, { Echo: run, Count: () => {}, Hold: () => {}, Fail: () => {}, Sum: () => {}, Chat: () => {} } as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  const relay = net.createServer((down) => {
    connections++;
    const up = net.connect(port, '127.0.0.1');
    pairs.add(down).add(up);
    down.pipe(up).pipe(down);
    const drop = (): void => {
      down.destroy();
      up.destroy();
      pairs.delete(down);
      pairs.delete(up);
    };
    down.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => {
    cut();
    server.forceShutdown();
    return new Promise<void>((resolve) => relay.close(() => resolve()));
  });
  return { address: `127.0.0.1:${(relay.address() as net.AddressInfo).port}`, runs: () => runs, connections: () => connections };
}

/**
 * A gRPC server on node:http2 whose every call counts a run, then destroys its session (a
 * GOAWAY, then the close: a server process going down mid-call), never answering.
 */
async function goingAwayServer(): Promise<{ address: string; runs: () => number; connections: () => number }> {
  let runs = 0;
  let connections = 0;
  const server = http2.createServer();
  server.on('session', (session) => {
    connections++;
    session.on('error', () => {});
  });
  server.on('stream', (stream) => {
    runs++;
    stream.on('error', () => {});
    stream.resume();
    stream.session?.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, runs: () => runs, connections: () => connections };
}

describe('grpc guard: grpc-js’s own retryPolicy, the connection cut after the handler ran', () => {
  const twice = JSON.stringify({
    methodConfig: [
      {
        name: [{ service: 'dialguard.test.Echo' }],
        retryPolicy: { maxAttempts: 2, initialBackoff: '0.05s', maxBackoff: '0.1s', backoffMultiplier: 1.5, retryableStatusCodes: ['UNAVAILABLE'] },
      },
    ],
  });
  it.each([
    ['plain grpc-js', undefined],
    ['a default guard', {}],
    ['a guard with retry: false', { retry: false as const }],
    ['a guard calling every method idempotent', { idempotent: () => true }],
  ])('%s: the handler runs at most the policy’s 2 times (was: 4 through the guard, even with retry: false), and the call fails UNAVAILABLE never saying it was not started', async (_name, guardOptions) => {
    for (const server of [await cuttingServer(), await goingAwayServer()]) {
    let options: grpc.ClientOptions = { 'grpc.service_config': twice };
    if (guardOptions !== undefined) {
      const guard = new GrpcGuard({ breaker: new HostBreaker(), ...guardOptions });
      cleanup.push(() => guard.close());
      options = guard.clientOptions(options);
    }
    const client = new EchoClient(server.address, grpc.credentials.createInsecure(), options);
    cleanup.push(() => client.close());
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 3_000 }));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).not.toMatch(/before call started/);
    expect(server.runs()).toBeGreaterThanOrEqual(1);
    expect(server.runs()).toBeLessThanOrEqual(2);
    }
  });
});
