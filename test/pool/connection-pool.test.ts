import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, ConnectionGoneError, HostUnavailableError, PoolClosedError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import type { Lease } from '../../src/pool/pooled-connection.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { DeadError, FakeConnector, type FakeConnection, NotSentError, deferred, testClassify } from './fake-connector.js';

const T = 'svc-a:50051';

function setup(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new ManualClock();
  const connector = new FakeConnector();
  const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: 3 });
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker, classify: testClassify, connectTimeout: 1_000, ...options });
  return { clock, connector, breaker, pool };
}

/** Two requests riding one fresh connection, its watch, and the 'gone' events the pool tells. */
async function twoRiders(options: { idempotent?: boolean } = {}) {
  const { connector, pool } = setup();
  connector.auto = 'resolve';
  const gone: Array<{ id: number; leases: number }> = [];
  pool.on('gone', (e) => void gone.push({ id: e.id, leases: e.leases }));
  const riders = Array.from({ length: 2 }, () => hold(pool, options));
  await flushMicrotasks();
  return { pool, gone, riders, watch: connector.opened[0]!.watch! };
}

/** A request that rides until the test finishes it. */
function hold(pool: ConnectionPool<FakeConnection>, options: { signal?: AbortSignal; idempotent?: boolean } = {}, target = T) {
  const done = deferred<string>();
  const leases: Array<Lease<FakeConnection>> = [];
  const result = pool.use(
    target,
    (lease) => {
      leases.push(lease);
      return done.promise;
    },
    options,
  );
  result.catch(() => {});
  return { result, leases, finish: done.resolve, fail: done.reject };
}

describe('ConnectionPool: one connect attempt per target', () => {
  it('shares one attempt and one connection among concurrent callers, counting one dial', async () => {
    const { connector, breaker, pool } = setup();
    const calls = Array.from({ length: 16 }, () => pool.use(T, async (lease) => lease.id));
    await flushMicrotasks();
    expect(connector.connects).toBe(1);
    connector.resolveLast();
    expect(await Promise.all(calls)).toEqual(Array(16).fill(1));
    expect(pool.stats()).toMatchObject({ connections: 1, opened: 1, attempts: 0, leases: 0 });
    expect(breaker.stats()).toMatchObject({ succeeded: 1, failed: 0 });
    await pool.use(T, async () => 0);
    expect(connector.connects).toBe(1);
  });

  it('a waiter that aborts leaves at once; the attempt carries on for the others and is kept', async () => {
    const { connector, breaker, pool } = setup();
    const controller = new AbortController();
    const leaving = pool.use(T, async () => 'never', { signal: controller.signal });
    const staying = pool.use(T, async (l) => l.id);
    await flushMicrotasks();
    const reason = new Error('caller left');
    controller.abort(reason);
    await expect(leaving).rejects.toBe(reason);
    expect(connector.pending[0]!.ctx.signal.aborted).toBe(false);
    connector.resolveLast();
    await expect(staying).resolves.toBe(1);
    expect(breaker.stats()).toMatchObject({ succeeded: 1, abandoned: 0 });
  });

  it('an attempt every waiter left still settles, is recorded once, and is kept', async () => {
    const { connector, breaker, pool } = setup();
    const controllers = Array.from({ length: 5 }, () => new AbortController());
    const calls = controllers.map((c) => pool.use(T, async () => 1, { signal: c.signal }));
    await flushMicrotasks();
    for (const c of controllers) c.abort(new Error('gone'));
    await Promise.allSettled(calls);
    expect(pool.stats().attempts).toBe(1);
    connector.resolveLast();
    await flushMicrotasks();
    expect(pool.stats()).toMatchObject({ attempts: 0, connections: 1 });
    expect(breaker.stats().succeeded).toBe(1);
    await pool.use(T, async () => 1);
    expect(connector.connects).toBe(1); // the kept connection serves the next caller
  });

  it('a failed attempt is shared by its waiters, counted once, and never handed to a later caller', async () => {
    const { clock, connector, breaker, pool } = setup();
    const calls = Array.from({ length: 8 }, () => pool.use(T, async () => 1));
    await flushMicrotasks();
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    connector.pending[0]!.reject(refused);
    const results = await Promise.allSettled(calls);
    expect(results.every((r) => r.status === 'rejected' && r.reason === refused)).toBe(true);
    expect(breaker.state(T)?.failures).toBe(1);
    const next = pool.use(T, async (l) => l.id);
    await flushMicrotasks();
    expect(connector.connects).toBe(1); // the next attempt waits the pace's first 10 ms (redialPace)
    clock.advance(9);
    await flushMicrotasks();
    expect(connector.connects).toBe(1);
    clock.advance(1);
    await flushMicrotasks();
    expect(connector.connects).toBe(2); // a fresh dial: the failure was not handed to the later caller
    connector.resolveLast();
    await expect(next).resolves.toBe(1);
  });

  it('an attempt nobody waits for that fails is still recorded, with no unhandled rejection', async () => {
    const { connector, breaker, pool } = setup();
    const c = new AbortController();
    const call = pool.use(T, async () => 1, { signal: c.signal });
    await flushMicrotasks();
    c.abort(new Error('left'));
    await expect(call).rejects.toThrow('left');
    connector.pending[0]!.reject(new Error('refused'));
    await flushMicrotasks();
    expect(breaker.stats()).toMatchObject({ failed: 1, abandoned: 0 });
    expect(pool.stats().attempts).toBe(0);
  });

  it('bounds the attempt by connectTimeout and counts the round once however many waited', async () => {
    const { clock, connector, breaker, pool } = setup({ connectTimeout: 1_000 });
    const calls = Array.from({ length: 100 }, () => pool.use(T, async () => 1));
    await flushMicrotasks();
    clock.advance(1_000);
    const results = await Promise.allSettled(calls);
    expect(results.every((r) => r.status === 'rejected' && r.reason instanceof ConnectTimeoutError)).toBe(true);
    expect(connector.connects).toBe(1);
    expect(breaker.state(T)?.failures).toBe(1);
  });

  it('a refusing breaker fails callers at once without connecting', async () => {
    const { connector, breaker, pool } = setup();
    for (let i = 0; i < 3; i++) breaker.admit(T).failed();
    for (let i = 0; i < 50; i++) await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(HostUnavailableError);
    expect(connector.connects).toBe(0);
  });
});

describe('ConnectionPool: identity', () => {
  it('a late failure from an old connection never evicts its replacement (seed 003, review P2)', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const a1 = hold(pool);
    const a2 = hold(pool);
    await flushMicrotasks();
    expect(a1.leases[0]!.id).toBe(a2.leases[0]!.id);
    a1.fail(new DeadError('unavailable #1'));
    await expect(a1.result).rejects.toThrow('unavailable #1');
    // A new caller builds the replacement B.
    const b = hold(pool);
    await flushMicrotasks();
    expect(b.leases[0]!.id).toBe(2);
    // a2 was released when A died; the late report of A's failure must not evict B.
    await expect(a2.result).rejects.toBeInstanceOf(ConnectionGoneError);
    a2.fail(new DeadError('unavailable #2 (late)'));
    await flushMicrotasks();
    const c = hold(pool);
    await flushMicrotasks();
    expect(c.leases[0]!.id).toBe(2);
    expect(connector.connects).toBe(2); // initial + one replacement, not three
    b.finish('ok');
    c.finish('ok');
    await Promise.all([b.result, c.result]);
    expect(connector.closed.map((x) => x.n)).toEqual([1]);
  });

  it('a dead-transport failure from a retired connection never evicts the connection that replaced it', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const onA = hold(pool);
    await flushMicrotasks();
    connector.opened[0]!.watch!.retire('goaway'); // A takes no new requests; onA still rides it
    const onB = hold(pool);
    await flushMicrotasks();
    expect(onB.leases[0]!.id).toBe(2);
    onA.fail(new DeadError('A died while draining')); // reaches the pool: A was retired, not gone
    await expect(onA.result).rejects.toThrow('A died');
    const next = hold(pool);
    await flushMicrotasks();
    expect(next.leases[0]!.id).toBe(2); // still B
    expect(connector.connects).toBe(2);
    onB.finish('ok');
    next.finish('ok');
    await Promise.all([onB.result, next.result]);
  });

  it('every evicted connection is closed exactly once', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    for (let i = 0; i < 5; i++) {
      await expect(pool.use(T, () => Promise.reject(new DeadError('dead')))).rejects.toThrow('dead');
    }
    await flushMicrotasks();
    expect(connector.opened).toHaveLength(5);
    expect(connector.closed).toHaveLength(5);
    expect(pool.stats()).toMatchObject({ opened: 5, closed: 5, gone: 5, connections: 0 });
  });
});

describe('ConnectionPool: retired vs gone', () => {
  it('a dead connection releases every request riding it at once (seed 003, review P1)', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const riders = Array.from({ length: 10 }, () => hold(pool));
    await flushMicrotasks();
    const cause = new DeadError('transport died');
    riders[0]!.fail(cause);
    const results = await Promise.allSettled(riders.map((r) => r.result));
    expect(results[0]).toEqual({ status: 'rejected', reason: cause });
    for (const r of results.slice(1)) {
      expect(r.status).toBe('rejected');
      const reason = (r as PromiseRejectedResult).reason as ConnectionGoneError;
      expect(reason).toBeInstanceOf(ConnectionGoneError);
      expect(reason).toMatchObject({ code: 'DIALGUARD_CONNECTION_GONE', connectionId: 1, target: T, cause });
    }
    expect(riders[1]!.leases[0]!.signal.aborted).toBe(true);
    expect(pool.stats()).toMatchObject({ gone: 1, leases: 0 });
    expect(connector.closed).toHaveLength(1);
  });

  it('a stream-level error, a timeout or an application status retires nothing', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const sibling = hold(pool);
    for (const err of [new Error('RST_STREAM ENHANCE_YOUR_CALM'), new Error('request timeout'), new Error('500')]) {
      await expect(pool.use(T, () => Promise.reject(err))).rejects.toBe(err);
    }
    await expect(pool.use(T, async (l) => l.id)).resolves.toBe(1);
    sibling.finish('fine');
    await expect(sibling.result).resolves.toBe('fine');
    expect(connector.connects).toBe(1);
    expect(connector.closed).toHaveLength(0);
  });

  it('a transport that dies by itself (watch.gone) releases its riders; the next caller reconnects', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const riders = Array.from({ length: 3 }, () => hold(pool));
    await flushMicrotasks();
    connector.opened[0]!.watch!.gone(new Error('socket closed'));
    for (const r of riders) await expect(r.result).rejects.toBeInstanceOf(ConnectionGoneError);
    await expect(pool.use(T, async (l) => l.id)).resolves.toBe(2);
  });

  it('a death heard twice (the socket and the session both report it) is one death: counted and told once', async () => {
    const { pool, gone, riders, watch } = await twoRiders();
    watch.gone(new Error('socket closed'));
    watch.gone(new Error('session closed'));
    for (const r of riders) await expect(r.result).rejects.toBeInstanceOf(ConnectionGoneError);
    expect(gone).toEqual([{ id: 1, leases: 2 }]);
    expect(pool.stats().gone).toBe(1);
  });

  it('a retired connection whose transport dies, its rides failing on their own in the same turn: one death, told once', async () => {
    const { pool, gone, riders, watch } = await twoRiders();
    watch.retire('goaway');
    watch.gone(new Error('socket closed'));
    // Each ride's own failure, a dead transport, lands before the deferred release.
    for (const r of riders) r.fail(new DeadError('reset'));
    for (const r of riders) await expect(r.result).rejects.toBeInstanceOf(Error);
    await flushMicrotasks();
    expect(gone).toHaveLength(1);
    expect(pool.stats().gone).toBe(1);
  });

  it('a retired connection whose transport closes as its rides are refused in the same turn (never sent: the GOAWAY excluded them) cut nothing: no death told', async () => {
    const { pool, gone, riders, watch } = await twoRiders({ idempotent: false });
    watch.retire('goaway');
    watch.gone(new Error('socket closed'));
    for (const r of riders) r.fail(new NotSentError('excluded by the GOAWAY'));
    await Promise.all(riders.map((r) => r.result.catch(() => undefined)));
    await flushMicrotasks();
    expect(gone).toEqual([]);
    expect(pool.stats().gone).toBe(0);
  });

  it('a retired connection (GOAWAY) lets its requests finish, takes no new ones, closes when drained', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const inFlight = hold(pool);
    await flushMicrotasks();
    connector.opened[0]!.watch!.retire('goaway');
    const fresh = hold(pool);
    await flushMicrotasks();
    expect(fresh.leases[0]!.id).toBe(2);
    expect(connector.closed).toHaveLength(0);
    inFlight.finish('finished on the old one');
    await expect(inFlight.result).resolves.toBe('finished on the old one');
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.n)).toEqual([1]);
    fresh.finish('ok');
    await fresh.result;
  });
});

describe('ConnectionPool: going back for a fresh connection', () => {
  it('an idempotent request released by a sibling goes back and succeeds on the replacement', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    await pool.use(T, async () => 'the connection works'); // proven: see below for one that is not
    const sibling = hold(pool);
    let turns = 0;
    const goesBack = pool.use(
      T,
      async (lease) => {
        turns = lease.turn;
        if (lease.turn === 1) {
          await new Promise((_, reject) => lease.signal.addEventListener('abort', () => reject(lease.signal.reason)));
        }
        return `served by #${lease.id}`;
      },
      { idempotent: true },
    );
    await flushMicrotasks();
    sibling.fail(new DeadError('dead'));
    await expect(goesBack).resolves.toBe('served by #2');
    expect(turns).toBe(2);
    expect(pool.stats().turns).toBe(1);
  });

  it("a non-idempotent request gets the sibling's failure; one refused by a retiring connection goes back", async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const sibling = hold(pool);
    const maybeSent = hold(pool);
    await flushMicrotasks();
    sibling.fail(new DeadError('dead'));
    await expect(maybeSent.result).rejects.toBeInstanceOf(ConnectionGoneError);

    // GOAWAY retires #2 while a request holds it but has not opened its stream yet: the stream is
    // refused (certainly not sent), so even a non-idempotent request goes back.
    const ready = deferred();
    const notSent = pool.use(T, async (lease) => {
      if (lease.turn === 1) {
        await ready.promise;
        throw new NotSentError('new streams cannot be created after GOAWAY');
      }
      return `sent on #${lease.id}`;
    });
    await flushMicrotasks();
    connector.opened[1]!.watch!.retire('goaway');
    ready.resolve();
    await expect(notSent).resolves.toBe('sent on #3');
  });

  it('goes back at most retiredRetries times, then passes the failure on', async () => {
    const { connector, pool } = setup({ retiredRetries: 3 });
    connector.auto = 'resolve';
    let calls = 0;
    const notSent = new NotSentError('new streams cannot be created after GOAWAY');
    const err = pool.use(T, async () => {
      calls++;
      // every connection it rides is retired under it, and the request refused (never sent)
      connector.opened[connector.opened.length - 1]!.watch!.retire('goaway');
      throw notSent;
    });
    await expect(err).rejects.toBe(notSent);
    expect(calls).toBe(4); // the first turn plus three going back
    expect(pool.stats().turns).toBe(3);
  });

  it('a connection that dies under its first requests never sends them again: they may have killed it, and a retry layer with a backoff and a budget decides', async () => {
    const { connector, pool } = setup({ retiredRetries: 3 });
    connector.auto = 'resolve';
    let calls = 0;
    const killedUnder = (): Promise<unknown> =>
      pool.use(
        T,
        async (lease) => {
          calls++;
          // A server that drops every connection a request reaches: the transport dies under it.
          connector.opened[connector.opened.length - 1]!.watch!.gone(new Error('killed'));
          await new Promise((_, reject) => lease.signal.addEventListener('abort', () => reject(lease.signal.reason)));
        },
        { idempotent: true },
      );
    // Was: 4 sends of one GET in a row, no wait between them and no budget asked (12 runs under a retry() of 3).
    await expect(killedUnder()).rejects.toBeInstanceOf(ConnectionGoneError);
    expect(calls).toBe(1);
    expect(pool.stats().turns).toBe(0);

    // A connection that served a request and then died: the request cut by it goes back, once;
    // the fresh connection that dies under it in turn has served nothing, so it stops there.
    calls = 0;
    await pool.use(T, async () => 'served');
    await expect(killedUnder()).rejects.toBeInstanceOf(ConnectionGoneError);
    expect(calls).toBe(2);
    expect(pool.stats().turns).toBe(1);
  });

  it('its own failure on a healthy connection is passed on, never retried by the pool', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    let calls = 0;
    await expect(
      pool.use(
        T,
        async () => {
          calls++;
          throw new DeadError('first to see it');
        },
        { idempotent: true },
      ),
    ).rejects.toThrow('first to see it');
    expect(calls).toBe(1);
  });
});

describe('ConnectionPool: idle sweep', () => {
  it('closes a connection idle past idleTimeout at the next sweep, on any call', async () => {
    const { clock, connector, pool } = setup({ idleTimeout: 600_000, sweepInterval: 60_000 });
    connector.auto = 'resolve';
    await pool.use(T, async () => 1);
    clock.advance(300_000);
    await pool.use('other:1', async () => 1);
    clock.advance(300_000);
    await pool.use('other:1', async () => 1); // a hit on another target still sweeps
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.target)).toEqual([T]);
    await pool.use(T, async () => 1);
    expect(connector.connects).toBe(3);
  });

  it('never sweeps a connection a request is riding, however long ago it was handed out', async () => {
    const { clock, connector, pool } = setup({ idleTimeout: 1_000, sweepInterval: 0 });
    connector.auto = 'resolve';
    const longPoll = hold(pool);
    await flushMicrotasks();
    clock.advance(3_600_000);
    await pool.use('other:1', async () => 1);
    await flushMicrotasks();
    expect(connector.closed).toHaveLength(0);
    longPoll.finish('done');
    await longPoll.result;
  });

  it('counts idleness from the end of the last ride, not of the first to end', async () => {
    const { clock, connector, pool } = setup({ idleTimeout: 1_000, sweepInterval: 0 });
    connector.auto = 'resolve';
    const first = hold(pool);
    const last = hold(pool);
    await flushMicrotasks();
    first.finish('a');
    await first.result;
    clock.advance(5_000); // `last` still rides: not idle, however long
    last.finish('b');
    await last.result;
    clock.advance(999);
    await pool.use('other:1', async () => 1); // sweeps: idle 999 ms, kept
    await flushMicrotasks();
    expect(connector.closed).toHaveLength(0);
    clock.advance(1);
    await pool.use('other:1', async () => 1); // idle 1 000 ms: closed
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.target)).toEqual([T]);
  });
});

describe('ConnectionPool: close', () => {
  it('rejects new requests, lets in-flight ones finish, closes everything, then resolves', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const inFlight = hold(pool);
    await pool.use('b:1', async () => 1);
    await flushMicrotasks();
    const closing = pool.close();
    await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(PoolClosedError);
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.target)).toEqual(['b:1']);
    inFlight.finish('finished');
    await expect(inFlight.result).resolves.toBe('finished');
    await closing;
    expect(connector.closed).toHaveLength(2);
    expect(pool.stats()).toMatchObject({ connections: 0, leases: 0, attempts: 0 });
    expect(pool.close()).toBe(closing);
  });

  it('releases requests still in flight after closeTimeout, with PoolClosedError (a shutdown, not a dead connection)', async () => {
    const { clock, connector, pool } = setup({ closeTimeout: 5_000 });
    connector.auto = 'resolve';
    const stuck = hold(pool);
    await flushMicrotasks();
    const closing = pool.close();
    await clock.tick(5_000);
    const err = await stuck.result.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoolClosedError);
    await closing;
    expect(connector.closed).toHaveLength(1);
  });

  it('abandons connect attempts in flight (not a failure) and closes a connection that arrives late', async () => {
    const { connector, breaker, pool } = setup();
    const waiting = pool.use(T, async () => 1);
    await flushMicrotasks();
    await pool.close();
    await expect(waiting).rejects.toBeInstanceOf(PoolClosedError);
    expect(breaker.stats()).toMatchObject({ abandoned: 1, failed: 0 });
    expect(connector.pending[0]!.ctx.signal.aborted).toBe(true);
  });
});

describe('ConnectionPool: stats, events, options', () => {
  it('emits opened, retired, gone and closed', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const seen: string[] = [];
    for (const e of ['opened', 'retired', 'gone', 'closed'] as const) pool.on(e, (p) => seen.push(`${e}#${p.id}`));
    await expect(pool.use(T, () => Promise.reject(new DeadError('x')))).rejects.toThrow();
    await flushMicrotasks();
    expect(seen).toEqual(['opened#1', 'gone#1', 'closed#1']);
  });

  it.each([
    [{ connectTimeout: 0 }, /connectTimeout/],
    [{ idleTimeout: -1 }, /idleTimeout/],
    [{ sweepInterval: Number.NaN }, /sweepInterval/],
    [{ retiredRetries: 1.5 }, /retiredRetries/],
    [{ closeTimeout: -1 }, /closeTimeout/],
    [{ classify: 'x' as unknown as () => never }, /classify must be a function/],
    [{ connector: {} as FakeConnector }, /connector.connect must be a function/],
    [{ connector: undefined as unknown as FakeConnector }, /connector must be an object/],
  ])('rejects %o', (options, message) => {
    expect(() => new ConnectionPool<FakeConnection>({ connector: new FakeConnector(), ...options })).toThrow(message);
  });
});
