/**
 * ConnectionPool.ride: use() for work that reports its own end (the gRPC adapter's calls). The
 * same rules as use() (one end wins, a dead connection or the caller's abort releases the ride, a
 * sibling's retired connection sends a safe failure back for a fresh one), settled through the
 * caller's own functions, and no promise made on a warm connection.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionGoneError, PoolClosedError } from '../../src/core/errors.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import type { Trip } from '../../src/pool/trip.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { promisesMadeBy } from '../helpers/promises.js';
import { DeadError, FakeConnector, type FakeConnection, NotSentError, testClassify } from './fake-connector.js';

const T = 'svc-a:50051';

/** What a ride's settlers heard, in order. */
function outcomes() {
  const heard: Array<['resolved' | 'rejected', unknown]> = [];
  return {
    heard,
    resolve: (value: unknown): void => void heard.push(['resolved', value]),
    reject: (reason: unknown): void => void heard.push(['rejected', reason]),
  };
}

async function warm() {
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify });
  await pool.use(T, async () => undefined);
  return { connector, pool };
}

describe('ConnectionPool.ride', () => {
  it('on a warm connection: boards at once, makes no promise, and settles once, from the first end', async () => {
    const { pool } = await warm();
    const trips: Array<Trip<FakeConnection>> = [];
    const o = outcomes();
    const made = promisesMadeBy(() => {
      for (let i = 0; i < 20; i++) pool.ride(T, (trip) => void trips.push(trip), {}, o.resolve, o.reject);
    });
    expect(made).toBe(0);
    expect(trips).toHaveLength(20);
    expect(trips.every((t) => t.connection.n === 1 && t.turn === 1)).toBe(true);
    expect(pool.stats().leases).toBe(20);
    expect(o.heard).toEqual([]); // nothing ends before its work says so
    for (const [i, trip] of trips.entries()) {
      trip.end(true, i);
      trip.end(false, new Error('a second end is ignored'));
    }
    expect(o.heard).toEqual(trips.map((_, i) => ['resolved', i]));
    expect(pool.stats()).toMatchObject({ leases: 0, connections: 1 });
  });

  it('a failed end rejects with its error; one the classifier calls dead drops the connection', async () => {
    const { connector, pool } = await warm();
    const o = outcomes();
    const failure = new Error('the call failed');
    pool.ride(T, (trip) => trip.end(false, failure), {}, o.resolve, o.reject);
    expect(o.heard).toEqual([['rejected', failure]]);
    expect(pool.stats().connections).toBe(1);
    const dead = new DeadError('reset');
    pool.ride(T, (trip) => trip.end(false, dead), {}, o.resolve, o.reject);
    expect(o.heard[1]).toEqual(['rejected', dead]);
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.n)).toEqual([1]);
  });

  it('a board that throws rejects the ride with its error and frees the lease', async () => {
    const { pool } = await warm();
    const o = outcomes();
    const thrown = new Error('board threw');
    pool.ride(T, () => {
      throw thrown;
    }, {}, o.resolve, o.reject);
    expect(o.heard).toEqual([['rejected', thrown]]);
    expect(pool.stats().leases).toBe(0);
  });

  it('a signal that cannot be listened to rejects the ride, which never boards', async () => {
    const { pool } = await warm();
    const o = outcomes();
    const bad = new TypeError('not a listener target');
    const signal = { aborted: false, addEventListener: () => { throw bad; }, removeEventListener: () => {} } as unknown as AbortSignal;
    let boarded = false;
    pool.ride(T, () => void (boarded = true), { signal }, o.resolve, o.reject);
    expect(o.heard).toEqual([['rejected', bad]]);
    expect(boarded).toBe(false);
  });

  it("the caller's abort releases the ride with its reason; the work's later end is unheard", async () => {
    const { pool } = await warm();
    const o = outcomes();
    const caller = new AbortController();
    let trip: Trip<FakeConnection> | undefined;
    pool.ride(T, (t) => void (trip = t), { signal: caller.signal }, o.resolve, o.reject);
    const reason = new Error('caller left');
    caller.abort(reason);
    expect(o.heard).toEqual([['rejected', reason]]);
    expect(trip!.signal.aborted).toBe(true);
    trip!.end(true, 'too late');
    expect(o.heard).toHaveLength(1);
    expect(pool.stats().leases).toBe(0);
  });

  it('a cold target: boards once the shared connect lands; a failed connect rejects with its error', async () => {
    const connector = new FakeConnector();
    const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify });
    const o = outcomes();
    pool.ride(T, (trip) => trip.end(true, trip.connection.n), {}, o.resolve, o.reject);
    pool.ride(T, (trip) => trip.end(true, trip.connection.n), {}, o.resolve, o.reject);
    expect(connector.connects).toBe(1);
    connector.resolveLast();
    await flushMicrotasks();
    expect(o.heard).toEqual([['resolved', 1], ['resolved', 1]]);
    const refused = new Error('ECONNREFUSED');
    pool.ride('svc-b:50051', () => undefined, {}, o.resolve, o.reject);
    connector.pending[1]!.reject(refused);
    await flushMicrotasks();
    expect(o.heard[2]).toEqual(['rejected', refused]);
  });

  it("a safe failure on a connection a sibling retired goes back: the same board rides the fresh one, settled once", async () => {
    const { connector, pool } = await warm();
    const o = outcomes();
    const turns: number[] = [];
    pool.ride(
      T,
      (trip) => {
        turns.push(trip.turn);
        if (trip.turn === 1) {
          connector.opened[0]!.watch!.retire('goaway'); // a sibling's GOAWAY, then this call is refused
          trip.end(false, new NotSentError('refused stream'));
        } else trip.end(true, `served by #${trip.id}`);
      },
      {},
      o.resolve,
      o.reject,
    );
    await flushMicrotasks();
    expect(turns).toEqual([1, 2]);
    expect(o.heard).toEqual([['resolved', 'served by #2']]);
    expect(pool.stats().turns).toBe(1);
  });

  it('a connection a sibling found dead: an idempotent ride goes back for a fresh one, another gets ConnectionGoneError', async () => {
    const { pool } = await warm();
    const idempotent = outcomes();
    const other = outcomes();
    const turns: number[] = [];
    pool.ride(T, (trip) => {
      turns.push(trip.turn);
      if (trip.turn > 1) trip.end(true, `served by #${trip.id}`);
    }, { idempotent: true }, idempotent.resolve, idempotent.reject);
    pool.ride(T, () => undefined, {}, other.resolve, other.reject);
    const dead = new DeadError('reset');
    pool.ride(T, (trip) => trip.end(false, dead), {}, () => {}, () => {}); // the sibling whose failure kills the connection
    await flushMicrotasks();
    expect(turns).toEqual([1, 2]);
    expect(idempotent.heard).toEqual([['resolved', 'served by #2']]);
    expect(other.heard).toHaveLength(1);
    expect(other.heard[0]![1]).toBeInstanceOf(ConnectionGoneError);
  });

  it('a closed pool rejects with PoolClosedError', async () => {
    const { pool } = await warm();
    await pool.close();
    const o = outcomes();
    pool.ride(T, () => undefined, {}, o.resolve, o.reject);
    await flushMicrotasks();
    expect(o.heard).toHaveLength(1);
    expect(o.heard[0]![1]).toBeInstanceOf(PoolClosedError);
  });

  it('a dead connection releases every ride on it with ConnectionGoneError', async () => {
    const { connector, pool } = await warm();
    const o = outcomes();
    for (let i = 0; i < 3; i++) pool.ride(T, () => undefined, {}, o.resolve, o.reject);
    connector.opened[0]!.watch!.gone(new Error('transport closed'));
    expect(o.heard).toHaveLength(3);
    for (const [how, why] of o.heard) {
      expect(how).toBe('rejected');
      expect(why).toBeInstanceOf(ConnectionGoneError);
    }
  });
  it("a settler, or a 'gone' or 'retired' listener, that starts a call at once never boards the connection being dropped", async () => {
    const { connector, pool } = await warm();
    const boardedOn: number[] = [];
    const again = outcomes();
    const rideAgain = (): void => pool.ride(T, (trip) => {
      boardedOn.push(trip.connection.n);
      trip.end(true, trip.connection.n);
    }, {}, again.resolve, again.reject);
    // A settler that re-enters synchronously: ride() calls it inside the dead connection's release.
    pool.ride(T, () => undefined, {}, () => {}, rideAgain);
    pool.on('gone', rideAgain);
    connector.opened[0]!.watch!.gone(new Error('transport closed'));
    await flushMicrotasks();
    expect(boardedOn).toEqual([2, 2]); // both on the fresh connection, one dial for both
    expect(again.heard).toEqual([['resolved', 2], ['resolved', 2]]);
    expect(connector.connects).toBe(2);
    // Retired (idle sweep, GOAWAY): a 'retired' listener's call gets a fresh connection too.
    pool.on('retired', rideAgain);
    connector.opened[1]!.watch!.retire();
    await flushMicrotasks();
    expect(boardedOn).toEqual([2, 2, 3]);
    expect(connector.connects).toBe(3);
  });
  it("a committed ride (its answer has begun) never goes back, idempotent or not, when its connection dies", async () => {
    const { connector, pool } = await warm();
    const committed = outcomes();
    const open = outcomes();
    const turns: number[] = [];
    pool.ride(T, (trip) => {
      turns.push(trip.turn);
      trip.commit();
    }, { idempotent: true }, committed.resolve, committed.reject);
    pool.ride(T, (trip) => {
      if (trip.turn > 1) trip.end(true, 'again');
    }, { idempotent: true }, open.resolve, open.reject);
    connector.opened[0]!.watch!.gone(new Error('transport closed'));
    await flushMicrotasks();
    expect(turns).toEqual([1]);
    expect(committed.heard).toHaveLength(1);
    expect(committed.heard[0]![1]).toBeInstanceOf(ConnectionGoneError);
    expect(open.heard).toEqual([['resolved', 'again']]); // the one not committed went back
    expect(pool.stats().turns).toBe(1);
  });
  it('a connection found dead after it retired (a GOAWAY): rides that fail on their own this turn keep their own failure; the rest are released on the next', async () => {
    const { connector, pool } = await warm();
    const excluded = outcomes();
    const silent = outcomes();
    const trips: Array<Trip<FakeConnection>> = [];
    const turns: number[] = [];
    pool.ride(T, (trip) => {
      turns.push(trip.turn);
      if (trip.turn === 1) trips.push(trip);
      else trip.end(true, `sent again on #${trip.connection.n}`);
    }, {}, excluded.resolve, excluded.reject); // not idempotent: only "not sent" may go back
    pool.ride(T, () => undefined, {}, silent.resolve, silent.reject);
    // An idempotent ride whose own failure says nothing (a protocol error): the connection is
    // known dead, so it goes back as a release would have sent it.
    const idempotent = outcomes();
    const idempotentTurns: number[] = [];
    pool.ride(T, (trip) => {
      idempotentTurns.push(trip.turn);
      if (trip.turn === 1) trips.push(trip);
      else trip.end(true, 'again');
    }, { idempotent: true }, idempotent.resolve, idempotent.reject);
    const events: string[] = [];
    pool.on('gone', (e) => void events.push(`gone#${e.id} leases=${e.leases}`));
    pool.on('closed', (e) => void events.push(`closed#${e.id}`));
    const watch = connector.opened[0]!.watch!;
    watch.retire('goaway');
    watch.gone(new Error('session closed'));
    trips[0]!.end(false, new NotSentError('excluded by the GOAWAY')); // its own failure, this same turn
    trips[1]!.end(false, new Error('connection closed'));
    expect(silent.heard).toEqual([]); // not yet: its own failure may still come this turn
    await flushMicrotasks(); // a turn
    expect(turns).toEqual([1, 2]); // was [1]: released as ConnectionGoneError, a POST never sent again
    expect(excluded.heard).toEqual([['resolved', 'sent again on #2']]);
    expect(idempotentTurns).toEqual([1, 2]);
    expect(idempotent.heard).toEqual([['resolved', 'again']]);
    expect(events).toEqual(['gone#1 leases=2', 'closed#1']); // gone first, with the rides the death cut: the one still riding and the one whose own failure was not 'not sent'
    expect(silent.heard).toHaveLength(1);
    expect(silent.heard[0]![1]).toBeInstanceOf(ConnectionGoneError);
    expect(pool.stats()).toMatchObject({ leases: 0, gone: 1 });
  });

  it('a retired connection whose every ride ended on its own before its transport closed (a graceful drain: the GOAWAY excluded them) is not a death: no gone, nothing counted (was: every nginx reload logged a dead connection)', async () => {
    const { connector, pool } = await warm();
    const trips: Array<Trip<FakeConnection>> = [];
    const first = outcomes();
    const second = outcomes();
    for (const o of [first, second]) {
      pool.ride(T, (trip) => {
        if (trip.turn === 1) trips.push(trip);
        else trip.end(true, `sent again on #${trip.connection.n}`);
      }, {}, o.resolve, o.reject);
    }
    const events: string[] = [];
    pool.on('gone', (e) => void events.push(`gone#${e.id}`));
    pool.on('closed', (e) => void events.push(`closed#${e.id}`));
    const watch = connector.opened[0]!.watch!;
    watch.retire('goaway');
    watch.gone(new Error('session closed'));
    for (const trip of trips) trip.end(false, new NotSentError('excluded by the GOAWAY'));
    await flushMicrotasks();
    await new Promise((resolve) => setImmediate(resolve));
    await flushMicrotasks();
    expect(first.heard).toEqual([['resolved', 'sent again on #2']]);
    expect(second.heard).toEqual([['resolved', 'sent again on #2']]);
    expect(events).toEqual(['closed#1']);
    expect(pool.stats()).toMatchObject({ leases: 0, gone: 0 });
  });
});
