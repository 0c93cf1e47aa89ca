/**
 * A server that sent a call's headers and then died (its process killed: `forceShutdown()`) never
 * sent the status grpc-js reports for the reset stream (CANCELLED "Call cancelled", or
 * UNAVAILABLE "Connection dropped"). GrpcGuard took any status after the headers on a transport
 * not yet seen closed for the server's answer: `application`, not transient, the host alive. A
 * ServerSet then neither failed the idempotent calls over nor moved the dead server back (an
 * outside review, r145: 0 of 12 served where plain grpc-js served 12 of 12 through the live
 * server, and `pick()` kept answering the dead one). grpc-js's own words for a reset stream are
 * read as plain grpc-js's are; a status the server sent after its headers stays its answer.
 * Stock grpc-js servers on 127.0.0.1, plain grpc-js in the same test.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ServerSet } from '../../../src/retry/server-set.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, echoService } from './helpers.js';

const cleanup = leakCheckEach();

/** A stock server whose Hold sends its headers, then `then(call, callback)` (by default: nothing, held). */
async function headersFirst(then: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => void = () => {}): Promise<{ server: grpc.Server; address: string; held: () => number }> {
  let held = 0;
  const server = new grpc.Server();
  const unimplemented = (_c: unknown, cb: grpc.sendUnaryData<Buffer>): void => cb({ code: grpc.status.UNIMPLEMENTED });
  server.addService(echoService, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, c.request),
    Hold: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      held++;
      c.sendMetadata(new grpc.Metadata());
      then(c, cb);
    },
    Fail: unimplemented,
    Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => c.end(),
    Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  cleanup.push(() => server.forceShutdown());
  return { server, address: `127.0.0.1:${port}`, held: () => held };
}

/** A Hold call on `client` that ends once it failed; `killed` runs when its headers arrive. */
function holdUntilKilled(client: EchoClient, killed: () => void): Promise<grpc.ServiceError> {
  return new Promise((resolve, reject) => {
    const c = client.Hold(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (err) => (err ? resolve(err) : reject(new Error('served'))));
    c.on('metadata', () => setTimeout(killed, 20));
  });
}

function guardedClient(address: string): EchoClient {
  const guard = new GrpcGuard({ breaker: new HostBreaker(), closeTimeout: 100, connectTimeout: 1_000, idempotent: () => true, retry: { maxAttempts: 1 } });
  cleanup.push(() => guard.close());
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => client.close());
  return client;
}

describe('GrpcGuard: a server that sent its headers, then died', () => {
  it('fails the call as plain grpc-js reads it (a reset stream, transient), not as the server\'s answer (was: application)', async () => {
    const a = await headersFirst();
    const b = await headersFirst();
    const plain = new EchoClient(a.address, grpc.credentials.createInsecure());
    cleanup.push(() => plain.close());
    const plainErr = await holdUntilKilled(plain, () => a.server.forceShutdown());
    const guardedErr = await holdUntilKilled(guardedClient(b.address), () => b.server.forceShutdown());
    expect(guardedErr.code).toBe(plainErr.code);
    const c = classify(guardedErr);
    expect(c.kind).toBe(classify(plainErr).kind);
    expect(c.kind).not.toBe('application');
    expect(c).toMatchObject({ transient: true, notSent: false });
  });

  it('in a ServerSet: the idempotent call goes to the live server, and the dead one moves back (was: 0 served, the dead one kept first)', async () => {
    const dead = await headersFirst();
    const live = await headersFirst((c, cb) => cb(null, c.request));
    const clients = new Map([dead.address, live.address].map((address) => [address, guardedClient(address)]));
    const set = new ServerSet([dead.address, live.address]);
    const answer = await set.run(
      (server) =>
        new Promise<string>((resolve, reject) => {
          const c = clients.get(server)!.Hold(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (err, res) => (err ? reject(err) : resolve(String(res))));
          if (server === dead.address) c.on('metadata', () => setTimeout(() => dead.server.forceShutdown(), 20));
        }),
      { idempotent: true, maxAttempts: 2, budget: null, backoff: () => 0 },
    );
    expect(answer).toBe('x');
    expect([dead.held(), live.held()]).toEqual([1, 1]);
    expect(set.pick()).toBe(live.address);
  });

  it('a status the server sent after its headers is still its answer: application, not retried', async () => {
    const s = await headersFirst((_c, cb) => setTimeout(() => cb({ code: grpc.status.CANCELLED, details: 'handler gave up' }), 20));
    const client = guardedClient(s.address);
    const err = await new Promise<grpc.ServiceError>((resolve, reject) => {
      client.Hold(Buffer.from('x'), new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (e) => (e ? resolve(e) : reject(new Error('served'))));
    });
    expect(err.code).toBe(grpc.status.CANCELLED);
    expect(classify(err).kind).toBe('application');
    expect(s.held()).toBe(1);
  });
});
