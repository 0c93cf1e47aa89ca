/**
 * A user callback that throws never becomes an unhandled rejection or an uncaught exception
 * (issue 12, defect 7, outside the pool and the adapters): dial's `dispose`, a channel subscriber,
 * a logger's clock, a breaker's open-window schedule settled from a dial's timer, retry's
 * `cancel`, and the testing peers' handlers. Each test counts the process-level failures seen
 * while it ran (none), the warning that replaced them (one), and that the operation still came out
 * right.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { type DialContext, dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { subscribe } from '../../src/observe/channels.js';
import { logStateChanges } from '../../src/observe/log-state-changes.js';
import { onRetryEvent, retry } from '../../src/retry/retry.js';
import { httpPeer } from '../../src/testing/http-peer.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';
import { TcpPeer, acceptAndHold } from '../../src/testing/tcp-peers.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { watching } from '../helpers/watching.js';

const boom = (): never => {
  throw new Error('user callback down');
};

describe('a throwing user callback leaves the process alive and the operation correct', () => {
  it('dial: a dispose that throws on a connection arriving after the timeout is a warning; the dial still failed once, on time', async () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 3 });
    let deliver!: (c: string) => void;
    let disposed = 0;
    const seen = await watching(async () => {
      const p = dial('db:1', (_ctx: DialContext) => new Promise<string>((resolve) => (deliver = resolve)), {
        timeout: 100,
        clock,
        breaker,
        dispose: () => {
          disposed++;
          boom();
        },
      });
      const outcome = p.catch((err: unknown) => err);
      await clock.tick(100);
      expect(await outcome).toBeInstanceOf(ConnectTimeoutError);
      deliver('late'); // arrives after the dial was given up
      await flushMicrotasks();
    });
    expect(disposed).toBe(1);
    expect(seen.unhandled).toEqual([]);
    expect(seen.uncaught).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('user callback down')]);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 0 });
  });

  it('dial: a late connection with no dispose is dropped quietly (no warning)', async () => {
    const clock = new ManualClock();
    let deliver!: (c: string) => void;
    const seen = await watching(async () => {
      const p = dial('db:5', () => new Promise<string>((resolve) => (deliver = resolve)), { timeout: 100, clock, breaker: null }).catch((err: unknown) => err);
      await clock.tick(100);
      expect(await p).toBeInstanceOf(ConnectTimeoutError);
      deliver('late');
      await flushMicrotasks();
    });
    expect(seen).toEqual({ uncaught: [], unhandled: [], warnings: [] });
  });

  it('subscribe(): a subscriber that throws on dial:settled is a warning; the dial resolves with its connection', async () => {
    let calls = 0;
    const seen = await watching(async () => {
      const stop = subscribe('dialguard:dial:settled', () => {
        calls++;
        boom();
      });
      try {
        await expect(dial('db:2', async () => 'conn', { breaker: null })).resolves.toBe('conn');
      } finally {
        stop();
      }
    });
    expect(calls).toBe(1);
    expect(seen.uncaught).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining("subscriber of 'dialguard:dial:settled' threw")]);
  });

  it("logStateChanges: a clock (`now`) that throws on budget-exhausted is a warning; the retry call's own error is intact", async () => {
    const lines: unknown[] = [];
    const seen = await watching(async () => {
      const stop = logStateChanges({ warn: (f) => void lines.push(f), info: () => {} }, { now: boom });
      try {
        diagnosticsChannel.channel('dialguard:retry:budget-exhausted').publish({ attempt: 1 });
      } finally {
        stop();
      }
    });
    expect(seen.uncaught).toEqual([]);
    expect(lines).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('user callback down')]);
  });

  it("a breaker's open-window schedule that throws, settled from a dial's timeout: a warning, the host still opens, the dial rejects with its timeout", async () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: boom }); // one failed dial opens it
    const seen = await watching(async () => {
      const p = dial('db:3', () => new Promise<string>(() => {}), { timeout: 50, clock, breaker });
      const outcome = p.catch((err: unknown) => err);
      await clock.tick(50);
      expect(await outcome).toBeInstanceOf(ConnectTimeoutError);
    });
    expect(seen.uncaught).toEqual([]);
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('backoff schedule threw')]);
    expect(breaker.stats()).toMatchObject({ failed: 1, opened: 1 });
    // Its previous window (none yet: 0) is used, so the host is not blocked for ever: a probe may run.
    expect(() => breaker.admit('db:3').abandoned()).not.toThrow();
  });

  it('events.ts listeners (already isolated, pinned here): a breaker listener throwing from a dial timer, a retry listener throwing between attempts', async () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0 }); // one failed dial opens it
    const stopBreaker = breaker.on('opened', boom);
    const stopRetry = onRetryEvent('scheduled', boom);
    let attempts = 0;
    const seen = await watching(async () => {
      try {
        const p = dial('db:4', () => new Promise<string>(() => {}), { timeout: 50, clock, breaker }).catch((err: unknown) => err);
        await clock.tick(50);
        expect(await p).toBeInstanceOf(ConnectTimeoutError);
        const r = retry(
          () => {
            attempts++;
            if (attempts === 1) throw Object.assign(new Error('refused'), { code: 'ECONNREFUSED', syscall: 'connect' });
            return 'ok';
          },
          { clock, budget: null, backoff: () => 0 },
        );
        await clock.tick(0);
        expect(await r).toBe('ok');
      } finally {
        stopBreaker();
        stopRetry();
      }
    });
    expect(attempts).toBe(2);
    expect(breaker.stats()).toMatchObject({ opened: 1 });
    expect(seen.uncaught).toEqual([]);
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toHaveLength(2);
  });

  it("retry: a `cancel` that throws rejects the call with that error, no attempt made, its signal listener removed", async () => {
    const controller = new AbortController();
    let attempts = 0;
    const seen = await watching(async () => {
      const call = retry(
        () => {
          attempts++;
          return 'never';
        },
        { cancel: boom, signal: controller.signal, budget: null },
      );
      await expect(call).rejects.toThrow('user callback down');
    });
    expect(attempts).toBe(0);
    expect(seen.unhandled).toEqual([]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it("retry: a clock whose setTimeout throws during a backoff ends the call with that error (was: rejected with undefined)", async () => {
    const clock = new ManualClock(0);
    const failing = { now: () => clock.now(), setTimeout: boom, clearTimeout: () => {} };
    let attempts = 0;
    const results: unknown[] = [];
    const seen = await watching(async () => {
      const call = retry(
        () => {
          attempts++;
          throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
        },
        { clock: failing, budget: null, idempotent: true, maxAttempts: 3, onResult: (r) => void results.push(r.error) },
      );
      await expect(call).rejects.toThrow('user callback down');
    });
    expect(attempts).toBe(1);
    expect(results).toHaveLength(1);
    expect(results[0]).toBeInstanceOf(Error);
    expect(seen.unhandled).toEqual([]);
  });

  it('dial: an establish that returns a connection, not a promise, resolves with it and arms nothing after (was: a TypeError, then a timeout against the host)', async () => {
    const clock = new ManualClock(0);
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, clock });
    const connection = { id: 1 };
    const seen = await watching(async () => {
      await expect(dial('127.0.0.1:1', () => connection as unknown as Promise<typeof connection>, { breaker, clock, timeout: 1_000 })).resolves.toBe(connection);
    });
    expect(clock.pending).toBe(0);
    clock.advance(2_000);
    expect(breaker.state('127.0.0.1:1')?.state).toBe('closed');
    expect(seen.uncaught).toEqual([]);
  });

  it('dial: an establish that throws at once fails the dial with its error, and counts nothing against the host (no I/O was made)', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    for (let i = 0; i < 3; i++) await expect(dial('127.0.0.1:1', boom, { breaker })).rejects.toThrow('user callback down');
    expect(breaker.state('127.0.0.1:1')?.state ?? 'closed').toBe('closed');
    expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0 });
  });

  it("connect: a handshake that throws at once (or returns no promise) fails the dial then, never an uncaught exception", async () => {
    const peer = await acceptAndHold();
    const breaker = new HostBreaker();
    const seen = await watching(async () => {
      const t0 = performance.now();
      await expect(connect({ host: '127.0.0.1', port: peer.port }, { breaker, timeout: 2_000, handshake: boom })).rejects.toThrow('user callback down');
      expect(performance.now() - t0).toBeLessThan(1_000); // was: the whole connect timeout
      const socket = await connect({ host: '127.0.0.1', port: peer.port }, { breaker, timeout: 2_000, handshake: (() => undefined) as never });
      socket.destroy();
    });
    await peer.close();
    expect(seen.uncaught).toEqual([]);
  });

  it("a listener or subscriber that throws something String() cannot print (no prototype, a toString that throws) is a warning too; the pool's target is not poisoned", async () => {
    const pool = new ConnectionPool<{ n: number }>({ breaker: null, connector: { connect: async () => ({ n: 1 }), close: () => {} } });
    let throwOnce = true;
    const stop = pool.on('opened', () => {
      if (!throwOnce) return;
      throwOnce = false;
      throw Object.create(null);
    });
    const unsubscribe = subscribe('dialguard:pool:opened', () => {
      throw {
        toString() {
          throw new Error('cannot print me');
        },
      };
    });
    const seen = await watching(async () => {
      expect(await pool.use('h:1', async () => 'x')).toBe('x'); // was: TypeError, and every later call to h:1 too
      expect(await pool.use('h:1', async () => 'x')).toBe('x');
    });
    stop();
    unsubscribe();
    await pool.close();
    expect(seen.uncaught).toEqual([]);
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.filter((w) => w.includes('cannot be printed'))).toHaveLength(2);
  });

  it('testing peers: an httpPeer, http2Peer or TcpPeer behaviour that throws answers 500 / resets, with a warning', { timeout: 5_000 }, async () => {
    let status = 0;
    let h2Error = '';
    let reset = false;
    const seen = await watching(async () => {
      await using web = await httpPeer({ handler: boom });
      const res = await request(`http://${web.address}/`);
      status = res.statusCode;
      await res.body.dump();

      await using h2 = await http2Peer({ handler: boom });
      const session = http2.connect(h2.origin);
      session.on('error', () => {});
      await new Promise<void>((resolve) => {
        const req = session.request({ ':path': '/' });
        req.on('error', (err) => {
          h2Error = (err as NodeJS.ErrnoException).code ?? String(err);
          resolve();
        });
        req.on('close', () => resolve());
        req.resume();
      });
      session.destroy();

      await using tcp = await new TcpPeer('throws', {}, boom).listen();
      await new Promise<void>((resolve) => {
        const socket = net.connect(tcp.port, '127.0.0.1');
        socket.on('error', () => {
          reset = true;
        });
        socket.on('close', () => resolve());
      });
    });
    expect(status).toBe(500);
    expect(h2Error).toBe('ERR_HTTP2_STREAM_ERROR');
    expect(reset).toBe(true);
    expect(seen.uncaught).toEqual([]);
    expect(seen.warnings).toHaveLength(3);
  });
});
