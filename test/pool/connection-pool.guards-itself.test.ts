/**
 * ConnectionPool and a connector that guards and bounds a target itself (Connector.guardsItself,
 * as the HTTP/2 client does for a name): the pool hands it an unguarded establishment (no
 * breaker entry, no timer of its own), still aborts it on close(), and falls back to guarding
 * the target when the connector cannot say.
 */
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, PoolClosedError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, deferred, testClassify } from './fake-connector.js';

const T = 'svc-g:7000';

class SelfGuardingConnector extends FakeConnector {
  asked = 0;
  constructor(readonly answer: () => boolean) {
    super();
  }
  guardsItself(): boolean {
    this.asked++;
    return this.answer();
  }
}

function setup(answer: () => boolean, options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new ManualClock(0);
  const connector = new SelfGuardingConnector(answer);
  const breaker = new HostBreaker({ clock });
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker, classify: testClassify, connectTimeout: 1_000, ...options });
  return { clock, connector, breaker, pool };
}

describe('ConnectionPool: a connector that guards its target itself', () => {
  it('gets a fresh unguarded context, with no pool timeout bounding its establishment', async () => {
    const { clock, connector, pool } = setup(() => true);
    const ride = pool.use(T, async (l) => l.connection.n);
    await flushMicrotasks();
    expect(connector.connects).toBe(1);
    const { ctx } = connector.pending[0]!;
    expect(ctx.permit.host).toBe(''); // not a breaker permit for the target's host
    expect(ctx.phase).toBe('tcp');
    expect(ctx.answered).toBe(false);
    expect(ctx.signal.aborted).toBe(false);
    clock.advance(5_000); // far past connectTimeout: the connector bounds itself, the pool does not
    await flushMicrotasks();
    expect(ctx.signal.aborted).toBe(false);
    connector.resolveLast();
    await expect(ride).resolves.toBe(1);
    await pool.close();
    expect(connector.closed).toHaveLength(1);
  });

  it('still has its establishment aborted by close()', async () => {
    const { connector, pool } = setup(() => true);
    const ride = pool.use(T, async () => 1);
    await flushMicrotasks();
    const closing = pool.close();
    expect(connector.pending[0]!.ctx.signal.reason).toBeInstanceOf(PoolClosedError);
    await expect(ride).rejects.toBeInstanceOf(PoolClosedError);
    await closing;
    expect(connector.opened).toHaveLength(0);
  });

  it('starts no establishment when close() began inside hostOf, just before it', async () => {
    let pool!: ConnectionPool<FakeConnection>;
    const made = setup(() => true, {
      hostOf: (t) => {
        void pool.close();
        return t;
      },
    });
    pool = made.pool;
    made.connector.auto = 'resolve';
    await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(PoolClosedError);
    await pool.close();
    expect(made.connector.connects).toBe(0);
    expect(made.connector.opened).toHaveLength(0);
  });

  it('is guarded and bounded by the pool when its guardsItself throws', async () => {
    const { clock, connector, pool } = setup(() => {
      throw new Error('cannot say');
    });
    const ride = pool.use(T, async () => 1);
    await flushMicrotasks();
    expect(connector.asked).toBe(1);
    expect(connector.pending[0]!.ctx.permit.host).not.toBe('');
    clock.advance(1_000);
    await expect(ride).rejects.toBeInstanceOf(ConnectTimeoutError);
    await pool.close();
  });

  it('is guarded by the pool for a target it does not guard (an answer other than true)', async () => {
    const { clock, connector, pool } = setup(() => 1 as unknown as boolean);
    const ride = pool.use(T, async () => 1);
    await flushMicrotasks();
    expect(connector.pending[0]!.ctx.permit.host).not.toBe('');
    clock.advance(1_000);
    await expect(ride).rejects.toBeInstanceOf(ConnectTimeoutError);
    await pool.close();
  });
});

describe('ConnectionPool: a self-guarding connector that delivers after close()', () => {
  const late = deferred<FakeConnection>();
  it('has its late connection closed as the pool closed it, and its waiter stops at once without a second look', async () => {
    const clock = new ManualClock(0);
    const connector = new SelfGuardingConnector(() => true);
    connector.connect = (target, ctx) => {
      connector.pending.push({ target, ctx, resolve: () => ({ n: 1, target, closed: false }), reject: () => {} });
      return late.promise; // ignores the abort
    };
    let hostOfCalls = 0;
    const pool = new ConnectionPool<FakeConnection>({
      connector,
      clock,
      breaker: new HostBreaker({ clock }),
      classify: testClassify,
      hostOf: (t) => {
        hostOfCalls++;
        return t;
      },
    });
    const reasons: unknown[] = [];
    const baseClose = connector.close.bind(connector);
    connector.close = (c: FakeConnection, reason?: unknown) => {
      reasons.push(reason);
      baseClose(c);
    };
    const retired: string[] = [];
    pool.on('retired', (e) => void retired.push(e.reason));
    const ride = pool.use(T, async () => 1);
    await flushMicrotasks();
    const closing = pool.close();
    const conn: FakeConnection = { n: 1, target: T, closed: false };
    late.resolve(conn);
    await expect(ride).rejects.toBeInstanceOf(PoolClosedError);
    await closing;
    // Given up at the abort, as a pool-guarded dial is: never a pool connection, so no 'retired'.
    expect(retired).toEqual([]);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toBeInstanceOf(PoolClosedError);
    expect(conn.closed).toBe(true);
    expect(hostOfCalls).toBe(1); // no second slot, no second attempt
    expect(pool.stats()).toMatchObject({ targets: 0, connections: 0, attempts: 0 });
  });
});
