/**
 * `ConnectionPool.retire(target)`: the owner knows no caller can reach a target's connection any
 * more (a gRPC channel whose every client closed; see test/adapters/grpc/released-channel). It is
 * retired as the idle sweep retires one: a `'retired'` event (reason `'idle'`), closed at once
 * when nothing rides it, else once its rides end, and the next call gets a fresh connection.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { type FakeConnection, FakeConnector, testClassify } from './fake-connector.js';

const T = 'cache-1:11211';

function setup(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new ManualClock();
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: new HostBreaker({ clock }), classify: testClassify, ...options });
  const retired: Array<{ target: string; id: number; reason: string }> = [];
  pool.on('retired', (e) => void retired.push({ target: e.target, id: e.id, reason: e.reason }));
  return { connector, pool, retired };
}

describe('ConnectionPool.retire(target)', () => {
  it('a target with no connection: false, and nothing happens', () => {
    const { connector, pool, retired } = setup();
    expect(pool.retire(T)).toBe(false);
    expect(retired).toEqual([]);
    expect(connector.connects).toBe(0);
  });

  it('an idle connection: closed at once, reason idle, and the next call dials a fresh one', async () => {
    const { connector, pool, retired } = setup();
    await pool.use(T, async () => 1);
    await pool.use('other:1', async () => 1);
    await flushMicrotasks();
    expect(pool.retire(T)).toBe(true);
    expect(retired).toEqual([{ target: T, id: 1, reason: 'idle' }]);
    expect(connector.closed.map((c) => c.target)).toEqual([T]); // the other target's stays
    await flushMicrotasks();
    expect(pool.stats().connections).toBe(1);
    expect(pool.retire(T)).toBe(false); // already gone from its slot
    const lease = await pool.use(T, async (l) => l.connection.n);
    expect(lease).toBe(3); // a new connection, not the retired one
    expect(connector.connects).toBe(3);
  });

  it('a connection a call rides: the call finishes on it, then it closes; calls meanwhile get a fresh one', async () => {
    const { connector, pool } = setup();
    let finish!: () => void;
    const riding = pool.use(T, (l) => new Promise<number>((resolve) => (finish = () => resolve(l.connection.n))));
    await flushMicrotasks();
    expect(pool.retire(T)).toBe(true);
    expect(connector.closed).toEqual([]); // a call still rides it
    expect(await pool.use(T, async (l) => l.connection.n)).toBe(2);
    finish();
    expect(await riding).toBe(1);
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.n)).toEqual([1]);
  });
});
