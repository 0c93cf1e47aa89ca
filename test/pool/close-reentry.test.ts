/**
 * ConnectionPool.close() is closed from its first instruction: a listener that close() itself
 * calls (here a 'retired' event) and that calls use() gets PoolClosedError and
 * boards nothing. (`#closed` used to be set only after close()'s synchronous part, so such a call
 * rode a connection not yet retired, or dialled a fresh one.)
 */
import { describe, expect, it } from 'vitest';
import { PoolClosedError } from '../../src/core/errors.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, testClassify } from './fake-connector.js';

const A = 'svc-a:7000';
const B = 'svc-b:7000';

async function twoWarm() {
  const clock = new ManualClock(0);
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: null, classify: testClassify });
  await pool.use(A, async () => undefined);
  await pool.use(B, async () => undefined);
  return { clock, connector, pool };
}

describe('ConnectionPool.close(): use() from inside close()', () => {
  it("a 'retired' listener calling use() for a target not yet retired gets PoolClosedError and runs nothing", async () => {
    const { connector, pool } = await twoWarm();
    let ran = 0;
    const inside: Array<Promise<unknown>> = [];
    pool.on('retired', () => {
      if (inside.length > 0) return;
      inside.push(pool.use(B, async () => ran++));
      inside[0]!.catch(() => {});
    });
    await pool.close();
    await expect(inside[0]).rejects.toBeInstanceOf(PoolClosedError);
    expect(ran).toBe(0);
    expect(connector.connects).toBe(2); // no dial from inside close()
    expect(pool.stats()).toMatchObject({ targets: 0, connections: 0, leases: 0, opened: 2, closed: 2 });
  });

});
