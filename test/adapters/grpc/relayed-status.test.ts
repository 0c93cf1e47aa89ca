/**
 * A server that relays its upstream's failure after it has begun answering (a gateway whose
 * stream wrote a message, then passed on its upstream's ServiceError) sends grpc-js's own words
 * ("No connection established. Last error: ...") as its status. Read by their details alone, they
 * said "never sent", and `retry()` ran a non-idempotent call the server had executed three times.
 * Plain grpc-js cannot tell such a relay from its own status, so its details never prove a call
 * unsent now; the guard, which sees whether a response began, marks its own (CLIENT_MADE).
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { classify } from '../../../src/core/classify.js';
import { retry } from '../../../src/retry/retry.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanup = leakCheckEach();
const bytes = { requestSerialize: (x: Buffer) => x, requestDeserialize: (x: Buffer) => x, responseSerialize: (x: Buffer) => x, responseDeserialize: (x: Buffer) => x };
const service = {
  Stream: { path: '/t.Gateway/Stream', requestStream: false, responseStream: true, ...bytes },
  Call: { path: '/t.Gateway/Call', requestStream: false, responseStream: false, ...bytes },
} as const;
const Client = grpc.makeGenericClientConstructor(service, 'Gateway');

describe('classify + retry: a status a server relayed after answering', () => {
  it('a non-idempotent stream the server ran, then failed with its upstream\'s "No connection established", runs once', async () => {
    const down = await refusing();
    cleanup.push(() => down.close());
    const upstream = new Client(down.address, grpc.credentials.createInsecure());
    cleanup.push(() => upstream.close());
    let runs = 0;
    const server = new grpc.Server();
    server.addService(service, {
      Stream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        runs++; // the side effect
        call.write(Buffer.from('partial'));
        upstream.makeUnaryRequest(service.Call.path, (x: Buffer) => x, (x: Buffer) => x, Buffer.from('q'), (err) => (err ? call.emit('error', err) : call.end()));
      },
      Call: (_c: unknown, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.from('x')),
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    cleanup.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
    const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    cleanup.push(() => client.close());
    const stream = (): Promise<void> =>
      new Promise((resolve, reject) => {
        const s = client.makeServerStreamRequest(service.Stream.path, (x: Buffer) => x, (x: Buffer) => x, Buffer.from('go'), new grpc.Metadata(), {});
        s.on('data', () => {});
        s.on('error', reject);
        s.on('end', resolve);
      });
    const err = (await retry(stream, { maxAttempts: 3, budget: null, backoff: () => 1 }).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(runs).toBe(1);
    const relayed = (err as { cause?: unknown }).cause ?? err;
    expect(String((relayed as grpc.ServiceError).details)).toMatch(/^No connection established/);
    expect(classify(relayed)).toMatchObject({ kind: 'dial', notSent: false });
  });
});
