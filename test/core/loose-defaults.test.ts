/**
 * One default dial bound for every entry point: DEFAULT_CONNECT_TIMEOUT (2 500 ms). Before, the
 * core entry points (dial, connect, ConnectionPool, Http2Client, the node:http agents) waited
 * 5 s while the undici and gRPC adapters waited 2.5 s (ADAPTER_CONNECT_TIMEOUT). Each entry point
 * is given a dial that never answers and no `connectTimeout`; it must give up at the constant.
 */
import type * as net from 'node:net';
import { describe, expect, it } from 'vitest';
import { guardSettings } from '../../src/adapters/http/options.js';
import { grpcSettings } from '../../src/adapters/grpc/options.js';
import { guardedConnector } from '../../src/adapters/undici/connector.js';
import { DEFAULT_CONNECT_TIMEOUT } from '../../src/core/connect-timeout.js';
import { ConnectTimeoutError, findError } from '../../src/core/errors.js';
import { ADAPTER_CONNECT_TIMEOUT } from '../../src/core/restart-backoff.js';
import { connect } from '../../src/guard/connect.js';
import { DEFAULT_CONNECT_TIMEOUT as fromDial, dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import * as api from '../../src/index.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';

/** A resolver that never answers: the dial stalls in `lookup` until its bound fires. */
const silentLookup = (() => {}) as unknown as net.LookupFunction;

/**
 * Drives `start` on a manual clock: still pending 1 ms before the default, rejected at it with a
 * ConnectTimeoutError naming that bound.
 */
async function givesUpAtDefault(start: (clock: ManualClock) => Promise<unknown>): Promise<ConnectTimeoutError> {
  const clock = new ManualClock(0);
  let outcome: { error: unknown } | undefined;
  start(clock).then(
    () => (outcome = { error: new Error('resolved') }),
    (error: unknown) => (outcome = { error }),
  );
  await flushMicrotasks();
  clock.advance(DEFAULT_CONNECT_TIMEOUT - 1);
  await flushMicrotasks();
  expect(outcome).toBeUndefined();
  clock.advance(1);
  await flushMicrotasks();
  expect(outcome).toBeDefined();
  const timeout = findError(outcome!.error, ConnectTimeoutError);
  expect(timeout, String(outcome!.error)).toBeInstanceOf(ConnectTimeoutError);
  expect(timeout!.timeout).toBe(DEFAULT_CONNECT_TIMEOUT);
  return timeout!;
}

describe('one default dial bound, DEFAULT_CONNECT_TIMEOUT, at every entry point', () => {
  it('is 2 500 ms, and every name for it is the same value', () => {
    expect(DEFAULT_CONNECT_TIMEOUT).toBe(2_500);
    expect(fromDial).toBe(DEFAULT_CONNECT_TIMEOUT);
    expect(api.DEFAULT_CONNECT_TIMEOUT).toBe(DEFAULT_CONNECT_TIMEOUT);
    expect(ADAPTER_CONNECT_TIMEOUT).toBe(DEFAULT_CONNECT_TIMEOUT);
    expect(api.ADAPTER_CONNECT_TIMEOUT).toBe(DEFAULT_CONNECT_TIMEOUT);
  });

  it('dial() gives up at DEFAULT_CONNECT_TIMEOUT', async () => {
    await givesUpAtDefault((clock) => dial('svc-dial.test:1', () => new Promise(() => {}), { clock, breaker: new HostBreaker({ clock }) }));
  });

  it('connect() to a name (per address) gives up at DEFAULT_CONNECT_TIMEOUT', async () => {
    const err = await givesUpAtDefault((clock) =>
      connect({ host: 'svc-connect.test', port: 1 }, { clock, breaker: new HostBreaker({ clock }), socket: { lookup: silentLookup } }),
    );
    expect(err.phase).toBe('lookup');
  });

  it('connect() to a name as one entry (perAddress: false) gives up at DEFAULT_CONNECT_TIMEOUT', async () => {
    await givesUpAtDefault((clock) =>
      connect({ host: 'svc-connect1.test', port: 1 }, { clock, breaker: new HostBreaker({ clock }), perAddress: false, socket: { lookup: silentLookup } }),
    );
  });

  it('ConnectionPool gives up on a connect at DEFAULT_CONNECT_TIMEOUT', async () => {
    let pool: ConnectionPool<object> | undefined;
    await givesUpAtDefault((clock) => {
      pool = new ConnectionPool<object>({ connector: { connect: (_t, ctx) => new Promise((_r, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))), close() {} }, clock, breaker: new HostBreaker({ clock }) });
      return pool.use('svc-pool.test:1', async () => 1);
    });
    await pool!.close();
  });

  it('Http2Client gives up on a session at DEFAULT_CONNECT_TIMEOUT', async () => {
    let client: Http2Client | undefined;
    await givesUpAtDefault((clock) => {
      client = new Http2Client({ clock, breaker: new HostBreaker({ clock }), lookup: silentLookup });
      return client.request('http://svc-h2.test:1/');
    });
    await client!.close();
  });

  it('the undici connector (GuardedAgent, guardedFetch) gives up at DEFAULT_CONNECT_TIMEOUT', async () => {
    await givesUpAtDefault((clock) => {
      const connector = guardedConnector({ clock, breaker: new HostBreaker({ clock }), socket: { lookup: silentLookup } });
      return new Promise((resolve, reject) => {
        connector({ hostname: 'svc-undici.test', host: 'svc-undici.test:1', port: '1', protocol: 'http:' } as Parameters<typeof connector>[0], (err, socket) =>
          err === null ? resolve(socket) : reject(err),
        );
      });
    });
  });

  it('the node:http agents and GrpcGuard default to DEFAULT_CONNECT_TIMEOUT', () => {
    expect(guardSettings({ breaker: null }).timeout).toBe(DEFAULT_CONNECT_TIMEOUT);
    expect(grpcSettings({}).connectTimeout).toBe(DEFAULT_CONNECT_TIMEOUT);
  });
});
