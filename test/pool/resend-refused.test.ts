/**
 * ConnectionPool.use(): an idempotent request its dead connection cut, sent again, whose redial is
 * refused, fails with the redial's own error (ECONNREFUSED, as the client alone says it) told as a
 * call sent before: a copy classify never reads as "not sent", so a layer above that is not
 * idempotent does not send it a third time (r142). A request certainly not sent, or not
 * idempotent, fails with the error itself.
 */
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection } from './fake-connector.js';

const T = 'svc-rr:8443';

function refused(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8443'), { code: 'ECONNREFUSED', syscall: 'connect' });
}

function setup(): { connector: FakeConnector; pool: ConnectionPool<FakeConnection> } {
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  return { connector, pool: new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, connectTimeout: 1_000 }) };
}

/** A request on a proven connection that dies under it, every redial then refused with `err`. */
async function cutThenRefused(idempotent: boolean, err: Error): Promise<{ sends: number; result: unknown }> {
  const { connector, pool } = setup();
  await pool.use(T, async () => 'served');
  let sends = 0;
  const result = await pool
    .use(
      T,
      async (lease) => {
        sends++;
        connector.auto = err;
        connector.opened[connector.opened.length - 1]!.watch!.gone(new Error('killed'));
        return new Promise((_, reject) => lease.signal.addEventListener('abort', () => reject(lease.signal.reason)));
      },
      { idempotent },
    )
    .catch((e: unknown) => e);
  await pool.close();
  return { sends, result };
}

describe('ConnectionPool.use(): a resend refused is not "not sent"', () => {
  it('idempotent, cut, its redial refused: a copy of the refusal (code, message kept), not "not sent"; the original unmarked', async () => {
    const err = refused();
    const { sends, result } = await cutThenRefused(true, err);
    expect(sends).toBe(1);
    expect(result).not.toBe(err);
    expect(result).toMatchObject({ code: 'ECONNREFUSED', syscall: 'connect', message: err.message });
    expect(classify(result).notSent).toBe(false);
    expect(classify(err).notSent).toBe(true);
  });

  it('a dial refused before anything was sent: the error itself', async () => {
    const { connector, pool } = setup();
    const err = refused();
    connector.auto = err;
    const result = await pool.use(T, async () => 'never', { idempotent: true }).catch((e: unknown) => e);
    await pool.close();
    expect(result).toBe(err);
    expect(classify(result).notSent).toBe(true);
  });
});
