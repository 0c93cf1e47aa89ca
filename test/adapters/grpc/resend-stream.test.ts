/**
 * A streaming call sent again on a fresh channel (idempotent, its connection dead before the
 * server answered) replays every message it had sent, in order, then what the caller writes
 * after. grpc-js takes one write at a time; a replay handed over in one loop kept only the last
 * message, and the server ran the call on truncated input. A stock grpc-js server behind a relay
 * whose connection is reset; messages counted per server stream.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { eventually } from '../../helpers/eventually.js';
import { freePort } from '../../../src/testing/local-process.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoService } from './helpers.js';

const cleanup = leakCheckEach();

describe('grpc guard: a streaming call sent again', () => {
  it('a bidi call with 3 messages out when its connection dies is replayed whole on the fresh channel: m0, m1, m2, then last', async () => {
    const streams: string[][] = [];
    const server = new grpc.Server();
    const echo = (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>): void => cb(null, c.request);
    const handlers = { Echo: echo, Hold: () => {}, Fail: () => {}, Count: () => {} } as Record<string, grpc.UntypedHandleCall>;
    handlers.Chat = (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      const seen: string[] = [];
      streams.push(seen);
      call.on('data', (m: Buffer) => void seen.push(String(m)));
      call.on('error', () => {});
      call.on('end', () => {
        call.write(Buffer.from(seen.join(',')));
        call.end();
      });
    };
    server.addService(echoService, handlers);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    cleanup.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
    const relay = await countingRelay({ host: '127.0.0.1', port });
    cleanup.push(() => relay.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), retry: { maxAttempts: 2, backoff: () => 5_000, budget: null }, idempotent: () => true, closeTimeout: 100 });
    cleanup.push(() => guard.close());
    const client = new EchoClient(relay.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => client.close());

    // The channel works (a connection that dies under its first calls sends none of them again).
    expect(String(await call(client, 'Echo', 'warm'))).toBe('warm');
    const chat = client.Chat(new grpc.Metadata(), { deadline: Date.now() + 10_000 });
    const answers: string[] = [];
    chat.on('data', (m: Buffer) => void answers.push(String(m)));
    const ended = new Promise<grpc.StatusObject>((resolve) => chat.on('status', resolve));
    chat.on('error', () => {});
    for (const m of ['m0', 'm1', 'm2']) await new Promise<void>((resolve) => chat.write(Buffer.from(m), () => resolve()));
    await eventually(() => streams[0]?.length ?? 0, (n) => n === 3);
    await relay.resetConnections(); // the connection dies; the server has answered nothing
    await eventually(() => streams.length, (n) => n === 2);
    chat.write(Buffer.from('last'));
    chat.end();
    const status = await ended;
    expect(status.code).toBe(grpc.status.OK);
    expect(streams[1]).toEqual(['m0', 'm1', 'm2', 'last']); // was ['m2', 'last']
    expect(answers).toEqual(['m0,m1,m2,last']);
  });
});

describe('grpc guard: writes made before the call had a channel', () => {
  it('a streaming call that fails before it gets one calls back every write, so a pipeline() into it settles (was: pending forever)', async () => {
    const port = await freePort(); // nothing listens: refused
    const guard = new GrpcGuard({ breaker: new HostBreaker(), retry: false, connectTimeout: 1_000 });
    cleanup.push(() => guard.close());
    const client = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => client.close());
    const call = client.Chat(new grpc.Metadata(), { deadline: Date.now() + 2_000 });
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    call.on('data', () => {});
    const written: Array<Promise<string>> = ['a', 'b', 'c'].map(
      (m) => new Promise<string>((resolve) => call.write(Buffer.from(m), () => resolve(`${m} called back`))),
    );
    call.end();
    expect((await status).code).toBe(grpc.status.UNAVAILABLE);
    const bound = new Promise<string>((resolve) => setTimeout(() => resolve('never called back'), 1_000).unref());
    expect(await Promise.all(written.map((w) => Promise.race([w, bound])))).toEqual(['a called back', 'b called back', 'c called back']);
    const piped = pipeline(Readable.from([Buffer.from('x')]), client.Chat(new grpc.Metadata(), { deadline: Date.now() + 2_000 }) as unknown as NodeJS.WritableStream).then(
      () => 'settled',
      () => 'settled',
    );
    expect(await Promise.race([piped, new Promise<string>((resolve) => setTimeout(() => resolve('pending'), 3_000).unref())])).toBe('settled');
  });
});

