/**
 * The pool's redial pace: after a target's connect attempt dialled and failed, the next attempt
 * waits 10 ms, doubling per failure in a row up to `redialPace`, and callers arriving meanwhile
 * join it. Seed 002: before the host opened (minOutage), a steady caller redialled a node that
 * reset every connection back to back. Manual clock here; real sockets at the end.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ConnectionPool, type ConnectionPoolOptions } from '../../src/pool/connection-pool.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { HostUnavailableError, PoolClosedError } from '../../src/core/errors.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { resetOnAccept, type TcpPeer } from '../../src/testing/tcp-peers.js';
import { connect } from '../../src/guard/connect.js';
import { FakeConnector, type FakeConnection, testClassify } from './fake-connector.js';

const T = 'svc:1';
const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

function setup(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const clock = new ManualClock();
  const connector = new FakeConnector();
  // A breaker that never opens on its own: the pace alone is under test.
  const breaker = new HostBreaker({ clock, failureThreshold: 1_000_000 });
  const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker, classify: testClassify, connectTimeout: 1_000, ...options });
  return { clock, connector, breaker, pool };
}

/** {@link setup}, with a caller's first connect to T under way. */
async function dialling(options: Partial<ConnectionPoolOptions<FakeConnection>> = {}) {
  const made = setup(options);
  void made.pool.use(T, async () => 1).catch(() => {});
  await flushMicrotasks();
  return made;
}

/** Fails the newest connect, and lets its callers settle. */
async function failLast(connector: FakeConnector): Promise<void> {
  connector.pending[connector.pending.length - 1]!.reject(refused());
  await flushMicrotasks();
}

/** The ms after the last failure at which the next connect starts, with a caller waiting. */
async function nextWait(clock: ManualClock, connector: FakeConnector, pool: ConnectionPool<FakeConnection>): Promise<number> {
  const before = connector.connects;
  void pool.use(T, async () => 1).catch(() => {});
  await flushMicrotasks();
  for (let waited = 0; waited <= 1_000; waited++) {
    if (connector.connects > before) return waited;
    clock.advance(1);
    await flushMicrotasks();
  }
  throw new Error('no connect within 1 s');
}

describe('ConnectionPool redialPace', () => {
  it('waits 10 ms after a failed attempt, doubling per failure in a row up to redialPace', async () => {
    const { clock, connector, pool } = await dialling({ redialPace: 50 });
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) {
      await failLast(connector);
      waits.push(await nextWait(clock, connector, pool));
    }
    expect(waits).toEqual([10, 20, 40, 50, 50, 50]);
    await failLast(connector);
    await pool.close();
  });

  it('callers arriving during the wait share the one next attempt, and ride its connection', async () => {
    const { clock, connector, pool } = setup();
    const first = pool.use(T, async () => 1);
    const failed = expect(first).rejects.toThrow(/ECONNREFUSED/);
    await flushMicrotasks();
    await failLast(connector);
    await failed;
    const calls = Array.from({ length: 8 }, (_, i) => pool.use(T, async (l) => [i, l.id]));
    await flushMicrotasks();
    expect(connector.connects).toBe(1);
    expect(pool.stats()).toMatchObject({ attempts: 1, targets: 1 });
    clock.advance(10);
    await flushMicrotasks();
    expect(connector.connects).toBe(2);
    connector.resolveLast();
    const results = await Promise.all(calls);
    expect(results.map(([i]) => i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(new Set(results.map(([, id]) => id)).size).toBe(1);
    await pool.close();
  });

  it('a success ends the pacing: the next outage starts again at 10 ms', async () => {
    const { clock, connector, pool } = await dialling();
    await failLast(connector);
    expect(await nextWait(clock, connector, pool)).toBe(10);
    await failLast(connector);
    expect(await nextWait(clock, connector, pool)).toBe(20);
    connector.resolveLast();
    await flushMicrotasks();
    expect(pool.stats().connections).toBe(1);
    // The connection dies: the pool dials again at once, and that attempt's failure waits 10 ms.
    connector.opened[0]!.watch!.gone(new Error('reset'));
    await flushMicrotasks();
    expect(await nextWait(clock, connector, pool)).toBe(0);
    await failLast(connector);
    expect(await nextWait(clock, connector, pool)).toBe(10);
    await failLast(connector);
    await pool.close();
  });

  it('no failure for longer than the pace: a new outage starts at the first wait', async () => {
    const { clock, connector, pool } = await dialling({ redialPace: 100 });
    await failLast(connector);
    expect(await nextWait(clock, connector, pool)).toBe(10);
    await failLast(connector);
    expect(await nextWait(clock, connector, pool)).toBe(20);
    await failLast(connector);
    clock.advance(141); // 40 ms of pace, then 101 ms more than the 100 ms pace: stale
    expect(await nextWait(clock, connector, pool)).toBe(0);
    await failLast(connector);
    expect(await nextWait(clock, connector, pool)).toBe(10);
    await failLast(connector);
    await pool.close();
  });

  it('a failure exactly the pace after the last wait ended still doubles the wait; one later starts afresh', async () => {
    for (const [took, expected] of [
      [100, 20],
      [101, 10],
    ] as const) {
      const { clock, connector, pool } = await dialling({ redialPace: 100 });
      await failLast(connector);
      expect(await nextWait(clock, connector, pool)).toBe(10);
      clock.advance(took); // the paced attempt runs this long, then fails
      await failLast(connector);
      expect(await nextWait(clock, connector, pool)).toBe(expected);
      await failLast(connector);
      await pool.close();
    }
  });

  it('a breaker refusal dials nothing and paces nothing: the next caller asks the breaker at once', async () => {
    const clock = new ManualClock();
    const connector = new FakeConnector();
    const breaker = new HostBreaker({ clock });
    const release = breaker.isolate(T);
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker, classify: testClassify });
    for (let i = 0; i < 3; i++) await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(HostUnavailableError);
    expect(connector.connects).toBe(0);
    expect(clock.pending).toBe(0);
    release();
    connector.auto = 'resolve';
    await expect(pool.use(T, async () => 1)).resolves.toBe(1); // at once: no clock advance needed
    await pool.close();
  });

  it('a failure that leaves the host refused (it opened it, or the probe failed) paces nothing: callers meanwhile are refused at once, not held for the next probe (an outside review: 504 of ~1 300 calls held ~250 ms)', async () => {
    const clock = new ManualClock();
    const connector = new FakeConnector();
    // Opens on its second failed dial; each window 300 ms, longer than any pace.
    const breaker = new HostBreaker({ clock, failureThreshold: 2, minOutage: 0, openDuration: 300 });
    const pool = new ConnectionPool<FakeConnection>({ connector, clock, breaker, classify: testClassify, connectTimeout: 1_000 });
    void pool.use(T, async () => 1).catch(() => {});
    await flushMicrotasks();
    await failLast(connector); // closed still: the next is paced
    expect(await nextWait(clock, connector, pool)).toBe(10);
    await failLast(connector); // this one opened the host
    expect(breaker.state(T)?.state).toBe('open');
    const connects = connector.connects;
    for (let i = 0; i < 3; i++) await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(HostUnavailableError); // at once, no clock advance
    expect(connector.connects).toBe(connects);
    clock.advance(300); // the window is over: the next caller is the probe, at once
    expect(await nextWait(clock, connector, pool)).toBe(0);
    await failLast(connector); // the probe failed: open again, and again nothing is paced
    for (let i = 0; i < 3; i++) await expect(pool.use(T, async () => 1)).rejects.toBeInstanceOf(HostUnavailableError);
    expect(connector.connects).toBe(connects + 1);
    await pool.close();
  });

  it('an answer the client rejects (a TLS mismatch alert, a certificate) paces nothing: the host is up, the next dials at once', async () => {
    const { clock, connector, pool } = await dialling();
    for (const code of ['ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', 'ERR_SSL_TLSV1_UNRECOGNIZED_NAME', 'CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID']) {
      connector.pending[connector.pending.length - 1]!.reject(Object.assign(new Error(code), { code }));
      await flushMicrotasks();
      expect(await nextWait(clock, connector, pool), code).toBe(0);
    }
    await failLast(connector); // a refused dial: the host's failure, paced
    expect(await nextWait(clock, connector, pool)).toBe(10);
    await failLast(connector);
    await pool.close();
  });

  it('redialPace 0 dials again at once, as before the pace', async () => {
    const { clock, connector, pool } = await dialling({ redialPace: 0 });
    for (let i = 0; i < 3; i++) {
      await failLast(connector);
      expect(await nextWait(clock, connector, pool)).toBe(0);
    }
    await failLast(connector);
    await pool.close();
  });

  it('a caller leaves a paced wait with its signal; close() ends the wait with PoolClosedError, no dial, no timer', async () => {
    const { clock, connector, pool } = await dialling();
    await failLast(connector);
    const c = new AbortController();
    const leaving = pool.use(T, async () => 1, { signal: c.signal });
    const staying = pool.use(T, async () => 1);
    await flushMicrotasks();
    expect(clock.pending).toBe(1);
    c.abort(new Error('caller gone'));
    await expect(leaving).rejects.toThrow('caller gone');
    const closed = pool.close();
    await expect(staying).rejects.toBeInstanceOf(PoolClosedError);
    await closed;
    expect(connector.connects).toBe(1);
    expect(clock.pending).toBe(0);
    expect(pool.stats()).toMatchObject({ attempts: 0, targets: 0 });
  });

  it('remembers the pacing of at most 1 024 failing targets: the oldest is forgotten', async () => {
    const { clock, connector, pool } = setup();
    connector.auto = refused();
    for (let i = 0; i <= 1_024; i++) await pool.use(`t${i}:1`, async () => 1).catch(() => {});
    expect(connector.connects).toBe(1_025);
    connector.auto = 'resolve';
    await expect(pool.use('t0:1', async () => 1)).resolves.toBe(1); // forgotten: at once
    const paced = pool.use('t1:1', async () => 2);
    await flushMicrotasks();
    expect(connector.connects).toBe(1_026);
    clock.advance(10);
    await expect(paced).resolves.toBe(2);
    await pool.close();
  });

  it('rejects a redialPace that is not a duration', () => {
    for (const redialPace of [-1, Number.NaN, Infinity, '250'] as unknown as number[]) {
      expect(() => new ConnectionPool({ connector: new FakeConnector(), redialPace })).toThrow(/redialPace/);
    }
  });
});

describe('ConnectionPool redialPace, real sockets: a node resetting every connection before its host opens', () => {
  let peer: TcpPeer | undefined;
  afterEach(async () => {
    await peer?.close();
    peer = undefined;
  });

  /** Connections the peer accepted while one caller loops on the pool for `ms`, before the host can open. */
  async function dialsIn(ms: number, redialPace: number | undefined): Promise<{ accepted: number; calls: number; served: number }> {
    peer = await resetOnAccept({ host: '127.0.0.1' });
    const target = `127.0.0.1:${peer.port}`;
    // minOutage past the run: the breaker stays closed, as in the first 1.5 s of an outage.
    const breaker = new HostBreaker({ minOutage: 60_000 });
    const pool = new ConnectionPool<net.Socket>({
      breaker,
      redialPace,
      connector: {
        // A handshake that needs the server's first byte (memcached's `version`, redis's PING): a reset fails it.
        connect: (_t, ctx) =>
          connect({ host: '127.0.0.1', port: peer!.port }, { breaker: null, signal: ctx.signal }).then(
            (socket) =>
              new Promise<net.Socket>((resolve, reject) => {
                socket.once('data', () => resolve(socket));
                socket.once('error', reject);
                socket.once('close', () => reject(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })));
              }),
          ),
        close: (s) => void s.destroy(),
      },
    });
    const end = Date.now() + ms;
    let calls = 0;
    let served = 0;
    while (Date.now() < end && calls < 100_000) {
      calls++;
      await pool.use(target, async () => served++).catch(() => {});
    }
    await pool.close();
    return { accepted: peer.attempts, calls, served };
  }

  it('one caller looping for 600 ms: a handful of dials, where redialPace 0 dials back to back', async () => {
    const unpaced = await dialsIn(600, 0);
    await peer!.close();
    const paced = await dialsIn(600, undefined);
    // Paced: 0, 10, 30, 70, 150, 310 and 560 ms (waits 10, 20, 40, 80, 160, 250), plus each dial's own time.
    expect(paced.accepted).toBeGreaterThanOrEqual(3);
    expect(paced.accepted).toBeLessThanOrEqual(10);
    expect(unpaced.accepted).toBeGreaterThan(5 * paced.accepted);
    expect(paced.served + unpaced.served).toBe(0);
  });
});
