/**
 * ConnectionPool safety (issue 12): a server's answer is final, a request never rides a retired
 * connection, user code never throws its way out, close() leaves nothing open, a rejected target
 * leaves nothing allocated, and a shutdown stops a call at once.
 */
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { ConnectionGoneError, PoolClosedError, RequestTimeoutError } from '../../src/core/errors.js';
import type { DialContext } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool, type ConnectionPoolOptions, type ConnectionWatch, type Connector } from '../../src/pool/connection-pool.js';
import { retry } from '../../src/retry/retry.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { FakeConnector, type FakeConnection, deferred, testClassify } from './fake-connector.js';

const T = 'svc-c:8443';

function setup(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new ManualClock();
  const connector = new FakeConnector();
  const breaker = new HostBreaker({ clock });
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker, classify: testClassify, connectTimeout: 1_000, ...options });
  return { clock, connector, breaker, pool };
}

/** Records unhandled rejections and uncaught exceptions while `body` runs, and a turn after. */
async function escapes(body: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const onError = (err: unknown): void => {
    seen.push(err);
  };
  process.on('unhandledRejection', onError);
  process.on('uncaughtException', onError);
  try {
    await body();
    await flushMicrotasks();
    await flushMicrotasks();
  } finally {
    process.off('unhandledRejection', onError);
    process.off('uncaughtException', onError);
  }
  return seen;
}

describe('ConnectionPool: a server answer on a retired connection is final (defect 1)', () => {
  const grpcNotFound = Object.assign(new Error('5 NOT_FOUND: no such item'), { code: 5, details: 'no such item' });
  const http503 = Object.assign(new Error('HTTP 503'), { status: 503 });
  const rstInternal = Object.assign(new Error('Stream closed with error code NGHTTP2_INTERNAL_ERROR'), { code: 'ERR_HTTP2_STREAM_ERROR' });
  it.each([
    ['a grpc NOT_FOUND the server sent', grpcNotFound],
    ['an HTTP 503 the server sent', http503],
    ['an RST_STREAM INTERNAL_ERROR the server sent', rstInternal],
    ['a request timeout', new RequestTimeoutError(300)],
    ['an unrecognised error', new Error('something else')],
  ])('%s after GOAWAY reaches an idempotent caller, not a reconnect (on a fresh connection, and on one that had served requests)', async (_name, answer) => {
    for (const served of [false, true]) {
      const clock = new ManualClock();
      const connector = new FakeConnector();
      connector.auto = 'resolve';
      // The library's own classify, as every adapter uses it.
      const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: null, connectTimeout: 1_000 });
      // A connection that worked is where a request its dead transport cut goes back: an answer never does.
      if (served) expect(await pool.use(T, async () => 'served')).toBe('served');
      let rides = 0;
      const call = pool.use(
        T,
        async (lease) => {
          rides++;
          if (lease.turn > 1) return 'sent again';
          lease.connection.watch!.retire('goaway'); // the server sends GOAWAY, then its answer
          throw answer;
        },
        { idempotent: true },
      );
      await expect(call).rejects.toBe(answer);
      expect(rides).toBe(1);
      expect(connector.connects).toBe(1);
      expect(pool.stats().turns).toBe(0);
      await pool.close();
    }
  });

  it('a transport death after GOAWAY still sends an idempotent request back, and a refused one of any method', async () => {
    const clock = new ManualClock();
    const connector = new FakeConnector();
    connector.auto = 'resolve';
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: null, connectTimeout: 1_000 });
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' });
    const refused = Object.assign(new Error('Stream closed with error code NGHTTP2_REFUSED_STREAM'), { code: 'ERR_HTTP2_STREAM_ERROR' });
    const run = (failure: Error, idempotent: boolean) =>
      pool.use(
        T,
        async (lease) => {
          if (lease.turn > 1) return `#${lease.id}`;
          lease.connection.watch!.retire('goaway');
          throw failure;
        },
        { idempotent },
      );
    await expect(run(reset, true)).rejects.toBe(reset); // #1 had served nothing: it may have died of this request
    await expect(run(refused, false)).resolves.toBe('#3'); // never sent: back to a fresh one, whatever #2 served
    await expect(run(reset, true)).resolves.toBe('#4'); // #3 served the request above: the death was the connection's
    await expect(run(reset, false)).rejects.toBe(reset);
    expect(pool.stats().turns).toBe(2);
    await pool.close();
  });
});

describe('ConnectionPool: the gap between the usable check and the ride', () => {
  it('a caller whose shared connection was retired by a sibling before it rode never rides it', async () => {
    const { connector, pool } = setup();
    const rodeOn: number[] = [];
    const first = deferred<string>();
    // Both wait on the same attempt; the first to ride sees a GOAWAY at once and keeps riding.
    const a = pool.use(T, (lease) => {
      rodeOn.push(lease.id);
      lease.connection.watch!.retire('goaway');
      return first.promise;
    });
    const b = pool.use(T, async (lease) => {
      rodeOn.push(lease.id);
      return `b, turn ${lease.turn}`;
    });
    await flushMicrotasks();
    connector.auto = 'resolve';
    connector.resolveLast();
    await expect(b).resolves.toBe('b, turn 1'); // a look again is not a turn: nothing was sent
    first.resolve('a');
    await expect(a).resolves.toBe('a');
    expect(rodeOn).toEqual([1, 2]);
    expect(connector.connects).toBe(2);
    await pool.close();
  });

  it('a connection retired a few microtasks after it lands, every time: never ridden, and at most 4 looks', async () => {
    // However the microtasks fall (retired before the usable check, in the gap, or after the ride
    // began), a request never starts on a retired connection, and the looks are bounded.
    for (let delay = 0; delay < 8; delay++) {
      const connector = new FakeConnector();
      connector.auto = 'resolve';
      const retired = new Set<number>();
      connector.watch = (c, w) => {
        let n = delay;
        const step = (): void => {
          if (n-- > 0) queueMicrotask(step);
          else {
            retired.add(c.n);
            w.retire('goaway');
          }
        };
        step();
        return () => {};
      };
      const pool = new ConnectionPool<FakeConnection>({ connector, clock: new ManualClock(), breaker: null, classify: testClassify });
      let rodeRetired = 0;
      const result = await pool
        .use(T, async (lease) => {
          if (retired.has(lease.connection.n)) rodeRetired++;
          return 'served';
        })
        .catch((e: unknown) => e);
      expect(rodeRetired, `retired after ${delay} microtasks`).toBe(0);
      if (result === 'served') expect(connector.connects).toBe(1);
      else {
        expect(result).toBeInstanceOf(ConnectionGoneError);
        expect(connector.connects, `retired after ${delay} microtasks`).toBe(4);
      }
      await pool.close();
    }
  });
});

describe('ConnectionPool: a shutdown stops the call at once', () => {
  it('a request released by close() is PoolClosedError, and retry() makes no second attempt', async () => {
    const { clock, connector, pool } = setup({ closeTimeout: 100 });
    connector.auto = 'resolve';
    let attempts = 0;
    const call = retry(
      () => {
        attempts++;
        return pool.use(T, () => new Promise<never>(() => {}), { idempotent: true });
      },
      { maxAttempts: 5, idempotent: true, budget: null, clock },
    ).catch((e: unknown) => e);
    await flushMicrotasks();
    const closing = pool.close();
    await clock.tick(100);
    const err = await call;
    expect(err).toBeInstanceOf(PoolClosedError);
    expect(classify(err)).toMatchObject({ kind: 'cancelled', transient: false });
    expect(attempts).toBe(1);
    await closing;
  }, 2_000); // before the fix, retry() backed off on the manual clock and never came back
});

describe('ConnectionPool: user code never throws its way out (defect 7)', () => {
  it('a connector whose close() throws on the late-connection path raises no unhandled rejection', async () => {
    const clock = new ManualClock();
    const landed = deferred<FakeConnection>();
    let closeCalls = 0;
    const connector: Connector<FakeConnection> = {
      connect: () => landed.promise, // ignores its signal: lands after the connect timeout
      close: () => {
        closeCalls++;
        throw new Error('close blew up');
      },
    };
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: null, connectTimeout: 1_000 });
    const seen = await escapes(async () => {
      const call = pool.use(T, async () => 1).catch((e: unknown) => e);
      await flushMicrotasks();
      await clock.tick(1_000);
      expect(await call).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT' });
      landed.resolve({ n: 1, target: T, closed: false });
    });
    expect(seen).toEqual([]);
    expect(closeCalls).toBe(1);
    await pool.close();
  });

  it('a connector close(), classify option or unwatch that throws is contained, and not hidden: one process warning each, however often it throws', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      const { connector, pool } = setup({
        classify: () => {
          throw new Error('classify blew up');
        },
      });
      connector.auto = 'resolve';
      connector.close = () => {
        throw new Error('close blew up');
      };
      connector.watch = () => () => {
        throw new Error('unwatch blew up');
      };
      for (let i = 0; i < 3; i++) {
        await expect(pool.use(`t${i}:1`, async () => Promise.reject(new Error('ride failed')))).rejects.toThrow('ride failed');
      }
      await pool.close();
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      expect(warnings.filter((m) => m.includes('close blew up'))).toHaveLength(1);
      expect(warnings.filter((m) => m.includes('classify blew up'))).toHaveLength(1);
      expect(warnings.filter((m) => m.includes('unwatch blew up'))).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a watch() that throws: the caller gets its error, the connection is closed, nothing escapes', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    connector.watch = () => {
      throw new Error('watch blew up');
    };
    const seen = await escapes(async () => {
      await expect(pool.use(T, async () => 1)).rejects.toThrow('watch blew up');
    });
    expect(seen).toEqual([]);
    expect(connector.opened.map((c) => c.closed)).toEqual([true]);
    expect(pool.stats()).toMatchObject({ targets: 0, connections: 0, attempts: 0 });
    await pool.close();
  });

  it('an unwatch that throws never escapes into the connector that reported GOAWAY', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const watches: ConnectionWatch[] = [];
    connector.watch = (_c, w) => {
      watches.push(w);
      return () => {
        throw new Error('unwatch blew up');
      };
    };
    await pool.use(T, async () => 1);
    expect(() => watches[0]!.retire('goaway')).not.toThrow();
    expect(() => watches[0]!.gone(new Error('late'))).not.toThrow();
    expect(connector.opened.map((c) => c.closed)).toEqual([true]);
    await pool.close();
  });

  it("a classify option that throws leaves the request's own error to its caller", async () => {
    const { connector, pool } = setup({
      classify: () => {
        throw new Error('classify blew up');
      },
    });
    connector.auto = 'resolve';
    await expect(pool.use(T, () => Promise.reject(new Error('its own failure')))).rejects.toThrow('its own failure');
    expect(pool.stats()).toMatchObject({ connections: 1, gone: 0 });
    await pool.close();
  });
});

describe('ConnectionPool: close() leaves nothing open (defect 8)', () => {
  it('a connector that settles after the abort is closed before close() resolves', async () => {
    const clock = new ManualClock();
    const landed = deferred<FakeConnection>();
    const conn: FakeConnection = { n: 1, target: T, closed: false };
    const closes: string[] = [];
    const connector: Connector<FakeConnection> = {
      // Ignores ctx.signal, as the gRPC connector does during its last-error probe.
      connect: (_t: string, _ctx: DialContext) => landed.promise,
      close: async (c) => {
        await flushMicrotasks(); // closing takes a turn
        c.closed = true;
        closes.push(`#${c.n}`);
      },
    };
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker: null, connectTimeout: 1_000 });
    const call = pool.use(T, async () => 1).catch((e: unknown) => e);
    await flushMicrotasks();
    let resolved = false;
    const closing = pool.close().then(() => {
      resolved = true;
      return conn.closed; // what was still open when close() resolved
    });
    expect(await call).toBeInstanceOf(PoolClosedError);
    await flushMicrotasks();
    expect(resolved).toBe(false); // still waiting for the connector
    landed.resolve(conn);
    expect(await closing).toBe(true);
    expect(closes).toEqual(['#1']);
  });
});

describe('ConnectionPool: validate before allocating (defect 9)', () => {
  it('a target hostOf rejects leaves no slot and no attempt, however often it is tried', async () => {
    const { connector, pool } = setup({
      hostOf: (t) => {
        if (t.startsWith('bad')) throw new TypeError(`not a target: ${t}`);
        return t;
      },
    });
    for (let i = 0; i < 3; i++) await expect(pool.use('bad target', async () => 1)).rejects.toThrow(TypeError);
    expect(pool.stats()).toMatchObject({ targets: 0, attempts: 0, connections: 0 });
    expect(connector.connects).toBe(0);
    connector.auto = 'resolve';
    await expect(pool.use(T, async () => 'ok')).resolves.toBe('ok'); // the pool is still usable
    await pool.close();
  });

  it('a call with no function to run opens nothing', async () => {
    const { connector, pool } = setup();
    connector.auto = 'resolve';
    const err = await pool.use(T, 'not a function' as unknown as () => Promise<void>).catch((e: unknown) => e);
    expect(connector.connects).toBe(0);
    expect(pool.stats()).toMatchObject({ targets: 0, attempts: 0, connections: 0 });
    expect(err).toBeInstanceOf(TypeError);
    await pool.close();
  });
});

describe('ConnectionPool: connectors and classifiers as users write them', () => {
  it("a connector whose close reports the connection gone (its 'close' event reaching watch.gone, no unwatch): closed once, never counted as dead, close() resolves", async () => {
    const closes: number[] = [];
    let n = 0;
    const connector = {
      connect: async () => ({ n: ++n, watch: undefined as ConnectionWatch | undefined }),
      watch: (conn: { n: number; watch: ConnectionWatch | undefined }, watch: ConnectionWatch) => {
        conn.watch = watch; // the README's pattern: conn.on('close', () => watch.gone(...)); nothing returned
      },
      close: (conn: { n: number; watch: ConnectionWatch | undefined }) => {
        closes.push(conn.n);
        conn.watch?.gone(new Error('closed')); // its 'close' event, at once
      },
    };
    const clock = new ManualClock(0);
    const pool = new ConnectionPool({ connector, clock, breaker: null, idleTimeout: 1_000, sweepInterval: 100 });
    const gone: number[] = [];
    pool.on('gone', (e) => void gone.push(e.id));
    await pool.use('t:1', async () => undefined);
    clock.advance(2_000);
    await pool.use('t:1', async () => undefined); // the sweep closes #1 (idle), #2 is dialled
    const t0 = performance.now();
    await pool.close(); // was: never (a spinning loop on the closes' promises)
    expect(performance.now() - t0).toBeLessThan(500);
    expect(closes).toEqual([1, 2]); // was [1, 1, ...]: closed again from inside its own close
    expect(gone).toEqual([]);
    expect(pool.stats()).toMatchObject({ gone: 0, closed: 2, connections: 0 });
  });

  it('a classify that answers undefined for errors it does not know proves nothing: the call rejects with its error, nothing unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown): void => void unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const connector = { connect: async () => ({}), close: () => {} };
      const pool = new ConnectionPool({ connector, breaker: null, classify: (() => undefined) as never });
      const appError = new Error('app error');
      await expect(pool.use('t:1', async () => Promise.reject(appError))).rejects.toBe(appError); // was: pending for good
      expect(pool.stats().leases).toBe(0);
      await pool.close();
      await new Promise<void>((resolve) => setImmediate(resolve));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });
});
