/**
 * No AsyncLocalStorage and no async hook on the dial and pool paths. In Node 20 one
 * `AsyncLocalStorage.run` (or an enabled async hook) turns on promise hooks for the whole process,
 * a cost on every promise of every client: a version of the nested-dial fix that used one took
 * bench/undici's healthy lane from 0.973 to 0.911 and 0.887 of raw (+7 to +11 µs CPU a request).
 * Counted, not timed: a dial, a connect() inside a pool's dial, and warm uses.
 */
import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import type net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { connect } from '../../src/guard/connect.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';

afterEach(() => vi.restoreAllMocks());

describe('the dial and pool paths keep no async context', () => {
  it('a dial, a connect() inside a pool dial and 100 warm uses run no AsyncLocalStorage and enable no async hook', async () => {
    const run = vi.spyOn(AsyncLocalStorage.prototype, 'run');
    const enterWith = vi.spyOn(AsyncLocalStorage.prototype, 'enterWith');
    const hooks = { enabled: 0 };
    const probe = createHook({});
    const enable = Object.getPrototypeOf(probe).enable as () => unknown;
    vi.spyOn(Object.getPrototypeOf(probe), 'enable').mockImplementation(function (this: unknown) {
      hooks.enabled++;
      return enable.call(this);
    });
    const peer = await echoPeer();
    const breaker = new HostBreaker();
    try {
      await dial('a.test:1', async () => 'x', { breaker });
      const pool = new ConnectionPool<net.Socket>({
        breaker,
        connector: {
          connect: (_t, ctx) => connect({ host: '127.0.0.1', port: peer.port }, { breaker, signal: ctx.signal }),
          close: (s) => void s.destroy(),
        },
      });
      for (let i = 0; i < 100; i++) await pool.use(peer.address, async () => i);
      await pool.close();
    } finally {
      await peer.close();
    }
    expect({ run: run.mock.calls.length, enterWith: enterWith.mock.calls.length, hooksEnabled: hooks.enabled }).toEqual({ run: 0, enterWith: 0, hooksEnabled: 0 });
  });
});
