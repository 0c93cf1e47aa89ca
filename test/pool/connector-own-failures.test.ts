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
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
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

describe('ConnectionPool: a connector’s own failures, and connect() inside it', () => {
  it('a connector that throws synchronously never counts against the host: a healthy pool on the same breaker is served', async () => {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const target = `127.0.0.1:${peer.port}`;
    const buggy = new ConnectionPool<net.Socket>({
      breaker,
      connector: {
        connect: () => {
          throw new TypeError('connector bug');
        },
        close: () => {},
      },
    });
    cleanups.push(() => buggy.close());
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
