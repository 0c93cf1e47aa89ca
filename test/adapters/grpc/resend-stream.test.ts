/**
 * A streaming call sent again on a fresh channel (idempotent, its connection dead before the
 * server answered) replays every message it had sent, in order, then what the caller writes
 * after. grpc-js takes one write at a time; a replay handed over in one loop kept only the last
 * message, and the server ran the call on truncated input. A stock grpc-js server behind a relay
 * whose connection is reset; messages counted per server stream.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, countingRelay, echoService } from './helpers.js';

const cleanup = leakCheckEach();

describe('grpc guard: a streaming call sent again', () => {
  it('a bidi call with 3 messages out when its connection dies is replayed whole on the fresh channel: m0, m1, m2, then last', async () => {
    const streams: string[][] = [];
    const server = new grpc.Server();
    const handlers = { Echo: () => {}, Hold: () => {}, Fail: () => {}, Count: () => {} } as Record<string, grpc.UntypedHandleCall>;
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
    const guard = new GrpcGuard({ breaker: new HostBreaker(), retry: false, idempotent: () => true, closeTimeout: 100 });
    cleanup.push(() => guard.close());
    const client = new EchoClient(relay.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => client.close());

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
