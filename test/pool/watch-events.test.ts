/**
 * What a pool's listeners hear when a connector's watch reports a connection's fate: the death of
 * a connection before the resends it causes (a listener keyed on connection ids heard `resent`
 * for a connection it had not yet heard was dead), a retirement only for a connection not already
 * gone, and only with a reason the pool knows (an outside review: `retire({ junk: 1 })` was
 * emitted as its reason, and `retire()` after `gone()` emitted `retired` for a dead connection).
 */
import { describe, expect, it } from 'vitest';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, testClassify } from './fake-connector.js';

const T = 'svc-w:11211';

function setup(): { connector: FakeConnector; pool: ConnectionPool<FakeConnection>; heard: string[] } {
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify, connectTimeout: 1_000, redialPace: 0 });
  const heard: string[] = [];
  pool.on('gone', (e) => void heard.push(`gone ${e.id} leases ${e.leases}`));
  pool.on('resent', (e) => void heard.push(`resent ${e.id}`));
  pool.on('retired', (e) => void heard.push(`retired ${e.id} ${String(e.reason)}`));
  pool.on('closed', (e) => void heard.push(`closed ${e.id}`));
  return { connector, pool, heard };
}

describe('ConnectionPool: events of a watched connection', () => {
  it('a connection that dies under 3 idempotent requests: gone first, then the 3 resends', async () => {
    const { connector, pool, heard } = setup();
    await pool.use(T, async () => 'proven');
    let boarded = 0;
    let allAboard!: () => void;
    const aboard = new Promise<void>((resolve) => (allAboard = resolve));
    const calls = [1, 2, 3].map(() =>
      pool.use(
        T,
        (lease) => {
          if (lease.turn > 1) return Promise.resolve('again');
          if (++boarded === 3) allAboard();
          return new Promise(() => {}); // released by the death
        },
        { idempotent: true },
      ),
    );
    await aboard;
    connector.opened[0]!.watch!.gone(new Error('peer killed'));
    expect(await Promise.all(calls)).toEqual(['again', 'again', 'again']);
    expect(heard.slice(0, 4)).toEqual(['gone 1 leases 3', 'resent 1', 'resent 1', 'resent 1']);
    await pool.close();
  });

  it('retire() with a reason the pool does not know is a GOAWAY; retire() after gone() says nothing', async () => {
    const { connector, pool, heard } = setup();
    await pool.use(T, async () => 1);
    connector.opened[0]!.watch!.retire({ junk: 1 } as never);
    await pool.use(T, async () => 2);
    const second = connector.opened[1]!;
    const watch = second.watch!;
    watch.gone(new Error('reset'));
    watch.retire('goaway');
    await pool.close();
    expect(heard.filter((h) => h.startsWith('retired'))).toEqual(['retired 1 goaway']);
    expect(heard).toContain('gone 2 leases 0');
  });
});
