/**
 * A call the server answered that loses its connection ends with grpc-js's own status, as with
 * grpc-js alone ("read ECONNRESET"), not the pool's release of the connection ("dialguard:
 * connection #1 ... is gone", the errno lost and a pool key in the text).
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { countingRelay } from './helpers.js';

const cleanup = leakCheckEach();
const id = (b: Buffer): Buffer => b;
const service = {
  Feed: { path: '/t.S/Feed', requestStream: false, responseStream: true, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id },
} as const;
const Client = grpc.makeGenericClientConstructor(service, 'S');

/** A server whose Feed writes three messages and then holds the stream open. */
async function feedServer(): Promise<number> {
  const server = new grpc.Server();
  server.addService(service, {
    Feed: (c: grpc.ServerWritableStream<Buffer, Buffer>) => {
      for (let i = 0; i < 3; i++) c.write(Buffer.from(String(i)));
      c.on('error', () => {});
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  cleanup.push(() => server.forceShutdown());
  return port;
}

/** Reads Feed through `client` until 3 messages arrived, resets `relay`'s connections, returns the error. */
async function resetUnder(client: grpc.Client, relay: Awaited<ReturnType<typeof countingRelay>>): Promise<grpc.ServiceError> {
  const call = client.makeServerStreamRequest(service.Feed.path, id, id, Buffer.from('go'), new grpc.Metadata(), {});
  let messages = 0;
  call.on('data', () => messages++);
  const failed = new Promise<grpc.ServiceError>((resolve) => call.on('error', resolve));
  await eventually(() => messages, (n) => n === 3);
  await relay.resetConnections();
  return failed;
}

describe('grpc guard: a connection reset under a call the server answered', () => {
  it("ends the call with grpc-js's own status, as grpc-js alone does", async () => {
    const port = await feedServer();
    const relay = await countingRelay({ host: '127.0.0.1', port });
    cleanup.push(() => relay.close());
    const raw = new Client(relay.address, grpc.credentials.createInsecure());
    cleanup.push(() => raw.close());
    const rawErr = await resetUnder(raw, relay);
    const guard = new GrpcGuard({ connectTimeout: 1_000, closeTimeout: 100, breaker: new HostBreaker() });
    const guarded = new Client(relay.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => guard.close());
    cleanup.push(() => guarded.close());
    const err = await resetUnder(guarded, relay);
    expect(rawErr.code).toBe(grpc.status.UNAVAILABLE);
    expect({ code: err.code, details: err.details }).toEqual({ code: rawErr.code, details: rawErr.details });
    expect(err.details).not.toMatch(/dialguard/);
    expect(guard.stats().gone).toBe(1);
  });
});
