/**
 * GrpcGuard behind a real nginx (`grpc_pass`, as an ingress runs gRPC), a stock grpc-js server
 * upstream: nginx reloads under load (each old worker ends its HTTP/2 connections with GOAWAY).
 * No call may fail, and none may reach the server twice.
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { EchoClient, type EchoServer, echoServer } from '../adapters/grpc/helpers.js';
import { Nginx } from './nginx-server.js';

const open: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of open.splice(0).reverse()) await c();
});

let sent = 0;

/** One Echo call carrying a token of its own (the server records each call's), deadline 5 s. */
function echo(client: EchoClient): Promise<void> {
  const metadata = new grpc.Metadata();
  metadata.set('x-token', `call-${++sent}`);
  return new Promise((resolve, reject) => client.Echo(Buffer.from('x'), metadata, { deadline: Date.now() + 5_000 }, (err) => (err ? reject(err) : resolve())));
}

/** Tokens the server executed more than once. */
function twice(server: EchoServer): string[] {
  const seen = new Set<string>();
  const again: string[] = [];
  for (const [t] of server.tokens) {
    if (t === undefined) continue;
    if (seen.has(t)) again.push(t);
    seen.add(t);
  }
  return again;
}

async function calls(client: EchoClient, n: number, done: () => boolean): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let i = 0; i < 100_000 && !done(); i++) {
        let k: string;
        try {
          await echo(client);
          k = 'OK';
        } catch (err) {
          k = grpc.status[(err as grpc.ServiceError).code] ?? String(err);
        }
        seen[k] = (seen[k] ?? 0) + 1;
      }
    }),
  );
  return seen;
}

describe('gRPC through a real nginx', () => {
  it('five reloads under load: every guarded call answered, each executed once', async () => {
    const server: EchoServer = await echoServer();
    open.push(() => server.close());
    const nginx = await Nginx.start('', server.port);
    open.push(() => nginx.close());
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker });
    open.push(() => guard.close());
    const guarded = new EchoClient(`127.0.0.1:${nginx.grpc}`, grpc.credentials.createInsecure(), guard.clientOptions());
    const raw = new EchoClient(`127.0.0.1:${nginx.grpc}`, grpc.credentials.createInsecure());
    open.push(() => guarded.close(), () => raw.close());
    let stop = false;
    const runs = Promise.all([calls(guarded, 8, () => stop), calls(raw, 8, () => stop)]);
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      nginx.reload();
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    stop = true;
    const [g, r] = await runs;
    expect(twice(server)).toEqual([]);
    expect(server.calls.Echo).toBe((g.OK ?? 0) + (r.OK ?? 0));
    expect(g).toEqual({ OK: expect.any(Number) });
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
  });

  it('a 300 ms restart of nginx under load: no call executed twice, at most the calls in flight fail, the breaker never opens, the next 50 calls answered', async () => {
    const server: EchoServer = await echoServer();
    open.push(() => server.close());
    const nginx = await Nginx.start('', server.port);
    open.push(() => nginx.close());
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker });
    open.push(() => guard.close());
    const guarded = new EchoClient(`127.0.0.1:${nginx.grpc}`, grpc.credentials.createInsecure(), guard.clientOptions());
    const raw = new EchoClient(`127.0.0.1:${nginx.grpc}`, grpc.credentials.createInsecure());
    open.push(() => guarded.close(), () => raw.close());
    let stop = false;
    const runs = Promise.all([calls(guarded, 8, () => stop), calls(raw, 8, () => stop)]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await nginx.stop();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await nginx.start();
    await new Promise((resolve) => setTimeout(resolve, 300));
    stop = true;
    const [g] = await runs;
    expect(twice(server)).toEqual([]);
    // Only a call in flight when nginx went down may fail (it may have run: not sent again), one
    // per caller; a call made while it was down waits for the dial that gets through.
    expect(g.UNAVAILABLE ?? 0).toBeLessThanOrEqual(8);
    expect(breaker.stats().opened).toBe(0);
    let ok = 0;
    for (let i = 0; i < 50; i++) {
      await echo(guarded).then(() => ok++, () => undefined);
    }
    expect(ok).toBe(50);
  });
});
