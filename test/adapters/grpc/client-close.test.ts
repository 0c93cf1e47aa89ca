/**
 * `client.close()` with calls still waiting for a connection, on a guard other clients share (so
 * the guard stays open): each waiting call ends at once with UNAVAILABLE "Channel closed before
 * call started", as a raw grpc-js channel ends its own, and nothing dials for them afterwards.
 * Left to wait, they ran through their connect timeouts and retries (8.7 s, two more dials) and
 * wait-for-ready calls never settled. Counted at a peer that accepts TCP and never speaks HTTP/2.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { acceptAndHold, refusing } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoServer, failure } from './helpers.js';

const cleanup = leakCheckEach();

describe('grpc guard: client.close() with calls waiting for a connection', () => {
  it.each([
    ['plain calls (retried by default)', false],
    ['wait-for-ready calls', true],
  ])('%s end at once with UNAVAILABLE, as grpc-js ends them, and nothing dials after the close', async (_name, waitForReady) => {
    const peer = await acceptAndHold();
    cleanup.push(() => peer.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), connectTimeout: 300, retry: { backoff: () => 20, budget: null }, closeTimeout: 100 });
    cleanup.push(() => guard.close());
    const client = new EchoClient(peer.address, grpc.credentials.createInsecure(), guard.clientOptions());
    const metadata = new grpc.Metadata({ waitForReady });
    const calls = Array.from({ length: 3 }, () => new Promise<grpc.ServiceError | null>((resolve) => client.Echo(Buffer.from('x'), metadata, {}, (err) => resolve(err))));
    await new Promise((resolve) => setTimeout(resolve, 100)); // the first connect is held by the peer
    const accepted = peer.attempts;
    const closedAt = performance.now();
    client.close();
    const errors = await Promise.all(calls);
    expect(performance.now() - closedAt).toBeLessThan(200); // was 8.7 s, or never (wait-for-ready)
    for (const err of errors) expect({ code: err?.code, details: err?.details }).toEqual({ code: grpc.status.UNAVAILABLE, details: 'Channel closed before call started' });
    await new Promise((resolve) => setTimeout(resolve, 800)); // two connect timeouts and backoffs
    expect(peer.attempts).toBe(accepted); // was 2 (3 or 4 for wait-for-ready) dials after the close
  });

  it('a call under way on the closed channel finishes, and another client of the same guard is served', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const guard = new GrpcGuard({ breaker: new HostBreaker(), closeTimeout: 100 });
    cleanup.push(() => guard.close());
    const closing = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions());
    const other = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => other.close());
    expect(String(await call(closing, 'Echo', 'warm'))).toBe('warm');
    const held = call(closing, 'Hold', 'under way');
    await new Promise((resolve) => setTimeout(resolve, 50));
    closing.close();
    server.releaseHeld();
    expect(String(await held)).toBe('under way');
    expect(String(await call(other, 'Echo', 'still served'))).toBe('still served');
    expect((await failure(call(closing, 'Echo'))).message).toMatch(/closed|shut down/i);
  });

  // An outside review: guard.close() left a call waiting out its retry's backoff until the wait
  // ended (~430 ms after close() resolved here; a 5 s backoff, 5 s).
  it('guard.close() ends a call waiting out a retry backoff at once, with UNAVAILABLE; nothing dials after it', async () => {
    const peer = await refusing();
    cleanup.push(() => peer.close());
    const breaker = new HostBreaker();
    const guard = new GrpcGuard({ breaker, retry: { maxAttempts: 3, backoff: () => 5_000, budget: null } });
    const client = new EchoClient(peer.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => client.close());
    const settled = new Promise<grpc.ServiceError | null>((resolve) => client.Echo(Buffer.from('x'), new grpc.Metadata(), {}, (err) => resolve(err)));
    for (let i = 0; i < 100 && breaker.stats().failed === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(breaker.stats().failed).toBe(1); // the first attempt's dial was refused: the call waits out 5 s
    const closedAt = performance.now();
    await guard.close();
    const err = await settled;
    expect(performance.now() - closedAt).toBeLessThan(500); // was the rest of the 5 s backoff
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(breaker.stats().failed + breaker.stats().succeeded).toBe(1);
  });
});
