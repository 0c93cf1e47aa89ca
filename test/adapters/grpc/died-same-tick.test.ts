/**
 * A stock grpc-js server shut down in the same tick as a call on its warm channel: grpc-js says
 * the call found no connection ("No connection established"), the guard's pool goes back for a
 * fresh channel as never sent, and that redial is refused. The call was never sent, and says so:
 * it said "maybe sent" (a grpc-js call had been started with it), so a ServerSet could not send a
 * non-idempotent call to the live server (an outside review, r145: 0 of 60 served with
 * `maxAttempts: 1`). Real grpc-js servers on 127.0.0.1; handler runs counted.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ServerSet } from '../../../src/retry/server-set.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoServer, failure } from './helpers.js';

const cleanup = leakCheckEach();

/** A guard with no retries of its own, and a client of it to `port`. */
function guardedClient(port: number): { guard: GrpcGuard; client: EchoClient } {
  const guard = new GrpcGuard({ breaker: new HostBreaker(), closeTimeout: 100, connectTimeout: 1_000, retry: { maxAttempts: 1 } });
  cleanup.push(() => guard.close());
  const client = new EchoClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => client.close());
  return { guard, client };
}

describe('GrpcGuard: a call started as its server is shut down, resent to a refused connect', () => {
  it('ends as a dial that was never sent, as the pool knew (was: maybe sent)', async () => {
    const server = await echoServer();
    const { guard, client } = guardedClient(server.port);
    const resent: boolean[] = [];
    guard.on('resent', (e) => resent.push(e.notSent));
    await call(client, 'Echo', 'warm');
    const shutdown = server.close(); // forceShutdown, in the same tick as the call below
    const err = await failure(call(client, 'Echo', 'x', { deadline: Date.now() + 3_000 }));
    await shutdown;
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.details).toMatch(/^No connection established/);
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true });
    expect(resent).toEqual([true]);
    expect(server.calls.Echo).toBe(1); // the warm call only
  });

  it('a ServerSet sends a non-idempotent call on to the live server, which runs it once', async () => {
    const dying = await echoServer();
    const live = await echoServer();
    cleanup.push(() => live.close());
    const addresses = [dying.port, live.port].map((port) => `127.0.0.1:${port}`);
    const clients = new Map([dying.port, live.port].map((port) => [`127.0.0.1:${port}`, guardedClient(port).client]));
    await call(clients.get(addresses[0]!)!, 'Echo', 'warm');
    const set = new ServerSet(addresses);
    const tried: string[] = [];
    const shutdown = dying.close();
    const reply = await set.run(
      (address) => {
        tried.push(address);
        return call(clients.get(address)!, 'Echo', 'x', { deadline: Date.now() + 3_000 });
      },
      { idempotent: false, maxAttempts: 2, backoff: () => 0, budget: null },
    );
    await shutdown;
    expect(String(reply)).toBe('x');
    expect(tried).toEqual(addresses);
    expect([dying.calls.Echo, live.calls.Echo]).toEqual([1, 1]); // the warm call; the call, once
  });
});
