/**
 * A channel given up after a failed connect dials no more (README: "Nothing reconnects unasked").
 * grpc-js's subchannel, asked by pick-first to connect again while in TRANSIENT_FAILURE, kept its
 * reconnect backoff timer running after the channel was closed, and when it fired (1 s by default)
 * dialled the host again: one more connection per attempt, outside the breaker. Counted at the
 * peer, against the breaker's dial outcomes.
 */
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TcpPeer, resetOnAccept } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, failure } from './helpers.js';

const cleanup = leakCheckEach();

/** grpc-js's reconnect backoff for these channels (its timer fires 80-120 ms after a connect starts). */
const BACKOFF = 100;

/** Accepts, answers the HTTP/2 preface as an HTTP/1.1 server would, and hangs up: a wrong port. */
function http1Peer(): Promise<TcpPeer> {
  return new TcpPeer('http1', {}, (s: net.Socket) => {
    s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'));
  }).listen();
}

/** One call through a fresh guard to `peer`; then waits out grpc-js's backoff timer several times over. */
async function oneCall(peer: TcpPeer, retry: GrpcGuardOptions['retry']): Promise<{ connections: number; outcomes: number }> {
  cleanup.push(() => peer.close());
  const breaker = new HostBreaker();
  const guard = new GrpcGuard({ breaker, retry, closeTimeout: 100 });
  const client = new EchoClient(peer.address, grpc.credentials.createInsecure(), guard.clientOptions({ 'grpc.initial_reconnect_backoff_ms': BACKOFF }));
  cleanup.push(() => guard.close());
  cleanup.push(() => client.close());
  const err = await failure(call(client, 'Echo'));
  expect(err.code).toBe(grpc.status.UNAVAILABLE);
  await new Promise((resolve) => setTimeout(resolve, 4 * BACKOFF));
  const s = breaker.stats();
  return { connections: peer.attempts, outcomes: s.succeeded + s.failed + s.abandoned };
}

describe('grpc guard: nothing reconnects unasked', () => {
  it.each([
    ['resets every connection', resetOnAccept],
    ['answers HTTP/1.1', http1Peer],
  ])('one call with one attempt to a peer that %s costs one connection, the one the breaker saw', async (_name, peer) => {
    // Was: 2 connections (the second ~BACKOFF after the first, after the call had failed), 1 outcome.
    expect(await oneCall(await peer(), false)).toEqual({ connections: 1, outcomes: 1 });
  });

  it('one call with three attempts costs three connections, each one the breaker saw', async () => {
    // Was: up to 6 (each attempt's channel redialled once on its own).
    expect(await oneCall(await resetOnAccept(), { maxAttempts: 3, backoff: () => 20, budget: null })).toEqual({ connections: 3, outcomes: 3 });
  });
});
