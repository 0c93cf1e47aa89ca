/**
 * Two callers share one connect; the first one's work aborts the second's signal, at once or a
 * microtask later, after the attempt settled but before the second boards. The second rode
 * anyway: its work ran, its lease's signal never aborted, and use() resolved. An aborted caller
 * never rides: it leaves with its signal's reason, as one aborted before it asked does.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

describe('ConnectionPool: a caller aborted between the shared attempt and its boarding', () => {
  it.each([
    ['in the first caller’s work, synchronously', 0],
    ['a microtask after the first caller boards', 1],
  ])('aborted %s: its work never runs and use() rejects with the reason', async (_name, ticks) => {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const pool = new ConnectionPool<net.Socket>({
      breaker: null,
      connector: {
        connect: () =>
          new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(peer.port, '127.0.0.1', () => resolve(s));
            s.once('error', reject);
          }),
        close: (s) => void s.destroy(),
      },
    });
    cleanups.push(() => pool.close());
    const controller = new AbortController();
    const reason = new Error('batch cancelled');
    const first = pool.use(peer.address, async () => {
      if (ticks === 0) controller.abort(reason);
      else void Promise.resolve().then(() => controller.abort(reason));
      return 'one';
    });
    let ran = false;
    const second = pool.use(
      peer.address,
      async () => {
        ran = true;
        return 'two';
      },
      { signal: controller.signal },
    );
    await expect(second).rejects.toBe(reason); // was: resolved 'two'
    expect(ran).toBe(false);
    expect(await first).toBe('one');
  });
});
