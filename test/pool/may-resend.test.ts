/**
 * `mayResend`: asked before a request that may have been sent goes back for a fresh connection
 * (its connection had served requests, then died under it), so an adapter's retry budget bounds
 * those resends as it bounds retries. Never asked for a request certainly not sent.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConnectionGoneError } from '../../src/core/errors.js';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, NotSentError, testClassify } from './fake-connector.js';

const T = 'svc-r:8443';

afterEach(() => {
  vi.restoreAllMocks();
});

function setup(options: Partial<ConnectionPoolOptions<FakeConnection>>): { connector: FakeConnector; pool: ConnectionPool<FakeConnection> } {
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify, connectTimeout: 1_000, ...options });
  return { connector, pool };
}

/** An idempotent request whose (proven) connection dies under it on its first turn; counts its sends. */
async function cutOnce(pool: ConnectionPool<FakeConnection>, connector: FakeConnector): Promise<{ sends: number; result: unknown }> {
  await pool.use(T, async () => 'served'); // the connection works
  let sends = 0;
  const result = await pool
    .use(
      T,
      async (lease) => {
        sends++;
        if (lease.turn > 1) return 'sent again';
        connector.opened[connector.opened.length - 1]!.watch!.gone(new Error('killed'));
        return new Promise((_, reject) => lease.signal.addEventListener('abort', () => reject(lease.signal.reason)));
      },
      { idempotent: true },
    )
    .catch((err: unknown) => err);
  return { sends, result };
}

describe('ConnectionPool: mayResend', () => {
  it.each([
    ['yes', () => true, 2, 'sent again'],
    ['no', () => false, 1, undefined],
    ['anything but true (a truthy string)', () => 'yes' as unknown as boolean, 1, undefined],
  ])('answering %s: a sent request its dead connection cut is sent again only on a yes', async (_name, answer, sends, sentAgain) => {
    let asked = 0;
    const { connector, pool } = setup({
      mayResend: () => {
        asked++;
        return answer();
      },
    });
    const got = await cutOnce(pool, connector);
    expect(got.sends).toBe(sends);
    if (sentAgain === undefined) expect(got.result).toBeInstanceOf(ConnectionGoneError);
    else expect(got.result).toBe(sentAgain);
    expect(asked).toBe(1);
    expect(pool.stats().turns).toBe(sends - 1);
    await pool.close();
  });

  it('one that throws is a no, reported once', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const { connector, pool } = setup({
      mayResend: () => {
        throw new Error('budget bug');
      },
    });
    for (let i = 0; i < 2; i++) expect((await cutOnce(pool, connector)).sends).toBe(1);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toMatch(/mayResend option/);
    await pool.close();
  });

  it('is never asked for a request certainly not sent: that one goes back whatever the budget says', async () => {
    let asked = 0;
    const { connector, pool } = setup({
      mayResend: () => {
        asked++;
        return false;
      },
    });
    const refused = new NotSentError('new streams cannot be created after GOAWAY');
    const result = await pool.use(T, async (lease) => {
      if (lease.turn > 1) return `sent on #${lease.id}`;
      connector.opened[connector.opened.length - 1]!.watch!.retire('goaway');
      throw refused;
    });
    expect(result).toBe('sent on #2');
    expect(asked).toBe(0);
    await pool.close();
  });

  it('must be a function', () => {
    expect(() => setup({ mayResend: true as unknown as () => boolean })).toThrow(/^mayResend must be a function/);
  });
});
