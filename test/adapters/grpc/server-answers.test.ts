/**
 * A status that arrived from the server is the server's answer (issue 18, break 1): whatever its
 * details say, it is never "not sent", never sent again for a method not declared idempotent, and
 * never proof that the shared connection died. Against a stock grpc-js server, counting how many
 * times the handler ran and what an unrelated stream on the same channel received.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

/** A guard with default retries (3 attempts) but no shared budget or breaker between tests. */
function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient } {
  const guard = new GrpcGuard({ connectTimeout: 1_000, closeTimeout: 100, breaker: new HostBreaker(), retry: { backoff: () => 20, budget: null }, ...options });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(async () => {
    await guard.close();
    expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
  });
  cleanup.push(() => client.close());
  return { guard, client };
}

/** Details a server may send that read like a failure of the transport or of a connect. */
const transportTexts: Array<[grpc.status, string]> = [
  [grpc.status.UNAVAILABLE, 'Failed to connect to database'],
  [grpc.status.UNAVAILABLE, 'No connection established. Last error: connect ECONNREFUSED 10.1.2.3:5432'],
  [grpc.status.UNAVAILABLE, 'read ECONNRESET'],
  [grpc.status.UNAVAILABLE, 'Connection dropped'],
  [grpc.status.UNAVAILABLE, 'Stream refused by server'],
  [grpc.status.UNAVAILABLE, 'Channel closed before call started'],
  [grpc.status.UNKNOWN, 'Write error: write EPIPE'],
  [grpc.status.CANCELLED, 'Connection dropped'],
];

describe('grpc guard: a status the server sent is its answer (issue 18 break 1)', () => {
  it.each(transportTexts)('a trailers-only %i "%s" from a non-idempotent handler: the handler ran once, the caller gets it as sent', async (code, details) => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address);
    const err = await failure(call(client, 'Fail', `${code}:${details}`));
    expect({ code: err.code, details: err.details }).toEqual({ code, details });
    expect(server.calls.Fail).toBe(1);
    const c = classify(err);
    expect(c).toMatchObject({ kind: 'application', notSent: false, connectionDead: false });
    // The channel that carried the answer stays: the next call rides it.
    expect(String(await call(client, 'Echo', 'next'))).toBe('next');
    expect(relay.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 0, opened: 1 });
  });

  it('DEADLINE_EXCEEDED sent by the server on an idempotent method is final: the handler ran once', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { client } = setup(server.address, { idempotent: () => true });
    const err = await failure(call(client, 'Fail', `${grpc.status.DEADLINE_EXCEEDED}:Deadline exceeded`));
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
    expect(server.calls.Fail).toBe(1);
  });

  it('a remote EOF the server relayed is still retried for an idempotent method (seed 004), never for another', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const idem = setup(server.address, { idempotent: () => true });
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    expect(String(await call(idem.client, 'Echo', 'again'))).toBe('again');
    expect(server.calls.Echo).toBe(2);
    const plain = setup(server.address);
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'rpc error: EOF' };
    expect((await failure(call(plain.client, 'Echo'))).details).toBe('rpc error: EOF');
    expect(server.calls.Echo).toBe(3);
  });

  it('a handler answering "read ECONNRESET" does not kill the shared channel: an unrelated stream on it gets all 10 messages', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address);
    const chat = client.Chat(new grpc.Metadata(), {});
    const got: string[] = [];
    chat.on('data', (d: Buffer) => got.push(String(d)));
    const ended = new Promise<grpc.StatusObject>((resolve) => chat.on('status', resolve));
    chat.on('error', () => {});
    for (let i = 0; i < 5; i++) chat.write(Buffer.from(String(i)));
    await eventually(() => got.length, (n) => n === 5);
    for (const details of ['read ECONNRESET', 'Connection dropped', 'Session closed with error code 2']) {
      const err = await failure(call(client, 'Fail', `${grpc.status.UNAVAILABLE}:${details}`));
      expect(err.details).toBe(details);
    }
    for (let i = 5; i < 10; i++) chat.write(Buffer.from(String(i)));
    chat.end();
    const status = await ended;
    expect(status.code).toBe(grpc.status.OK);
    expect(got).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
    expect(server.calls.Fail).toBe(3);
    expect(relay.attempts).toBe(1);
    expect(guard.stats()).toMatchObject({ gone: 0, opened: 1 });
  });

  it('a connection that dies after the server\'s headers is still the transport\'s failure: the stream ends UNAVAILABLE, read as a dead connection', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const { client, guard } = setup(relay.address);
    const chat = client.Chat(new grpc.Metadata(), {});
    const got: string[] = [];
    chat.on('data', (d: Buffer) => got.push(String(d)));
    const failed = new Promise<grpc.ServiceError>((resolve) => chat.on('error', resolve));
    chat.write(Buffer.from('a'));
    await eventually(() => got.length, (n) => n === 1);
    await relay.resetConnections();
    const err = await failed;
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(classify(err)).toMatchObject({ kind: 'connection', connectionDead: true });
    expect(server.calls.Chat).toBe(1); // answered: never resent
    await eventually(() => guard.stats().gone, (n) => n === 1);
  });

  it('a status the server chose after its GOAWAY retired the channel is final for an idempotent call (issue 12 defect 1)', async () => {
    // A stock grpc-js server: Hold answers NOT_FOUND once released; tryShutdown() sends GOAWAY
    // and closes the port while letting the held call finish.
    let release: (() => void) | undefined;
    let holds = 0;
    const server = new grpc.Server();
    server.addService(echoService, {
      Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request),
      Hold: (_c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        holds++;
        release = () => cb({ code: grpc.status.NOT_FOUND, details: 'no such key' });
      },
      Fail: () => {},
      Count: () => {},
      Chat: () => {},
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    cleanup.push(() => server.forceShutdown());
    const { client, guard } = setup(`127.0.0.1:${port}`, { idempotent: () => true });
    const retired: string[] = [];
    guard.on('retired', (e) => retired.push(e.reason));
    const held = failure(call(client, 'Hold'));
    await eventually(() => holds, (n) => n === 1);
    const shutDown = new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    await eventually(() => retired.length, (n) => n === 1);
    release!();
    const err = await held;
    expect({ code: err.code, details: err.details }).toEqual({ code: grpc.status.NOT_FOUND, details: 'no such key' });
    expect(holds).toBe(1);
    expect(guard.stats().attempts).toBe(0); // no dial was started to send it again
    await shutDown;
  });
});

describe('grpc guard: no callback inside the caller\'s own call (issue 18 break 3)', () => {
  it('a call cancelled before its channel is READY gets its status on a later tick, not inside cancel()', async () => {
    const peer = await acceptAndHold();
    cleanup.push(() => peer.close());
    const { client } = setup(peer.address, { retry: false });
    let insideCancel = false;
    const seen: Array<{ inside: boolean; code: grpc.status | undefined }> = [];
    const settled = new Promise<void>((resolve) => {
      const c = client.Echo(Buffer.from('x'), new grpc.Metadata(), {}, (err) => {
        seen.push({ inside: insideCancel, code: err?.code });
        resolve();
      });
      setImmediate(() => {
        insideCancel = true;
        c.cancel();
        insideCancel = false;
      });
    });
    await settled;
    expect(seen).toEqual([{ inside: false, code: grpc.status.CANCELLED }]);
  });

  it('a connectivity watcher never runs inside the caller\'s own getConnectivityState(true)', async () => {
    const peer = await acceptAndHold();
    cleanup.push(() => peer.close());
    const { client } = setup(peer.address, { retry: false });
    const channel = client.getChannel();
    let inside = false;
    const seen: boolean[] = [];
    const changed = new Promise<void>((resolve) =>
      channel.watchConnectivityState(grpc.connectivityState.IDLE, Date.now() + 2_000, () => {
        seen.push(inside);
        resolve();
      }),
    );
    inside = true;
    channel.getConnectivityState(true);
    inside = false;
    await changed;
    expect(seen).toEqual([false]);
    expect(channel.getConnectivityState(false)).toBe(grpc.connectivityState.CONNECTING);
  });
});
