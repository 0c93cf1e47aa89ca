/**
 * `mayResend`: asked before a request that may have been sent goes back for a fresh connection
 * (its connection had served requests, then died under it), so an adapter's retry budget bounds
 * those resends as it bounds retries. Never asked for a request certainly not sent.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
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

/** An idempotent request (with `resends`) cut on every send by its connection's death; counts its sends and the resends `ride()` reports. */
async function cutEvery(pool: ConnectionPool<FakeConnection>, connector: FakeConnector, resends: number | undefined): Promise<{ sends: number; resent: unknown; err: unknown }> {
  await pool.use(T, async () => 'served');
  let sends = 0;
  return new Promise((resolve) => {
    pool.ride(
      T,
      (trip) => {
        sends++;
        // Proven, then killed: each fresh connection served a call before this send dies with it.
        const conn = connector.opened[connector.opened.length - 1]!;
        trip.signal.addEventListener('abort', () => trip.end(false, trip.signal.reason));
        queueMicrotask(() => conn.watch!.gone(new Error('killed')));
      },
      resends === undefined ? { idempotent: true } : { idempotent: true, resends },
      () => resolve({ sends, resent: undefined, err: undefined }),
      (err, resent) => resolve({ sends, resent, err }),
    );
  });
}

describe('ConnectionPool: resends (a call\'s own bound on sends that may have run)', () => {
  it.each([
    [0, 1, 0],
    [1, 2, 1],
    [2, 3, 2],
    [undefined, 4, 3], // the default: retiredRetries (3)
  ])('resends %s: sent %s times in all, and ride() reports %s resends with the failure', async (resends, sends, resent) => {
    const { connector, pool } = setup({});
    // Every fresh connection is proven by a call first, so each death may send the cut call again.
    pool.on('opened', () => queueMicrotask(() => void pool.use(T, async () => 'prove').catch(() => {})));
    const got = await cutEvery(pool, connector, resends);
    expect(got.err).toBeInstanceOf(ConnectionGoneError);
    expect({ sends: got.sends, resent: got.resent }).toEqual({ sends, resent });
    await pool.close();
  });

  it('a resend whose dial fails sent nothing: ride() reports 0 resends with the dial\'s error (a retry layer above keeps the attempt)', async () => {
    const { connector, pool } = setup({});
    await pool.use(T, async () => 'served'); // proven
    let sends = 0;
    const got = await new Promise<{ resent: unknown; err: unknown }>((resolve) => {
      pool.ride(
        T,
        (trip) => {
          sends++;
          const conn = connector.opened[connector.opened.length - 1]!;
          trip.signal.addEventListener('abort', () => trip.end(false, trip.signal.reason));
          // The server dies under the call, and its port refuses the resend's dial.
          connector.auto = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
          queueMicrotask(() => conn.watch!.gone(new Error('killed')));
        },
        { idempotent: true, resends: 2 },
        () => resolve({ resent: 'served', err: undefined }),
        (err, resent) => resolve({ resent, err }),
      );
    });
    expect(sends).toBe(1);
    expect(got.err).toMatchObject({ code: 'ECONNREFUSED' });
    expect(got.resent).toBe(0); // was 1: the refused resend spent one of the caller's attempts
    await pool.close();
  });

  it('is checked, idempotent or not: not an integer in 0..100 rejects the call, no connection opened (was: unchecked unless idempotent; an outside review)', async () => {
    const { connector, pool } = setup({});
    let runs = 0;
    const fn = async (): Promise<number> => ++runs;
    await expect(pool.use(T, fn, { idempotent: true, resends: -1 })).rejects.toThrow(RangeError);
    await expect(pool.use(T, fn, { idempotent: true, resends: 1.5 })).rejects.toThrow(/resends/);
    for (const resends of [Number.NaN, -1, '3', 1e9, 101]) {
      await expect(pool.use(T, fn, { resends } as never)).rejects.toThrow(/resends/);
      await expect(pool.use(T, fn, { idempotent: false, resends } as never)).rejects.toThrow(/resends/);
    }
    expect(runs).toBe(0);
    expect(connector.opened.length).toBe(0);
    expect(await pool.use(T, fn, { resends: 0 })).toBe(1); // a good value, not idempotent: runs
    expect(await pool.use(T, fn, { resends: 100, idempotent: true })).toBe(2);
    await pool.close();
  });
});


describe('ConnectionPool: the resent event', () => {
  it('one per resend, with the connection it failed on, whether it was certainly not sent, and its kind; none when nothing went back', async () => {
    const seen: unknown[] = [];
    const onChannel: unknown[] = [];
    const channel = (m: unknown): void => void onChannel.push(m);
    diagnosticsChannel.subscribe('dialguard:pool:resent', channel);
    try {
      const { connector, pool } = setup({ mayResend: () => true });
      pool.on('resent', (e) => void seen.push(e));
      expect((await cutOnce(pool, connector)).sends).toBe(2); // maybe sent: back once
      const refused = new NotSentError('new streams cannot be created after GOAWAY');
      await pool.use(T, async (lease) => {
        if (lease.turn > 1) return 'ok';
        connector.opened[connector.opened.length - 1]!.watch!.retire('goaway');
        throw refused;
      });
      expect(seen).toEqual([
        { target: T, id: 1, notSent: false, kind: 'connection', code: 'DIALGUARD_CONNECTION_GONE' },
        { target: T, id: 2, notSent: true, kind: expect.any(String), code: undefined },
      ]);
      expect(onChannel).toEqual(seen);
      await pool.close();
      const no = setup({ mayResend: () => false });
      no.pool.on('resent', (e) => void seen.push(e));
      expect((await cutOnce(no.pool, no.connector)).sends).toBe(1);
      expect(seen).toHaveLength(2);
      await no.pool.close();
    } finally {
      diagnosticsChannel.unsubscribe('dialguard:pool:resent', channel);
    }
  });
});
