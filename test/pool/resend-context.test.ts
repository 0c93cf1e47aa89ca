/**
 * A request the pool sends again after its connection died under it redials in its own caller's
 * async context when dials are traced. The death arrives from the connection's events, in the
 * context of the call that opened it, and the redial started there put its `dialguard.dial` span
 * into that other call's trace (an outside review: an idempotent gRPC call resent after its peer
 * was killed).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { dialTrace } from '../../src/observe/tracing.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { whileTraced } from '../helpers/tracing.js';
import { FakeConnector, type FakeConnection, NotSentError, testClassify } from './fake-connector.js';

const T = 'svc-ctx:8443';
const als = new AsyncLocalStorage<string>();
const pools: Array<ConnectionPool<FakeConnection>> = [];

afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

/** A caller's connects, as the connector saw them, and the dials traced, each with the context it ran in. */
async function cutUnder(idempotent: boolean, how: 'gone' | 'retired, then refused' = 'gone'): Promise<{ connects: Array<string | undefined>; dials: Array<string | undefined>; result: unknown }> {
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const connects: Array<string | undefined> = [];
  const connect = connector.connect.bind(connector);
  connector.connect = (target, ctx) => {
    connects.push(als.getStore());
    return connect(target, ctx);
  };
  const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify, connectTimeout: 1_000, redialPace: 0 });
  pools.push(pool);
  const dials: Array<string | undefined> = [];
  let result: unknown;
  await whileTraced(dialTrace, { start: () => void dials.push(als.getStore()) }, async () => {
    // A opens the connection: its events (here, the watch's gone) run in A's context.
    await als.run('A', () => pool.use(T, async () => 'A served'));
    let killed!: () => void;
    let refuse!: () => void;
    const died = new Promise<void>((resolve) => (killed = resolve));
    // B rides as gRPC's adapter does (ride(): its work reports its own end, from the transport's events).
    const b = new Promise((resolve, reject) =>
      als.run('B', () =>
        pool.ride(
          T,
          (trip) => {
            if (trip.turn > 1) return trip.end(true, 'B sent again');
            refuse = () => trip.end(false, new NotSentError('refused stream'));
            killed();
          },
          { idempotent },
          resolve,
          reject,
        ),
      ),
    );
    await died;
    if (how === 'gone') als.run('A', () => connector.opened[0]!.watch!.gone(new Error('peer killed')));
    else {
      // A GOAWAY, then the stream's refusal: both from the connection's events, in A's context.
      als.run('A', () => {
        connector.opened[0]!.watch!.retire();
        refuse();
      });
    }
    result = await b.catch((err: unknown) => err);
  });
  return { connects, dials, result };
}

describe('ConnectionPool: a resend redials in its own caller\'s context', () => {
  it('an idempotent request cut by its connection\'s death: the second dial runs in B\'s context, not in A\'s (was: A\'s, so its span went into A\'s trace)', async () => {
    const got = await cutUnder(true);
    expect(got.result).toBe('B sent again');
    expect(got.dials).toEqual(['A', 'B']);
    expect(got.connects).toEqual(['A', 'B']);
  });

  it('a request certainly not sent, idempotent or not, goes back after a GOAWAY: its dial runs in B\'s context', async () => {
    for (const idempotent of [false, true]) {
      const got = await cutUnder(idempotent, 'retired, then refused');
      expect(got.result).toBe('B sent again');
      expect(got.dials).toEqual(['A', 'B']);
    }
  });

  it('a request not idempotent is not sent again, and dials nothing more', async () => {
    const got = await cutUnder(false);
    expect(got.result).toBeInstanceOf(Error);
    expect(got.dials).toEqual(['A']);
  });
});
