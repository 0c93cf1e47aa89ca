/**
 * `Connector.oneTransport`: a connection that balances over several transports of its own (a
 * grpc-js channel under round_robin) is not found dead by one request's dead-connection failure.
 * Read as one transport, that failure released every request riding the connection, those the
 * healthy transports were serving included (an outside review of the gRPC adapter). The failed
 * request itself still fails with its own error, and is not sent again on that connection.
 */
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { DeadError, FakeConnector, type FakeConnection, deferred, testClassify } from './fake-connector.js';

const T = 'lb:443';

/** Two requests riding one connection; the first fails with a dead-connection error. */
async function scene(oneTransport: boolean | undefined): Promise<{ first: unknown; second: unknown; connects: number; gone: number; pool: ConnectionPool<FakeConnection> }> {
  const clock = new ManualClock();
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  if (oneTransport !== undefined) (connector as FakeConnector & { oneTransport: (t: string) => boolean }).oneTransport = (t) => (expect(t).toBe(T), oneTransport);
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: new HostBreaker({ clock }), classify: testClassify, connectTimeout: 1_000 });
  const cut = deferred<string>();
  const served = deferred<string>();
  let gone = 0;
  pool.on('gone', () => void gone++);
  const first = pool.use(T, () => cut.promise).then(
    (v) => v,
    (e: unknown) => e,
  );
  const second = pool.use(T, () => served.promise, { idempotent: true }).then(
    (v) => v,
    (e: unknown) => e,
  );
  await clock.tick(0);
  cut.reject(new DeadError('backend 1 died'));
  await clock.tick(0);
  served.resolve('answered');
  const out = { first: await first, second: await second, connects: connector.connects, gone, pool };
  await pool.close();
  return out;
}

describe('ConnectionPool: a connector whose connections are several transports', () => {
  it('oneTransport false: the cut request fails with its own error; the other is served on the same connection', async () => {
    const r = await scene(false);
    expect(r.first).toBeInstanceOf(DeadError);
    expect(r.second).toBe('answered'); // was released with the connection
    expect(r.connects).toBe(1);
    expect(r.gone).toBe(0);
  });

  it.each([true, undefined])('oneTransport %s (the default): the connection is gone, and every request riding it released', async (one) => {
    const r = await scene(one);
    expect(r.first).toBeInstanceOf(DeadError);
    expect(r.second).not.toBe('answered');
    expect(r.gone).toBe(1);
  });
});
