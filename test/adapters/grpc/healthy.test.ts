/**
 * The guarded client against a healthy grpc-js server: every call kind works through the one-line
 * client options, clients share one channel per target (counted at a relay in front of the
 * server), and nothing is left open.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, countingRelay, echoServer } from './helpers.js';

const cleanup = leakCheckEach();

/** Closes `guard` and checks it left no channel, connect attempt or call behind. */
async function closed(guard: GrpcGuard): Promise<void> {
  await guard.close();
  expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
}

function guard(options: GrpcGuardOptions = {}): GrpcGuard {
  const g = new GrpcGuard({ connectTimeout: 1_000, breaker: new HostBreaker(), ...options });
  cleanup.push(() => closed(g));
  return g;
}

function client(g: GrpcGuard, address: string, options?: grpc.ClientOptions): EchoClient {
  const c = new EchoClient(address, grpc.credentials.createInsecure(), g.clientOptions(options));
  cleanup.push(() => c.close());
  return c;
}

describe('grpc guard: a healthy server', () => {
  it('16 concurrent calls from two clients ride 1 connection', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const g = guard();
    const a = client(g, relay.address);
    const b = client(g, relay.address);
    const replies = await Promise.all(Array.from({ length: 16 }, (_, i) => call(i % 2 ? a : b, 'Echo', `m${i}`)));
    expect(replies.map(String)).toEqual(Array.from({ length: 16 }, (_, i) => `m${i}`));
    expect(relay.attempts).toBe(1);
    expect(g.stats()).toMatchObject({ opened: 1, connections: 1, gone: 0 });
  });

  it('different channel options get a channel of their own', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const relay = await countingRelay(server);
    cleanup.push(() => relay.close());
    const g = guard();
    await call(client(g, relay.address), 'Echo');
    await call(client(g, relay.address, { 'grpc.max_receive_message_length': 1024 }), 'Echo');
    await call(client(g, `dns:${relay.address}`), 'Echo');
    expect(relay.attempts).toBe(3);
  });

  it('server streaming and bidi streaming work, messages sent before the channel is up included', async () => {
    const server = await echoServer('::1');
    cleanup.push(() => server.close());
    const g = guard();
    const c = client(g, server.address);
    const counted: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const s = c.Count(Buffer.from('5'), new grpc.Metadata(), {});
      s.on('data', (d: Buffer) => counted.push(String(d)));
      s.on('error', reject);
      s.on('end', () => resolve());
    });
    expect(counted).toEqual(['0', '1', '2', '3', '4']);
    const chat = c.Chat(new grpc.Metadata(), {});
    const echoed: string[] = [];
    chat.on('data', (d: Buffer) => echoed.push(String(d)));
    const ended = new Promise<void>((resolve, reject) => {
      chat.on('error', reject);
      chat.on('end', () => resolve());
    });
    for (const m of ['a', 'b', 'c']) chat.write(Buffer.from(m));
    chat.end();
    await ended;
    expect(echoed).toEqual(['a', 'b', 'c']);
  });

  it('waitForReady connects, and getConnectivityState reports the pooled channel', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const g = guard();
    const c = client(g, server.address);
    expect(c.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.IDLE);
    await new Promise<void>((resolve, reject) => c.waitForReady(Date.now() + 2_000, (err) => (err ? reject(err) : resolve())));
    expect(c.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.READY);
    c.close();
    expect(c.getChannel().getConnectivityState(false)).toBe(grpc.connectivityState.SHUTDOWN);
    expect(() => c.Echo(Buffer.from('x'), new grpc.Metadata(), {}, () => {})).toThrow(/shut down/);
  });
});
