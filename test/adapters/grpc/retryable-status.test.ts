/**
 * gRPC `retryableStatusCodes` (issue 16), in the shape of grpc-js's retryPolicy: a status the
 * server sent an idempotent method, before any response header, is retried when its code is
 * listed; never for a method not declared idempotent (issue 18), never once the call committed,
 * never against the server's pushback veto, and never taken as proof the connection died.
 * Against a stock grpc-js server, counting how many times each handler ran.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

/** What the next failing answers are: a status, optional trailers, optional messages first (Count). */
interface Script {
  code: grpc.status;
  details: string;
  pushback?: string;
}

/** A stock grpc-js server whose Echo and Count fail per `script` (one entry per call), then answer. */
async function scriptedServer(): Promise<{ address: string; port: number; host: '127.0.0.1'; script: Script[]; runs: { Echo: number; Count: number } }> {
  const runs = { Echo: 0, Count: 0 };
  const script: Script[] = [];
  const server = new grpc.Server();
  const trailers = (s: Script): grpc.Metadata => {
    const m = new grpc.Metadata();
    if (s.pushback !== undefined) m.set('grpc-retry-pushback-ms', s.pushback);
    return m;
  };
  server.addService(echoService, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      runs.Echo++;
      const s = script.shift();
      if (s === undefined) cb(null, c.request);
      else cb({ code: s.code, details: s.details, metadata: trailers(s) });
    },
    // One message, then the scripted status: the call committed before the status came.
    Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => {
      runs.Count++;
      c.write(Buffer.from('0'));
      const s = script.shift();
      if (s === undefined) c.end();
      else c.emit('error', { code: s.code, details: s.details, metadata: trailers(s) });
    },
    Hold: () => {},
    Fail: () => {},
    Chat: () => {},
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  cleanup.push(() => server.forceShutdown());
  return { address: `127.0.0.1:${port}`, port, host: '127.0.0.1', script, runs };
}

function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient } {
  const guard = new GrpcGuard({
    connectTimeout: 1_000,
    closeTimeout: 100,
    breaker: new HostBreaker(),
    idempotent: (m) => m.endsWith('/Echo') || m.endsWith('/Count'),
    retry: { backoff: () => 5, budget: null, retryableStatusCodes: ['UNAVAILABLE', grpc.status.RESOURCE_EXHAUSTED] },
    ...options,
  });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(async () => {
    await guard.close();
    expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
  });
  cleanup.push(() => client.close());
  return { guard, client };
}

const busy = (pushback?: string): Script => ({ code: grpc.status.UNAVAILABLE, details: 'overloaded, try again', ...(pushback === undefined ? {} : { pushback }) });

describe('grpc guard: retryableStatusCodes for idempotent methods (issue 16)', () => {
  it('an idempotent call answered UNAVAILABLE then RESOURCE_EXHAUSTED succeeds on the third run, on the one connection it had', async () => {
    const server = await scriptedServer();
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address);
    server.script.push(busy(), { code: grpc.status.RESOURCE_EXHAUSTED, details: 'quota' });
    expect(String(await call(client, 'Echo', 'third'))).toBe('third');
    expect(server.runs.Echo).toBe(3);
    // A status is the server's answer, not a dead connection: nothing retired, no redial.
    expect(relay.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 0, opened: 1 });
  });

  it('the same listed status to a method not declared idempotent is final: its handler ran once', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address, { idempotent: () => false });
    server.script.push(busy());
    const err = await failure(call(client, 'Echo'));
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.UNAVAILABLE, details: 'overloaded, try again' });
    expect(server.runs.Echo).toBe(1);
  });

  it('a status not in the list (INTERNAL) is final for an idempotent method: its handler ran once', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address);
    server.script.push({ code: grpc.status.INTERNAL, details: 'bug' });
    expect((await failure(call(client, 'Echo'))).code).toBe(grpc.status.INTERNAL);
    expect(server.runs.Echo).toBe(1);
  });

  it('without retryableStatusCodes (the default) a server UNAVAILABLE is final, as before', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address, { retry: { backoff: () => 5, budget: null } });
    server.script.push(busy());
    expect((await failure(call(client, 'Echo'))).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.runs.Echo).toBe(1);
  });

  it('a listed status that keeps coming stops at maxAttempts with the last status the server sent', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address, { retry: { backoff: () => 5, budget: null, maxAttempts: 3, retryableStatusCodes: ['UNAVAILABLE'] } });
    server.script.push(busy(), busy(), busy(), busy(), busy());
    const err = await failure(call(client, 'Echo'));
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.UNAVAILABLE, details: 'overloaded, try again' });
    expect(server.runs.Echo).toBe(3);
  });

  it('a listed status after the server already sent a message (committed) is final for a server stream: its handler ran once', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address);
    server.script.push(busy());
    const stream = client.Count(Buffer.from('1'), new grpc.Metadata(), {});
    const got: string[] = [];
    stream.on('data', (d: Buffer) => got.push(String(d)));
    const err = await new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(got).toEqual(['0']);
    expect(server.runs.Count).toBe(1);
  });

  it('the server vetoes a retry with a negative grpc-retry-pushback-ms: its handler ran once', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address);
    server.script.push(busy('-1'));
    expect((await failure(call(client, 'Echo'))).code).toBe(grpc.status.UNAVAILABLE);
    expect(server.runs.Echo).toBe(1);
  });

  it('the server paces a retry with grpc-retry-pushback-ms 300: the second run starts no sooner', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address);
    await call(client, 'Echo'); // connected: only the wait is timed
    server.script.push(busy('300'));
    const started = performance.now();
    expect(String(await call(client, 'Echo', 'paced'))).toBe('paced');
    expect(performance.now() - started).toBeGreaterThanOrEqual(295);
    expect(server.runs.Echo).toBe(3);
  });

  it('a relayed EOF (retried by the default rule, no retryableStatusCodes) heeds the pushback too: a veto ends it after one run', async () => {
    const server = await scriptedServer();
    const { client } = setup(server.address, { retry: { backoff: () => 5, budget: null } });
    const eof = (pushback: string): Script => ({ code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF', pushback });
    server.script.push(eof('-1'));
    // Was: 3 runs, the veto read only for a status in retryableStatusCodes.
    expect((await failure(call(client, 'Echo'))).details).toBe('rpc error: EOF');
    expect(server.runs.Echo).toBe(1);
    // Without a veto the same answer is retried (the default rule), paced by the server's wait.
    server.script.push(eof('300'));
    const started = performance.now();
    expect(String(await call(client, 'Echo', 'paced'))).toBe('paced');
    expect(performance.now() - started).toBeGreaterThanOrEqual(295); // was: the 5 ms backoff
    expect(server.runs.Echo).toBe(3);
  });

  it.each([['OK'], [0], ['NOPE'], [17], [1.5]])('retryableStatusCodes [%s] is refused at construction, naming the option', (bad) => {
    expect(() => new GrpcGuard({ retry: { retryableStatusCodes: [bad as grpc.status] } })).toThrow(/retryableStatusCodes/);
  });
});
