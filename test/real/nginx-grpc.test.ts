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
import { load } from './load.js';
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

/** Echo calls through `client` in `callers` loops until `done()`, by grpc status. */
const calls = (client: EchoClient, callers: number, done: () => boolean): Promise<Record<string, number>> =>
  load(callers, () => echo(client).then(() => 'OK'), (err) => grpc.status[(err as grpc.ServiceError).code] ?? String(err), done);

/**
 * A grpc-js echo server behind nginx, a guarded and a raw client of it, and 8 callers on each
 * until `stop()`.
 */
async function setUp(): Promise<{ server: EchoServer; nginx: Nginx; breaker: HostBreaker; guarded: EchoClient; stop: () => Promise<[Record<string, number>, Record<string, number>]> }> {
  const server = await echoServer();
  open.push(() => server.close());
  const nginx = await Nginx.start('', server.port);
  open.push(() => nginx.close());
  const breaker = new HostBreaker();
  const guard = new GrpcGuard({ breaker });
  open.push(() => guard.close());
  const guarded = new EchoClient(`127.0.0.1:${nginx.grpc}`, grpc.credentials.createInsecure(), guard.clientOptions());
  const raw = new EchoClient(`127.0.0.1:${nginx.grpc}`, grpc.credentials.createInsecure());
  open.push(() => guarded.close(), () => raw.close());
  let stopped = false;
  const runs = Promise.all([calls(guarded, 8, () => stopped), calls(raw, 8, () => stopped)]);
  return {
    server,
    nginx,
    breaker,
    guarded,
    stop: () => {
      stopped = true;
      return runs;
    },
  };
}

describe('gRPC through a real nginx', () => {
  it('five reloads under load: every guarded call answered, each executed once', async () => {
    const { server, nginx, breaker, stop } = await setUp();
    for (let i = 0; i < 5; i++) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      nginx.reload();
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    const [g, r] = await stop();
    expect(twice(server)).toEqual([]);
    expect(server.calls.Echo).toBe((g.OK ?? 0) + (r.OK ?? 0));
    expect(g).toEqual({ OK: expect.any(Number) });
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
  });

  it('a 300 ms restart of nginx under load: no call executed twice, at most the calls in flight fail, the breaker never opens, the next 50 calls answered', async () => {
    const { server, nginx, breaker, guarded, stop } = await setUp();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await nginx.stop();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await nginx.start();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const [g] = await stop();
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
