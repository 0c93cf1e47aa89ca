/**
 * The pool's idle sweep at scale (issue 17), by counting: how many connections one call retires.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, testClassify } from './fake-connector.js';

function warmPool(targets: number, sweepInterval: number) {
  const clock = new ManualClock(0);
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, breaker: null, classify: testClassify, clock, idleTimeout: 1_000, sweepInterval });
  const names = Array.from({ length: targets }, (_, i) => `t${i}.test:1`);
  return { clock, connector, pool, names };
}

describe('ConnectionPool: the idle sweep at 1 000 targets', () => {
  it('1 000 connections gone idle at once are closed 64 targets per call, never in one scan of all of them', async () => {
    const { clock, connector, pool, names } = warmPool(1_000, 100);
    for (const t of names) await pool.use(t, async () => 1);
    await pool.use('fresh.test:1', async () => 1);
    clock.advance(2_000); // all 1 000 idle
    const perCall: number[] = [];
    let last = connector.closed.length;
    for (let i = 0; i < 20; i++) {
      await pool.use('fresh.test:1', async () => 1);
      await flushMicrotasks();
      perCall.push(connector.closed.length - last);
      last = connector.closed.length;
    }
    expect(Math.max(...perCall)).toBeLessThanOrEqual(64);
    expect(connector.closed).toHaveLength(1_000); // fresh.test is in use by the time the sweep reaches it
    expect(pool.stats()).toMatchObject({ targets: 1, connections: 1, opened: 1_001 });
    await pool.close();
  });

  it('a sweep that has seen every target waits for sweepInterval before the next starts', async () => {
    const { clock, connector, pool, names } = warmPool(100, 5_000);
    for (const t of names.slice(0, 10)) await pool.use(t, async () => 1);
    clock.advance(5_000);
    await pool.use('fresh.test:1', async () => 1); // a sweep of 11 targets, in one call
    await flushMicrotasks();
    expect(connector.closed).toHaveLength(10);
    for (const t of names.slice(10, 20)) await pool.use(t, async () => 1);
    clock.advance(4_999); // idle, but no sweep is due
    await pool.use('fresh.test:1', async () => 1);
    await flushMicrotasks();
    expect(connector.closed).toHaveLength(10);
    clock.advance(1);
    await pool.use('fresh.test:1', async () => 1);
    await flushMicrotasks();
    expect(connector.closed).toHaveLength(20);
    await pool.close();
  });
});
