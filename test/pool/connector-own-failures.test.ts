/**
 * What a user's own connector does wrong is not the host's failure, and a connector that dials
 * with `connect()` on the pool's breaker is one dial, not two:
 * - a `connect()` that throws synchronously (a connector bug, before any I/O) was counted as the
 *   host's failure through the pool (16 throws opened a healthy host for every client), where the
 *   same throw through `dial()` was already abandoned;
 * - likewise a `connect({ handshake })` whose handshake throws synchronously;
 * - a pool whose connector calls `connect()` (the natural raw-TCP connector), both on one breaker:
 *   after an outage the pool's probe held the host's probe slot, the inner `connect()` was
 *   refused for it, and that refusal failed the probe: windows doubling, a host back from a 2.5 s
 *   outage never dialled again (0 connections in the 6.5 s after). Now the inner dial is the
 *   outer's own, and a refusal is never the host's failure.
 * Real sockets on loopback.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { ServerSet } from '../../src/retry/server-set.js';
import { echoPeer, refusing } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

const socketConnector = (port: number, breaker: HostBreaker) => ({
  connect: (_t: string, ctx: { signal: AbortSignal }) => connect({ host: '127.0.0.1', port }, { signal: ctx.signal, breaker }),
  close: (s: net.Socket) => void s.destroy(),
  watch: (s: net.Socket, w: { gone(cause: unknown): void }) => {
    s.on('error', () => {});
    s.once('close', () => w.gone(new Error('closed')));
  },
});

/** A pool on `breaker` whose connector throws `err` synchronously (a connector bug, before any I/O). */
function throwingPool(breaker: HostBreaker, err: Error): ConnectionPool<net.Socket> {
  const pool = new ConnectionPool<net.Socket>({
    breaker,
    connector: {
      connect: () => {
        throw err;
      },
      close: () => {},
    },
  });
  cleanups.push(() => pool.close());
  return pool;
}

describe('ConnectionPool: a connector’s own failures, and connect() inside it', () => {
  it('a connector that throws synchronously never counts against the host: a healthy pool on the same breaker is served', async () => {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const target = `127.0.0.1:${peer.port}`;
    const buggy = throwingPool(breaker, new TypeError('connector bug'));
    for (let i = 0; i < 5; i++) await expect(buggy.use(target, async () => 'x')).rejects.toThrow('connector bug');
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0, abandoned: 5 }); // was failed 5, opened 1
    const healthy = new ConnectionPool<net.Socket>({ breaker, connector: socketConnector(peer.port, breaker) });
    cleanups.push(() => healthy.close());
    expect(await healthy.use(target, async () => 'served')).toBe('served');
  });

  it("connect()'s handshake that throws synchronously never counts against the host", async () => {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    for (let i = 0; i < 3; i++) {
      await expect(
        connect(
          { host: '127.0.0.1', port: peer.port },
          {
            breaker,
            handshake: () => {
              throw new TypeError('handshake bug');
            },
          },
        ),
      ).rejects.toThrow('handshake bug');
    }
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    const socket = await connect({ host: '127.0.0.1', port: peer.port }, { breaker });
    socket.destroy();
  });

  it('a pool whose connector calls connect() on the same breaker: a host back from an outage is served after one probe', async () => {
    const down = await refusing();
    const port = down.port;
    await down.close(); // the port refuses from now on
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 200 });
    const pool = new ConnectionPool<net.Socket>({ breaker, connector: socketConnector(port, breaker) });
    cleanups.push(() => pool.close());
    const target = `127.0.0.1:${port}`;
    await expect(pool.use(target, async () => 'x')).rejects.toThrow(); // refused by the kernel: opens
    expect(breaker.state(target)?.state).toBe('open');
    const peer = await echoPeer({ port });
    cleanups.push(() => peer.close());
    const back = performance.now();
    let served: string | undefined;
    while (served === undefined && performance.now() - back < 3_000) {
      served = await pool.use(target, async () => 'served').catch(() => undefined);
      if (served === undefined) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(served).toBe('served'); // was: never (each probe failed by its own inner refusal)
    expect(performance.now() - back).toBeLessThan(1_000);
    expect(breaker.stats().failed).toBe(1); // the outage's one dial; no refusal counted as a failure
    expect(peer.attempts).toBe(1);
  });
});

describe('ConnectionPool: a handshake the server answered with an error', () => {
  /** A server that answers every connection's first exchange with an error and hangs up (memcached at maxconns). */
  async function fullServer(): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
    let accepted = 0;
    const server = net.createServer((s) => {
      accepted++;
      s.on('error', () => {});
      s.resume(); // reads what the client sends, so its close is heard
      s.end('ERROR Too many open connections\r\n');
    });
    server.on('error', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as net.AddressInfo).port, accepted: () => accepted, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }

  /** A connector whose handshake writes `version` and wants `VERSION` back, as a memcached client's. */
  const handshaking = (breaker: HostBreaker) => ({
    connect: (target: string, ctx: { signal: AbortSignal }) =>
      connect(
        { host: '127.0.0.1', port: Number(target.split(':')[1]) },
        {
          signal: ctx.signal,
          breaker,
          handshake: (s: net.Socket) =>
            new Promise<void>((resolve, reject) => {
              s.once('data', (d) => (String(d).startsWith('VERSION') ? resolve() : reject(new Error(`handshake: ${String(d).trim()}`))));
              s.write('version\r\n');
            }),
        },
      ),
    close: (s: net.Socket) => void s.destroy(),
    watch: (s: net.Socket, w: { gone(cause: unknown): void }) => {
      s.on('error', () => {});
      s.once('close', () => w.gone(new Error('closed')));
    },
  });

  it('its error is a failed dial, never sent: a ServerSet moves on to a live server (was: unknown, every call failed while the live one sat idle; an outside review: 0 of 1 792)', async () => {
    const full = await fullServer();
    cleanups.push(() => full.close());
    const live = await echoPeer();
    cleanups.push(() => live.close());
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0 });
    const pool = new ConnectionPool<net.Socket>({ breaker, connector: handshaking(breaker) });
    cleanups.push(() => pool.close());
    const failed = await pool.use(`127.0.0.1:${full.port}`, async () => 'never').catch((e: unknown) => e);
    expect(failed).toMatchObject({ message: 'handshake: ERROR Too many open connections' });
    expect(classify(failed)).toMatchObject({ kind: 'dial', notSent: true, transient: true });
    expect(breaker.stats()).toMatchObject({ failed: 0 }); // it answered: alive, no failure of the host's
    // The echo peer answers `version` with `version`: not VERSION, so it stands in only as a server to move on to.
    const set = new ServerSet([`127.0.0.1:${full.port}`, `127.0.0.1:${live.port}`], { breaker });
    const served: string[] = [];
    const plain = new ConnectionPool<net.Socket>({ breaker, connector: socketConnector(live.port, breaker) });
    cleanups.push(() => plain.close());
    for (let i = 0; i < 5; i++) {
      served.push(
        await set.run((server) => (server.endsWith(`:${live.port}`) ? plain.use(server, async () => server) : pool.use(server, async () => server)), { budget: null, backoff: () => 0 }),
      );
    }
    expect(served).toEqual(Array(5).fill(`127.0.0.1:${live.port}`));
    expect(full.accepted()).toBeLessThanOrEqual(2); // moved on, not hammered
  });

  it('a connector that throws (this process\'s own failure) stays unknown: no retry of a bug', async () => {
    const pool = throwingPool(new HostBreaker(), new Error('connector bug'));
    const err = await pool.use('127.0.0.1:1', async () => 'x').catch((e: unknown) => e);
    expect(classify(err)).toMatchObject({ kind: 'unknown', notSent: false, transient: false });
  });
});
