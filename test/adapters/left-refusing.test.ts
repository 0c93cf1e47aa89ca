/**
 * A call whose dial leaves its host refused (its failure opened the host, or it was the probe
 * and the host is open again) ends there, in every adapter and whether the host is a name or an
 * address. Retried after a backoff longer than the breaker's window, each retry was the next
 * probe: once a window, one caller of a host long dead paid 3 dials and ~1.4 s while every other
 * was refused at once (an outside review: GuardedAgent and Http2Client with a name, Http2Client
 * and GrpcGuard with an address; GuardedAgent with an address already stopped).
 *
 * Counted in dials (the breaker's `failed`), on a port that refuses every connect.
 */
import * as grpc from '@grpc/grpc-js';
import type net from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/index.js';
import { refusing } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { EchoClient, call } from './grpc/helpers.js';

const cleanup = leakCheckEach();

/** A name of our own that resolves to 127.0.0.1 only. */
const NAME = 'dead.dialguard.test';
const lookup = ((_host: string, options: unknown, callback?: (...args: unknown[]) => void) => {
  const cb = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
  const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
  if (all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
}) as unknown as net.LookupFunction;

/** One dial opens the host for 100 ms; every backoff (300 ms) outlasts the window. */
const breakerOf = (): HostBreaker => new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 100 });
const RETRY = { maxAttempts: 3, backoff: () => 300, budget: null };

type Caller = (host: string, port: number, breaker: HostBreaker) => () => Promise<unknown>;

const clients: Array<[string, Caller]> = [
  [
    'GuardedAgent',
    (host, port, breaker) => {
      const agent = new GuardedAgent({ breaker, connectTimeout: 1_000, ...RETRY, socket: { lookup } });
      cleanup.push(() => agent.destroy());
      return async () => (await request(`http://${host}:${port}/`, { dispatcher: agent })).body.text();
    },
  ],
  [
    'Http2Client',
    (host, port, breaker) => {
      const client = new Http2Client({ breaker, connectTimeout: 1_000, retry: RETRY, lookup });
      cleanup.push(() => client.close());
      return () => client.request(`http://${host}:${port}/`);
    },
  ],
  [
    'GrpcGuard',
    (host, port, breaker) => {
      const guard = new GrpcGuard({ breaker, connectTimeout: 1_000, closeTimeout: 100, retry: RETRY, lookup, idempotent: () => true });
      const client = new EchoClient(`${host}:${port}`, grpc.credentials.createInsecure(), guard.clientOptions());
      cleanup.push(() => guard.close());
      cleanup.push(() => client.close());
      return () => call(client, 'Echo', 'x', { deadline: Date.now() + 5_000 });
    },
  ],
];

describe('a dial that leaves its host refused ends the call', () => {
  for (const [name, make] of clients) {
    for (const host of [NAME, '127.0.0.1']) {
      it(`${name}, ${host === NAME ? 'a name' : 'an address'}: the dial that opens the host, then each probe, is the call's only dial (was: 3 a call, a retry per window)`, async () => {
        const peer = await refusing();
        const breaker = breakerOf();
        const send = make(host, peer.port, breaker);
        await expect(send()).rejects.toBeDefined();
        expect(breaker.stats()).toMatchObject({ failed: 1, opened: 1 });
        for (let probe = 1; probe <= 2; probe++) {
          await new Promise((resolve) => setTimeout(resolve, 150)); // the window is over: the next call probes
          await expect(send()).rejects.toBeDefined();
          expect(breaker.stats().failed).toBe(1 + probe);
        }
      });
    }
  }
});
