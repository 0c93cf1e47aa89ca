/**
 * ConnectionPool.use on a warm connection pays only for what can happen (issue 14): counted, not
 * timed. Promises through a promise hook, AbortControllers through a counting subclass, timers and
 * clock reads through a counting clock, abort listeners on the caller's signal. A later change
 * that puts an async frame, a promise chain or a per-call controller back on the path shows here.
 */
import { getEventListeners, setMaxListeners } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { ConnectionGoneError } from '../../src/core/errors.js';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { countAbortControllers } from '../helpers/hot-path.js';
import { promisesMadeBy } from '../helpers/promises.js';
import { DeadError, FakeConnector, type FakeConnection, deferred, testClassify } from './fake-connector.js';

const T = 'svc-a:50051';
const CALLS = 50;

/** A manual clock that counts timers armed and clock reads. */
class CountingManualClock extends ManualClock {
  reads = 0;
  armed = 0;
  override now(): number {
    this.reads++;
    return super.now();
  }
  override setTimeout(callback: () => void, ms: number): ReturnType<ManualClock['setTimeout']> {
    this.armed++;
    return super.setTimeout(callback, ms);
  }
}

async function warm(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new CountingManualClock();
  const connector = new FakeConnector();
  connector.auto = 'resolve';
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: null, classify: testClassify, ...options });
  await pool.use(T, async () => undefined);
  return { clock, connector, pool };
}

describe('ConnectionPool.use on a warm connection: what a call creates', () => {
  it('makes two promises of its own per call (the call and its one reaction to fn), with or without a signal', async () => {
    const { pool } = await warm();
    const ready = Promise.resolve(1);
    const fn = (): Promise<number> => ready; // makes no promise itself
    const signal = new AbortController().signal;
    setMaxListeners(0, signal); // the caller's own signal, shared by CALLS rides in flight
    let calls: Array<Promise<number>> = [];
    const bare = promisesMadeBy(() => {
      for (let i = 0; i < CALLS; i++) calls.push(pool.use(T, fn));
    });
    await expect(Promise.all(calls)).resolves.toHaveLength(CALLS);
    calls = [];
    const withSignal = promisesMadeBy(() => {
      for (let i = 0; i < CALLS; i++) calls.push(pool.use(T, fn, { signal, idempotent: true }));
    });
    await expect(Promise.all(calls)).resolves.toHaveLength(CALLS);
    // Before the fast path: 5 per call (an async frame, the ride's promise, its chain).
    expect(bare).toBe(2 * CALLS);
    expect(withSignal).toBe(2 * CALLS);
    expect(pool.stats()).toMatchObject({ opened: 1, leases: 0 });
  });

  it('arms no timer, makes no AbortController, reads the clock once per call and once as the connection goes idle, and leaves no listener on the caller', async () => {
    const { clock, pool } = await warm();
    const signal = new AbortController().signal;
    setMaxListeners(0, signal); // the caller's own signal, shared by CALLS rides in flight
    const [reads, armed] = [clock.reads, clock.armed];
    const controllers = await countAbortControllers(async () => {
      const calls = Array.from({ length: CALLS }, (_, i) => pool.use(T, async (lease) => lease.id + i, { signal }));
      expect(getEventListeners(signal, 'abort')).toHaveLength(CALLS); // one per ride in flight
      await Promise.all(calls);
    });
    expect(controllers).toBe(0);
    expect(clock.armed - armed).toBe(0);
    // The start (the sweep's due check), and the end of the last ride only: a connection with
    // rides is never idle, so the others' ends need no time (two per call before).
    expect(clock.reads - reads).toBe(CALLS + 1);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    expect(pool.stats()).toMatchObject({ opened: 1, attempts: 0, leases: 0 });
  });
});

describe('ConnectionPool.use on a warm connection at 1 000 targets', () => {
  it('looks the target up once per call, in one Map, whatever the number of targets', async () => {
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify });
    const targets = Array.from({ length: 1_000 }, (_, i) => `10.0.${i >> 8}.${i & 255}:11211`);
    await Promise.all(targets.map((t) => pool.use(t, async () => undefined)));
    const ready = Promise.resolve(0);
    const calls: Array<Promise<number>> = [];
    const get = vi.spyOn(Map.prototype, 'get');
    let lookups: number;
    try {
      for (const t of targets) calls.push(pool.use(t, () => ready));
      lookups = get.mock.calls.length;
    } finally {
      get.mockRestore();
    }
    await Promise.all(calls);
    expect(lookups).toBe(targets.length);
    expect(pool.stats()).toMatchObject({ targets: 1_000, opened: 1_000, leases: 0 });
    await pool.close();
  });
});

describe('ConnectionPool.use on a warm connection: the fast path keeps the rules', () => {
  it('a caller already aborted gets its reason and boards nothing', async () => {
    const { pool } = await warm();
    const controller = new AbortController();
    controller.abort(new Error('mine'));
    let ran = false;
    await expect(
      pool.use(T, async () => {
        ran = true;
      }, { signal: controller.signal }),
    ).rejects.toThrow('mine');
    expect(ran).toBe(false);
    expect(pool.stats().leases).toBe(0);
  });

  it('a caller aborting mid-ride gets its reason at once, and the ride leaves its connection', async () => {
    const { pool } = await warm();
    const controller = new AbortController();
    const never = deferred<number>();
    const call = pool.use(T, () => never.promise, { signal: controller.signal });
    await flushMicrotasks();
    expect(pool.stats().leases).toBe(1);
    controller.abort(new Error('left'));
    await expect(call).rejects.toThrow('left');
    expect(pool.stats().leases).toBe(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    never.resolve(1); // settles later, unheard
    await flushMicrotasks();
    expect(pool.stats()).toMatchObject({ opened: 1, connections: 1, leases: 0 });
  });

  it('fn throwing synchronously rejects the call and leaves no lease', async () => {
    const { pool } = await warm();
    await expect(
      pool.use(T, () => {
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');
    expect(pool.stats().leases).toBe(0);
  });

  it('a signal that cannot be listened to rejects the call before it boards', async () => {
    const { pool } = await warm();
    const odd = {
      aborted: false,
      addEventListener() {
        throw new TypeError('no listeners here');
      },
      removeEventListener() {},
    } as unknown as AbortSignal;
    let ran = false;
    await expect(
      pool.use(T, async () => {
        ran = true;
      }, { signal: odd }),
    ).rejects.toThrow('no listeners here');
    expect(ran).toBe(false);
    expect(pool.stats().leases).toBe(0);
  });

  it('a connection dying under warm rides releases each once, and an idempotent one goes back to a fresh connection after the eviction', async () => {
    const { connector, pool } = await warm();
    const killer = deferred<number>();
    const killed = pool.use(T, () => killer.promise);
    const goesBack = pool.use(
      T,
      (lease) =>
        lease.turn === 1 ? new Promise<number>((_, reject) => lease.signal.addEventListener('abort', () => reject(lease.signal.reason))) : Promise.resolve(lease.id),
      { idempotent: true },
    );
    await flushMicrotasks();
    killer.reject(new DeadError('transport died'));
    await expect(killed).rejects.toBeInstanceOf(DeadError);
    await expect(goesBack).resolves.toBe(2);
    expect(connector.opened).toHaveLength(2);
    expect(pool.stats()).toMatchObject({ turns: 1, gone: 1, leases: 0 });
  });

  it('a non-idempotent warm ride released by a dying connection gets ConnectionGoneError', async () => {
    const { connector, pool } = await warm();
    const call = pool.use(T, () => new Promise<number>(() => {}));
    await flushMicrotasks();
    connector.opened[0]!.watch!.gone(new Error('reset'));
    await expect(call).rejects.toBeInstanceOf(ConnectionGoneError);
    expect(pool.stats()).toMatchObject({ turns: 0, leases: 0 });
  });

  it('a non-function fn rejects (TypeError) without sweeping or dialling', async () => {
    const { clock, connector, pool } = await warm();
    const reads = clock.reads;
    await expect(pool.use(T, 42 as never)).rejects.toBeInstanceOf(TypeError);
    expect(clock.reads).toBe(reads);
    expect(connector.connects).toBe(1);
  });
});
