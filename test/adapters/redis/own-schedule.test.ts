/**
 * A guarded ioredis client with its default pace keeps that pace's schedule, counted from its
 * first failure, not from each dial (an outside review, r128). Each dial of its own waited
 * ioredis's full delay from when it ended; a dial begun late (refused at the gate while another
 * client of the guard dialled, or waiting for the node's round) pushed the rest of its schedule
 * back by as much, and the lateness added up: 3 ioredis 6 clients' 7th dials came 1.5-3.3 s
 * after their plain selves', and after a ~10 s outage they were back 2.8-4.9 s after the node
 * where plain clients took 1.8-2.5 s. Here 3 plain and 3 guarded ioredis 6 clients wait out the
 * same outage of a real redis-server (its port refused from the start); the guarded are back no
 * later than the plain ones, in the same run.
 */
import { Redis as Redis6 } from 'ioredis6';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort, requireRedisServer } from './redis-server.js';

requireRedisServer();
const cleanups = leakCheckEach();

/** Milliseconds from `from` until `client` is ready (Infinity if not within `within` ms). */
function readyAfter(client: Redis6, from: () => number, within: number): Promise<number> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(Infinity), within);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve(performance.now() - from());
    });
  });
}

describe('RedisGuard: ioredis keeps its own schedule, not its schedule pushed back by each late dial', () => {
  it('3 guarded ioredis 6 clients are back after a 9.5 s outage no later than 3 plain ones', async () => {
    const port = await freePort();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const make = (guarded: boolean): Redis6 => {
      const options = { host: '127.0.0.1', port };
      const c = guarded ? (guard.ioredis(Redis6, options) as unknown as Redis6) : new Redis6(options);
      c.on('error', () => {});
      cleanups.push(() => c.disconnect());
      return c;
    };
    const plain = [make(false), make(false), make(false)];
    const guarded = [make(true), make(true), make(true)];
    let back = Infinity;
    const ready = Promise.all([...plain, ...guarded].map((c) => readyAfter(c, () => back, 18_000)));
    // ioredis 6 has dialled 8 times by then (0.05 s doubling to 3.2 s, each plus up to 0.2 s);
    // its next delay is 5 s, so the outage ends inside the longest wait, as in the review.
    await new Promise((resolve) => setTimeout(resolve, 9_500));
    const server = await new RedisServer(port).start();
    cleanups.push(() => server.kill());
    back = performance.now();
    const after = await ready;
    const worst = (ms: number[]): number => Math.max(...ms);
    const p = after.slice(0, 3);
    const g = after.slice(3);
    expect(worst(p), `plain ${p.map(Math.round).join(', ')}`).toBeLessThan(Infinity);
    // Same schedule, so the same wait for the dial that finds the node, give or take ioredis's
    // jitter (up to 0.2 s a retry, drawn per client) and the breaker's window.
    expect(worst(g), `guarded ${g.map(Math.round).join(', ')}, plain ${p.map(Math.round).join(', ')}`).toBeLessThan(worst(p) + 600);
  }, 30_000);
});
