/**
 * A server's answer on a retired connection is final even when the connection had served
 * requests before (the case in which a request cut by a dead transport goes back): only a dead
 * transport, never an answer, makes a sent request go back (defect 1, with the pool's rule that a
 * connection must have worked before a cut request is sent again on a fresh one).
 */
import { describe, expect, it } from 'vitest';
import { RequestTimeoutError } from '../../src/core/errors.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection } from './fake-connector.js';

const T = 'svc-p:8443';

describe('ConnectionPool: a server answer on a retired connection that had served requests', () => {
  const grpcNotFound = Object.assign(new Error('5 NOT_FOUND: no such item'), { code: 5, details: 'no such item' });
  const rstInternal = Object.assign(new Error('Stream closed with error code NGHTTP2_INTERNAL_ERROR'), { code: 'ERR_HTTP2_STREAM_ERROR' });
  it.each([
    ['a grpc NOT_FOUND the server sent', grpcNotFound],
    ['an RST_STREAM INTERNAL_ERROR the server sent', rstInternal],
    ['a request timeout', new RequestTimeoutError(300)],
  ])('%s after GOAWAY reaches the idempotent caller: not sent again', async (_name, answer) => {
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, connectTimeout: 1_000 });
    expect(await pool.use(T, async () => 'served')).toBe('served'); // the connection works
    let rides = 0;
    const call = pool.use(
      T,
      async (lease) => {
        rides++;
        if (lease.turn > 1) return 'sent again';
        lease.connection.watch!.retire('goaway');
        throw answer;
      },
      { idempotent: true },
    );
    await expect(call).rejects.toBe(answer);
    expect(rides).toBe(1);
    expect(connector.connects).toBe(1);
    expect(pool.stats().turns).toBe(0);
    await pool.close();
  });
});
