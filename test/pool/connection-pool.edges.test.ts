/**
 * ConnectionPool edges that mutation testing showed untested: option checks, aborts at every
 * stage, listeners left behind, what close() waits for, the bound on going back, what the
 * connector is told on close, and the sweep's clock arithmetic.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { getEventListeners, setMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, ConnectionGoneError, PoolClosedError } from '../../src/core/errors.js';
import { HostBreaker, type Transport } from '../../src/guard/host-breaker.js';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { DeadError, FakeConnector, type FakeConnection, NotSentError, deferred, testClassify } from './fake-connector.js';

const T = 'svc-b:7000';

function setup(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}, start = 0) {
  const clock = new ManualClock(start);
  const connector = new FakeConnector();
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: new HostBreaker({ clock }), classify: testClassify, connectTimeout: 1_000, ...options });
  return { clock, connector, pool };
}

describe('ConnectionPool: options', () => {
  it.each([
    [{ connector: null as unknown as FakeConnector }, /connector must be an object/],
    [{ connector: 'x' as unknown as FakeConnector }, /connector must be an object/],
    [{ connector: { connect: async () => ({}), close: 1 } as unknown as FakeConnector }, /connector.close must be a function/],
    [{ connector: { connect: async () => ({}), close: () => {}, watch: 'x' } as unknown as FakeConnector }, /connector.watch must be a function/],
  ])('rejects %o', (options, message) => {
    expect(() => new ConnectionPool<FakeConnection>(options as ConnectionPoolOptions<FakeConnection>)).toThrow(message);
  });

  it('accepts an infinite idleTimeout (never sweep) and a connector without watch', async () => {
    const { connect, close } = new FakeConnector();
    const connector = { connect: (t: string, ctx: Parameters<FakeConnector['connect']>[1]) => connect.call(fake, t, ctx), close: (c: FakeConnection) => close.call(fake, c) };
    const fake = new FakeConnector();
    fake.auto = 'resolve';
    const pool = new ConnectionPool<FakeConnection>({ connector, breaker: null, classify: testClassify, idleTimeout: Number.POSITIVE_INFINITY });
    await expect(pool.use(T, () => Promise.reject(new DeadError('dead')))).rejects.toThrow('dead');
    await flushMicrotasks();
    expect(fake.closed).toHaveLength(1); // closed, with no watcher to stop
    await pool.close();
  });
});

describe('ConnectionPool: aborts', () => {
  it('an already-aborted caller never rides, even when a connection is ready', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    await pool.use(T, async () => 1);
    const controller = new AbortController();
    controller.abort(new Error('gone already'));
    let ran = false;
    await expect(
      pool.use(
        T,
        async () => {
          ran = true;
        },
        { signal: controller.signal },
      ),
    ).rejects.toThrow('gone already');
    expect(ran).toBe(false);
  });

  it('a caller abort mid-ride releases it at once, and never condemns the connection', async () => {
    const { connector, pool } = setup({ classify: () => ({ connectionDead: true, notSent: false }) }); // thinks everything is dead
    connector.auto = 'resolve';
    const controller = new AbortController();
    const ride = pool.use(T, () => new Promise(() => {}), { signal: controller.signal }); // ignores its signal
    await flushMicrotasks();
    controller.abort(new Error('user left'));
    await expect(ride).rejects.toThrow('user left');
    expect(connector.closed).toHaveLength(0);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    await expect(pool.use(T, async (l) => l.id)).resolves.toBe(1);
  });

  it('leaves no listener on the caller signal, after waiting for an attempt or riding', async () => {
    const { connector, pool } = setup();
    const signal = new AbortController().signal;
    setMaxListeners(0, signal); // 20 waiters at once, by design
    const calls = Array.from({ length: 20 }, () => pool.use(T, async () => 1, { signal }));
    await flushMicrotasks();
    connector.resolveLast();
    await Promise.all(calls);
    for (let i = 0; i < 20; i++) await pool.use(T, async () => 1, { signal });
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('ConnectionPool: whose failure', () => {
  it("a ConnectionGoneError about another connection is this request's own failure, classified as such", async () => {
    const { connector, pool } = setup({ classify: (e) => ({ connectionDead: e instanceof ConnectionGoneError, notSent: false }) });
    connector.auto = 'resolve';
    await expect(pool.use(T, () => Promise.reject(new ConnectionGoneError(T, 999)))).rejects.toBeInstanceOf(ConnectionGoneError);
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.n)).toEqual([1]);
  });

  it('going back stops when every fresh connection is retired before it can be used', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const watch = connector.watch.bind(connector);
    connector.watch = (c, w) => {
      const stop = watch(c, w);
      w.retire('goaway'); // retired the moment it is handed over
      return stop;
    };
    await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(ConnectionGoneError);
    expect(connector.connects).toBe(4);
  });

  it('a connection that lands after the connect timeout is closed, not kept', async () => {
    const clock = new ManualClock();
    const landing = deferred<FakeConnection>();
    const closed: FakeConnection[] = [];
    const pool = new ConnectionPool<FakeConnection>({
      connector: { connect: () => landing.promise, close: (c) => void closed.push(c) }, // ignores its signal
      clock,
      breaker: null,
      classify: testClassify,
      connectTimeout: 500,
    });
    const call = pool.use(T, async () => 1);
    await flushMicrotasks();
    clock.advance(500);
    await expect(call).rejects.toBeInstanceOf(ConnectTimeoutError);
    const late: FakeConnection = { n: 1, target: T, closed: false };
    landing.resolve(late);
    await flushMicrotasks();
    expect(closed).toEqual([late]);
    expect(pool.stats().connections).toBe(0);
  });
});

describe('ConnectionPool: close', () => {
  it('tells the connector why: the dead error for a gone connection, the reason for a retired one', async () => {
    const reasons: unknown[] = [];
    const { clock, connector, pool } = setup({ idleTimeout: 1_000, sweepInterval: 0 });
    const close = connector.close.bind(connector);
    connector.close = (c, reason?: unknown) => {
      reasons.push(reason);
      close(c);
    };
    connector.auto = 'resolve';
    await pool.use(T, () => Promise.reject(new DeadError('dead'))).catch(() => {});
    await pool.use(T, async () => 1);
    clock.advance(1_000);
    await pool.use('other:1', async () => 1);
    await flushMicrotasks();
    expect(reasons[0]).toBeInstanceOf(ConnectionGoneError);
    expect((reasons[0] as Error).cause).toBeInstanceOf(DeadError);
    expect(reasons[1]).toBe('idle');
  });

  it('emits retired once per connection, with its reason', async () => {
    const { clock, connector, pool } = setup({ idleTimeout: 1_000, sweepInterval: 0 });
    connector.auto = 'resolve';
    const seen: string[] = [];
    pool.on('retired', (e) => seen.push(`${e.id}:${e.reason}`));
    await pool.use(T, async () => 1);
    const watch = connector.opened[0]!.watch!;
    watch.retire('goaway');
    watch.retire('goaway');
    await pool.use(T, async () => 1);
    clock.advance(1_000);
    await pool.use('c:3', async () => 1);
    await pool.close();
    expect(seen).toEqual(['1:goaway', '2:idle', '3:closing']);
  });

  it('resolves only once the connector has finished closing every connection', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const slow = deferred();
    const close = connector.close.bind(connector);
    connector.close = (c) => {
      close(c);
      return slow.promise;
    };
    await pool.use(T, async () => 1);
    let closed = false;
    const closing = pool.close().then(() => {
      closed = true;
    });
    await flushMicrotasks();
    expect(closed).toBe(false);
    slow.resolve();
    await closing;
    expect(closed).toBe(true);
  });

  it('lets every request in flight finish, not just the first to end', async () => {
    const { connector, pool } = setup({ closeTimeout: 60_000 });
    connector.auto = 'resolve';
    const a = deferred<string>();
    const b = deferred<string>();
    const ra = pool.use(T, () => a.promise);
    const rb = pool.use(T, () => b.promise);
    await flushMicrotasks();
    const closing = pool.close();
    a.resolve('a');
    await expect(ra).resolves.toBe('a');
    await flushMicrotasks();
    b.resolve('b');
    await expect(rb).resolves.toBe('b');
    await closing;
  });

  it('an idempotent request released by close() rejects with PoolClosedError, it does not go back', async () => {
    const { clock, connector, pool } = setup({ closeTimeout: 100 });
    connector.auto = 'resolve';
    // Handled from the start: an unhandled rejection would be rewritten by the runner's reporter.
    const stuck = pool.use(T, () => new Promise(() => {}), { idempotent: true }).catch((e: unknown) => e);
    await flushMicrotasks();
    const closing = pool.close();
    await clock.tick(100);
    const err = await stuck;
    expect(err).toBeInstanceOf(PoolClosedError);
    expect(connector.connects).toBe(1);
    await closing;
  });

  it('a connection that lands while close() begins is closed too, however the microtasks fall', async () => {
    for (let ticks = 0; ticks < 6; ticks++) {
      const { connector, pool } = setup();
      const call = pool.use(T, async () => 1);
      await flushMicrotasks();
      connector.resolveLast();
      for (let i = 0; i < ticks; i++) await Promise.resolve();
      await pool.close();
      await call.catch(() => {});
      expect(connector.opened.map((c) => c.closed), `after ${ticks} ticks`).toEqual([true]);
    }
  });
});

describe('ConnectionPool: sweep clock', () => {
  it('measures the sweep interval from the last sweep on any clock origin', async () => {
    const { clock, connector, pool } = setup({ idleTimeout: 1_000, sweepInterval: 60_000 }, 5_000_000);
    connector.auto = 'resolve';
    await pool.use(T, async () => 1);
    clock.advance(59_999);
    await pool.use('other:1', async () => 1);
    await flushMicrotasks();
    expect(connector.closed).toHaveLength(0);
    clock.advance(1);
    await pool.use('other:1', async () => 1);
    await flushMicrotasks();
    expect(connector.closed.map((c) => c.target)).toEqual([T]);
  });

  it('a connection ridden through a sweep is still the one served afterwards', async () => {
    const { clock, connector, pool } = setup({ idleTimeout: 1_000, sweepInterval: 0 });
    connector.auto = 'resolve';
    const longPoll = deferred<string>();
    const ride = pool.use(T, () => longPoll.promise);
    await flushMicrotasks();
    clock.advance(3_600_000);
    await pool.use('other:1', async () => 1); // sweeps
    longPoll.resolve('done');
    await ride;
    await expect(pool.use(T, async (l) => l.id)).resolves.toBe(1);
  });

  it("a lease's signal is one object, aborted with the reason it was released for", async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    let first: AbortSignal | undefined;
    let second: AbortSignal | undefined;
    const ride = pool.use(T, (lease) => {
      first = lease.signal;
      second = lease.signal;
      return new Promise(() => {});
    });
    await flushMicrotasks();
    connector.opened[0]!.watch!.gone(new Error('reset'));
    await ride.catch(() => {});
    expect(first).toBe(second);
    expect(first!.aborted).toBe(true);
    expect(first!.reason).toBeInstanceOf(ConnectionGoneError);
  });
});

describe('ConnectionPool: bookkeeping', () => {
  it('forgets a target once nothing is left for it: no connection, no attempt', async () => {
    const { clock, connector, pool } = setup();
    const failing = pool.use(T, async () => 1);
    await flushMicrotasks();
    expect(pool.stats()).toMatchObject({ targets: 1, attempts: 1 });
    connector.pending[0]!.reject(new Error('refused'));
    await failing.catch(() => {});
    expect(pool.stats().targets).toBe(0);
    connector.auto = 'resolve';
    clock.advance(10); // past the failed attempt's redial pace
    await pool.use(T, () => Promise.reject(new DeadError('dead'))).catch(() => {});
    expect(pool.stats().targets).toBe(0);
    await pool.use(T, async () => 1);
    expect(pool.stats().targets).toBe(1);
    await pool.close();
    expect(pool.stats().targets).toBe(0);
  });

  it('stops watching a connection when it is closed, even one retired while its watch was being set up', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    await pool.use(T, () => Promise.reject(new DeadError('dead'))).catch(() => {});
    expect(connector.opened[0]!.watch).toBeUndefined(); // unwatched on close
    const watch = connector.watch.bind(connector);
    connector.watch = (c, w) => {
      const stop = watch(c, w);
      w.retire('goaway');
      return stop;
    };
    await pool.use(T, async () => 1).catch(() => {});
    await flushMicrotasks();
    expect(connector.opened.slice(1).every((c) => c.watch === undefined)).toBe(true);
  });

  it('leaves no listener on the caller signal when the attempt it waited for fails', async () => {
    const { connector, pool } = setup();
    const signal = new AbortController().signal;
    const calls = Array.from({ length: 5 }, () => pool.use(T, async () => 1, { signal }).catch(() => {}));
    await flushMicrotasks();
    connector.pending[0]!.reject(new Error('refused'));
    await Promise.all(calls);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('sweeps past a target whose only state is an attempt in flight', async () => {
    const { clock, connector, pool } = setup({ sweepInterval: 0, idleTimeout: 1 });
    void pool.use('pending:1', async () => 1).catch(() => {});
    await flushMicrotasks();
    connector.auto = 'resolve';
    clock.advance(10);
    await expect(pool.use(T, async () => 'swept fine')).resolves.toBe('swept fine');
  });

  it("a sibling's release is never taken for a failure that was not sent, whatever classify says", async () => {
    const { connector, pool } = setup({ classify: () => ({ connectionDead: false, notSent: true }) });
    connector.auto = 'resolve';
    let turns = 0;
    const rider = pool.use(T, (lease) => {
      turns = lease.turn;
      return new Promise(() => {});
    }); // not idempotent
    await flushMicrotasks();
    connector.opened[0]!.watch!.gone(new Error('reset'));
    await expect(rider).rejects.toBeInstanceOf(ConnectionGoneError);
    expect(turns).toBe(1);
  });
});

describe('ConnectionPool: edges of the options, the closed pool and the watcher', () => {
  it('names the connector when the options themselves are missing', () => {
    expect(() => new ConnectionPool<FakeConnection>(undefined as unknown as ConnectionPoolOptions<FakeConnection>)).toThrow(/connector must be an object/);
    expect(() => new ConnectionPool<FakeConnection>({} as ConnectionPoolOptions<FakeConnection>)).toThrow(/connector must be an object/);
  });

  it('names fn when use() is given something else', async () => {
    const { connector, pool } = setup();
    await expect(pool.use(T, 'x' as unknown as () => Promise<void>)).rejects.toThrow(/^fn must be a function/);
    expect(connector.connects).toBe(0);
  });

  it('names signal when use() is given something else (the controller itself); null is none', async () => {
    const { connector, pool } = setup();
    const controller = new AbortController();
    await expect(pool.use(T, async () => 1, { signal: controller as unknown as AbortSignal })).rejects.toThrow(/^signal must be an AbortSignal/);
    expect(connector.connects).toBe(0);
    connector.auto = 'resolve';
    await expect(pool.use(T, async () => 2, { signal: null as unknown as AbortSignal })).resolves.toBe(2); // "Cannot read properties of null"
    // ride() (the callback form adapters use) names it the same way, through its reject.
    const rode = await new Promise<unknown>((resolve) => pool.ride(T, (trip) => trip.end(true), { signal: controller as unknown as AbortSignal }, () => resolve('rode'), resolve));
    expect(rode).toBeInstanceOf(TypeError);
    expect((rode as Error).message).toMatch(/^signal must be an AbortSignal/);
  });

  it("names idempotent when use() is given something other than a boolean ('yes' would have been read as false)", async () => {
    const { connector, pool } = setup();
    await expect(pool.use(T, async () => 1, { idempotent: 'yes' as unknown as boolean })).rejects.toThrow(/^idempotent must be a boolean, got "yes"/);
    expect(connector.connects).toBe(0);
    connector.auto = 'resolve';
    await expect(pool.use(T, async () => 2, { idempotent: undefined })).resolves.toBe(2); // undefined: the default, false
  });

  it('publishes its events on the dialguard:pool diagnostics channels', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const heard: unknown[] = [];
    const hear = (m: unknown): void => void heard.push(m);
    diagnosticsChannel.subscribe('dialguard:pool:opened', hear);
    try {
      await pool.use(T, async () => 1);
    } finally {
      diagnosticsChannel.unsubscribe('dialguard:pool:opened', hear);
    }
    expect(heard).toEqual([{ target: T, id: 1 }]);
    await pool.close();
  });

  it('a closed pool rejects with PoolClosedError, even a caller whose signal has already aborted', async () => {
    const { pool } = setup();
    await pool.close();
    const controller = new AbortController();
    controller.abort(new Error('left'));
    await expect(pool.use(T, async () => 1, { signal: controller.signal })).rejects.toBeInstanceOf(PoolClosedError);
  });

  it('a watcher retiring a connection without a reason retires it as goaway; with one, keeps it', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const retired: string[] = [];
    pool.on('retired', (e) => void retired.push(e.reason));
    await pool.use(T, async () => 1);
    connector.opened[0]!.watch!.retire();
    await pool.use(T, async () => 1);
    connector.opened[1]!.watch!.retire('idle');
    expect(retired).toEqual(['goaway', 'idle']);
    await pool.close();
  });

  it('a connector close that throws synchronously is contained: the caller gets its own error', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    connector.close = (c: FakeConnection) => {
      c.closed = true;
      throw new Error('close blew up');
    };
    await expect(pool.use(T, () => Promise.reject(new DeadError('dead')))).rejects.toThrow('dead');
    expect(connector.opened[0]!.closed).toBe(true);
    await pool.close();
    expect(pool.stats().connections).toBe(0);
  });
});

describe('ConnectionPool: synchronous throws and errors that look like a release', () => {
  it('a connector whose connect throws synchronously rejects the caller with that error', async () => {
    const { connector, pool } = setup();
    connector.connect = () => {
      throw new Error('connect blew up');
    };
    await expect(pool.use(T, async () => 1)).rejects.toThrow('connect blew up');
    await pool.close();
  });

  it('an fn that throws synchronously rejects the caller with that error, and the lease ends', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    await expect(
      pool.use(T, () => {
        throw new Error('fn blew up');
      }),
    ).rejects.toThrow('fn blew up');
    expect(pool.stats().leases).toBe(0);
    await pool.close();
  });

  it("a ConnectionGoneError of another connection, caused by a close, reaches the caller as is", async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const foreign = new ConnectionGoneError('elsewhere:1', 99, { cause: new PoolClosedError() });
    await expect(pool.use(T, () => Promise.reject(foreign))).rejects.toBe(foreign);
    const lookalike = { connectionId: 1, cause: new PoolClosedError() }; // not a ConnectionGoneError
    await expect(pool.use(T, () => Promise.reject(lookalike))).rejects.toBe(lookalike);
    await pool.close();
  });

  it('a not-sent failure on a connection retired by close() reaches the caller, without going back', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const answer = deferred<number>();
    const ride = pool.use(T, () => answer.promise);
    await flushMicrotasks();
    const closing = pool.close();
    const err = new NotSentError('refused');
    answer.reject(err);
    await expect(ride).rejects.toBe(err);
    await closing;
    expect(connector.connects).toBe(1);
  });
});

describe('ConnectionPool: the connector says how a target is dialled (Connector.transport)', () => {
  /** A breaker for which `T`'s dials over `via` have failed: open for those, a dial of the other transport still let through. */
  function openFor(clock: ManualClock, via: Transport = 'plain'): HostBreaker {
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    breaker.admit(T, undefined, via).failed(new Error('closed during the handshake'));
    return breaker;
  }
  const openForPlain = (clock: ManualClock): HostBreaker => openFor(clock, 'plain');

  it.each([
    ['plain', 'tls', 1],
    ['plain', 'plain', 0],
    ['tls', 'plain', 1],
    ['tls', 'tls', 0],
  ] as const)("on a host only %s dials opened, a target the connector says is %s: %i dial(s)", async (failed, said, dials) => {
    const clock = new ManualClock();
    const connector = Object.assign(new FakeConnector(), { transport: (_target: string) => said });
    connector.auto = 'resolve';
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: openFor(clock, failed), classify: testClassify, connectTimeout: 1_000 });
    await pool.use(T, async () => 1).catch(() => 0);
    expect(connector.connects).toBe(dials);
    await pool.close();
  });

  it('a transport the connector cannot say (it throws, or answers something else) is any: refused', async () => {
    const answers: Array<() => Transport | undefined> = [
      () => 'udp' as Transport, // a connector of plain JavaScript may answer anything
      () => undefined,
      () => {
        throw new Error('cannot say');
      },
    ];
    for (const transport of answers) {
      const clock = new ManualClock();
      const connector = Object.assign(new FakeConnector(), { transport });
      connector.auto = 'resolve';
      const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: openForPlain(clock), classify: testClassify, connectTimeout: 1_000 });
      await expect(pool.use(T, async () => 1)).rejects.toThrow(/unavailable/);
      expect(connector.connects).toBe(0);
      await pool.close();
    }
  });

  it('is not asked for a target the connector guards itself', async () => {
    const clock = new ManualClock();
    let asked = 0;
    const connector = Object.assign(new FakeConnector(), {
      guardsItself: () => true,
      transport: () => {
        asked++;
        return 'tls' as const;
      },
    });
    connector.auto = 'resolve';
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: new HostBreaker({ clock }), classify: testClassify, connectTimeout: 1_000 });
    await pool.use(T, async () => 1);
    expect(asked).toBe(0);
    await pool.close();
  });
});
