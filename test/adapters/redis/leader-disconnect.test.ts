/**
 * ioredis: the app `disconnect()`s the client leading a redial round (its dial in a frozen node's
 * handshake). ioredis runs no retryStrategy after a manual disconnect, so its dial was never
 * reported and the round held the node's other clients until its lead ran out (connectTimeout +
 * 1 s): ready 3 s after the node came back, against 5 ms for plain clients. The disconnect now
 * abandons the dial (it says nothing of the node) and frees the round. Real `redis-server`.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('RedisGuard + ioredis: disconnect() of the client leading a redial round', () => {
  it('the other clients are ready as soon as the node answers, and the dial counts as abandoned, not failed', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker, connectTimeout: 2_000 });
    const clients = Array.from({ length: 4 }, () => guard.ioredis(Redis, { host: '127.0.0.1', port: server.port }));
    cleanups.push(() => {
      for (const c of clients) c.disconnect();
    });
    for (const c of clients) c.on('error', () => {});
    await Promise.all(clients.map((c) => c.ping()));
    // The node restarts frozen; a redial that reached it before the freeze (a window of a few
    // ms between its listen and SIGSTOP) was answered, so that restart is done again (bounded).
    let leader: Redis | undefined;
    for (let attempt = 0; attempt < 5 && leader === undefined; attempt++) {
      await server.kill();
      await sleep(100);
      await server.startFrozen();
      for (let i = 0; i < 400 && leader === undefined; i++) {
        leader = clients.find((c) => c.status === 'connect'); // TCP up, in the frozen node's handshake
        if (leader === undefined) await sleep(5);
      }
      if (leader !== undefined && leader.stream.bytesRead === 0) break;
      leader = undefined;
      await server.thaw();
      await Promise.all(clients.map((c) => c.ping()));
    }
    expect(leader).toBeDefined();
    expect(leader!.stream.bytesRead).toBe(0); // nothing answered it: the node was frozen before it served
    const abandonedBefore = breaker.stats().abandoned;
    leader!.disconnect();
    expect(breaker.stats().abandoned).toBe(abandonedBefore + 1);
    await server.thaw();
    const thawed = performance.now();
    const rest = clients.filter((c) => c !== leader);
    await Promise.all(rest.map((c) => c.ping()));
    expect(performance.now() - thawed).toBeLessThan(1_000); // was ~3 000 ms (the lead's bound)
  });

  it("a disconnect ioredis makes itself after the node answered (a wrong password) is the node's answer: a success, never abandoned", async () => {
    const server = await new RedisServer(await freePort(), ['--requirepass', 'right']).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker });
    const client = guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, password: 'wrong' });
    client.on('error', () => {});
    cleanups.push(() => client.disconnect());
    await expect.poll(() => breaker.stats().succeeded, { timeout: 2_000, interval: 10 }).toBeGreaterThanOrEqual(2);
    expect(breaker.stats()).toMatchObject({ failed: 0, abandoned: 0 });
  });

  it('node-redis: destroy() during a dial whose handshake is held is the client’s own cancellation: abandoned, not failed', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker();
    const client = new RedisGuard({ breaker, connectTimeout: 2_000 }).nodeRedis(createClient, { socket: { host: '127.0.0.1', port: peer.port } });
    client.on('error', () => {});
    cleanups.push(() => client.isOpen && client.destroy());
    client.connect().catch(() => {});
    await expect.poll(() => peer.attempts, { timeout: 2_000, interval: 10 }).toBe(1);
    client.destroy();
    await expect.poll(() => breaker.stats().abandoned, { timeout: 1_000, interval: 10 }).toBe(1);
    expect(breaker.stats().failed).toBe(0);
  });
});
