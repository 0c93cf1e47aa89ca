/**
 * One Redis client configured with `tls` against a plain redis-server port: its TLS hello is read
 * by redis-server as the start of a command line that never ends, so each of its dials hangs until
 * its connect timeout. After a restart, such a dial took the host's probe and held it, the right
 * clients refused half-open behind it, and its failure doubled the window (an outside review:
 * right clients back 4-11 s after a 300 ms restart in 3 of 6 runs; 0.2-0.4 s without it). A
 * transport that never reached the host while another did is now tried apart from the probe
 * (HostBreaker: strangers).
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();
/** The guard's connect timeout: how long a wrong client's hung dial held the probe. */
const CONNECT_TIMEOUT = 3_000;
const WRONG = 4;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('RedisGuard: clients with tls on a plain port beside right clients, across a restart', () => {
  it(`the right clients serve again well inside the wrong ones' ${CONNECT_TIMEOUT} ms connect timeout, twice in a row; the wrong ones never take the probe`, async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: CONNECT_TIMEOUT });
    const wrong = Array.from({ length: WRONG }, () =>
      guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, tls: { rejectUnauthorized: false }, retryStrategy: () => 20, maxRetriesPerRequest: 0 }),
    );
    const io = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null, disconnectTimeout: 50 });
    const nr = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port } });
    for (const c of [...wrong, io, nr]) c.on('error', () => {});
    cleanups.push(
      () => wrong.forEach((c) => c.disconnect()),
      () => io.disconnect(),
      () => nr.isOpen && nr.destroy(),
    );
    await nr.connect();
    expect(await io.ping()).toBe('PONG');
    // The wrong clients' dials hang and fail, over and over, with no success between them.
    await expect.poll(() => breaker.stats().failed, { timeout: 3 * CONNECT_TIMEOUT, interval: 50 }).toBeGreaterThanOrEqual(2);
    for (let round = 0; round < 2; round++) {
      await server.kill();
      await sleep(300);
      await server.start();
      const back = performance.now();
      const pings = await Promise.all([io.ping(), nr.ping()]);
      expect(pings).toEqual(['PONG', 'PONG']);
      // Without the wrong clients: 0.2-0.4 s. Behind a wrong client's probe: its whole connect
      // timeout, and a doubled window after.
      expect(performance.now() - back).toBeLessThan(CONNECT_TIMEOUT / 2);
    }
  }, 30_000);
});
