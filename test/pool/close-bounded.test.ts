/**
 * ConnectionPool.close() is bounded whatever the connector does: it aborts the connects in flight
 * (the connector gets its signal), and resolves SETTLE_TIMEOUT after releasing requests at the
 * latest, even when a connector ignores its abort or a close never ends. A connection delivered
 * after that is still closed as it arrives. (close() used to wait for such a connector forever.)
 */
import { describe, expect, it } from 'vitest';
import { PoolClosedError } from '../../src/core/errors.js';
import type { DialContext } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool, type ConnectionPoolOptions, SETTLE_TIMEOUT } from '../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, deferred, testClassify } from './fake-connector.js';
import { watching } from '../helpers/watching.js';

const T = 'svc-close:7000';

/** A connector whose connects settle only when the test says so: it never listens to its signal. */
class DeafConnector extends FakeConnector {
  readonly contexts: DialContext[] = [];
  readonly late = deferred<FakeConnection>();
  constructor(readonly selfGuarding = false) {
    super();
  }
  override connect(_target: string, ctx: DialContext): Promise<FakeConnection> {
    this.contexts.push(ctx);
    return this.late.promise;
  }
  guardsItself(): boolean {
    return this.selfGuarding;
  }
}

function setup<C extends FakeConnector>(connector: C, options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new ManualClock(0);
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: new HostBreaker({ clock }), classify: testClassify, connectTimeout: 60_000, ...options });
  return { clock, connector, pool };
}

/** Whether `p` has settled once pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await flushMicrotasks();
  return done;
}

describe('ConnectionPool.close() with a connector that ignores its abort', () => {
  for (const selfGuarding of [false, true]) {
    const path = selfGuarding ? 'a self-guarding connector (unguarded establishment)' : 'a pool-guarded dial';
    it(`resolves SETTLE_TIMEOUT after the abort, and closes the connection delivered later (${path})`, async () => {
      const { clock, connector, pool } = setup(new DeafConnector(selfGuarding));
      const ride = pool.use(T, async () => 1);
      ride.catch(() => {});
      await flushMicrotasks();
      expect(connector.contexts).toHaveLength(1);
      const closing = pool.close();
      // The connector is told: its signal is aborted with the pool's closing.
      expect(connector.contexts[0]!.signal.aborted).toBe(true);
      expect(connector.contexts[0]!.signal.reason).toBeInstanceOf(PoolClosedError);
      await expect(ride).rejects.toBeInstanceOf(PoolClosedError);
      clock.advance(SETTLE_TIMEOUT - 1);
      expect(await settled(closing)).toBe(false); // still giving the connector its chance
      clock.advance(1);
      expect(await settled(closing)).toBe(true);
      await closing;
      expect(clock.pending).toBe(0); // the bound's timer is not left behind

      // The connector finally delivers: the connection is closed, nothing stays open.
      const conn: FakeConnection = { n: 1, target: T, closed: false };
      connector.late.resolve(conn);
      await flushMicrotasks();
      expect(conn.closed).toBe(true);
      expect(connector.closed).toEqual([conn]);
      expect(pool.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
    });
  }

  it('a connector that never settles at all: close() still resolves, once, for every caller', async () => {
    const { clock, connector, pool } = setup(new DeafConnector());
    void pool.use(T, async () => 1).catch(() => {});
    void pool.use('svc-other:7000', async () => 1).catch(() => {});
    await flushMicrotasks();
    expect(connector.contexts).toHaveLength(2);
    const first = pool.close();
    const second = pool.close();
    expect(second).toBe(first);
    clock.advance(SETTLE_TIMEOUT);
    expect(await settled(first)).toBe(true);
    expect(connector.contexts.every((ctx) => ctx.signal.aborted)).toBe(true);
    await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(PoolClosedError);
  });

  it('a connection whose close never ends: close() resolves SETTLE_TIMEOUT after releasing its requests', async () => {
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    let closes = 0;
    connector.close = () => {
      closes++;
      return new Promise<void>(() => {}) as unknown as void; // a close that never ends
    };
    const { clock, pool } = setup(connector, { closeTimeout: 100 });
    const release = deferred<number>();
    const ride = pool.use(T, () => release.promise);
    ride.catch(() => {});
    await flushMicrotasks();
    const closing = pool.close();
    clock.advance(100); // closeTimeout: the request is released, the connection closed
    await expect(ride).rejects.toBeInstanceOf(PoolClosedError);
    expect(closes).toBe(1);
    expect(await settled(closing)).toBe(false);
    clock.advance(SETTLE_TIMEOUT);
    expect(await settled(closing)).toBe(true);
  });

  it('an honest connector: close() waits for it without the bound (no timer left, no time spent)', async () => {
    const connector = new FakeConnector();
    const { clock, pool } = setup(connector);
    void pool.use(T, async () => 1).catch(() => {});
    await flushMicrotasks();
    await pool.close(); // the connector rejects on abort: settles at once, no clock advance needed
    expect(connector.pending[0]!.ctx.signal.aborted).toBe(true);
    expect(clock.pending).toBe(0);
    expect(clock.now()).toBe(0);
  });
});

describe('ConnectionPool.close() called as a connection is handed over', () => {
  it("close() from an 'opened' listener: the new connection is closed, never watched, and its waiter gets PoolClosedError", async () => {
    const connector = new FakeConnector();
    let watched = 0;
    const baseWatch = connector.watch.bind(connector);
    connector.watch = (c, w) => {
      watched++;
      return baseWatch(c, w);
    };
    const { pool } = setup(connector);
    let closing: Promise<void> | undefined;
    const retired: string[] = [];
    pool.on('retired', (e) => void retired.push(e.reason));
    pool.on('opened', () => {
      closing = pool.close();
    });
    const ride = pool.use(T, async () => 1);
    ride.catch(() => {});
    await flushMicrotasks();
    const conn = connector.resolveLast();
    await expect(ride).rejects.toBeInstanceOf(PoolClosedError);
    expect(closing).toBeDefined();
    await closing;
    expect(watched).toBe(0);
    expect(connector.connects).toBe(1); // its waiter never dialled again after the close
    expect(retired).toEqual(['closing']);
    expect(conn.closed).toBe(true);
    expect(connector.closed).toEqual([conn]);
    expect(pool.stats()).toMatchObject({ targets: 0, connections: 0, opened: 1, closed: 1 });
  });
});

describe('ConnectionPool: a self-guarding connector that fails', () => {
  it("its waiter gets the connector's own error, and close() then waits for nothing", async () => {
    const connector = new DeafConnector(true);
    const { clock, pool } = setup(connector);
    const ride = pool.use(T, async () => 1);
    await flushMicrotasks();
    const err = new Error('no route');
    connector.late.reject(err);
    await expect(ride).rejects.toBe(err);
    expect(pool.stats()).toMatchObject({ targets: 0, attempts: 0 });
    await pool.close();
    expect(clock.pending).toBe(0);
  });
});

describe('ConnectionPool.close() with a clock whose setTimeout throws', () => {
  it('a use() fails with the clock\'s error, and close() resolves with nothing left over (was: an unhandled rejection at close)', async () => {
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    const broken = {
      now: () => 0,
      setTimeout: (): never => {
        throw new Error('clock down');
      },
      clearTimeout: () => {},
    };
    const pool = new ConnectionPool<FakeConnection>({ connector, clock: broken, breaker: new HostBreaker(), classify: testClassify });
    const seen = await watching(async () => {
      await expect(pool.use(T, async () => 'ok')).rejects.toThrow('clock down');
      await pool.close();
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.uncaught).toEqual([]);
  });
});
