/**
 * A node that answers every dial with an error (a wrong password): the breaker rightly counts it
 * alive, and the rounds say nothing, so the guard's redial spacing was its jitter alone, drawn
 * from [0, cap): 10 node-redis clients redialled such a node 10 times a second where plain ones
 * redial it 5 times. With no strategy of the client's own, node-redis now waits at least what
 * its own default would (50 ms doubling to 2 s). Counted at a real `redis-server`, the guard's
 * jitter pinned to its shortest (`random: () => 0`), against plain clients in the same run.
 * ioredis's own default changed in v6 (doubling from 50 ms to 5 s, with jitter, where v5 grows
 * by 50 ms to 2 s): the guard copied v5's, so guarded ioredis 6 clients redialled such a node
 * 2.8 times as often as plain ones (an outside review: 28 dials each in 20 s, plain 10); the
 * floor is now the class's own `defaultOptions.retryStrategy`.
 */
import { execFileSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { Redis as Redis6 } from 'ioredis6';
import { createClient } from 'redis';
import { describe, expect, it, vi } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

function connections(port: number): number {
  const info = execFileSync('redis-cli', ['-p', String(port), '-a', 'right', '--no-auth-warning', 'info', 'stats'], { encoding: 'utf8' });
  return Number(/total_connections_received:(\d+)/.exec(info)?.[1]);
}

/**
 * Two password-protected servers, 3 plain clients on one and 3 guarded ones (jitter at its
 * lowest) on the other, all with a wrong password, for 2.5 s: the dials each server saw.
 */
async function redials(start: (plainPort: number, guardedPort: number, guard: RedisGuard) => void): Promise<{ plain: number; guarded: number }> {
  const plainServer = await new RedisServer(await freePort(), ['--requirepass', 'right']).start();
  const guardedServer = await new RedisServer(await freePort(), ['--requirepass', 'right']).start();
  cleanups.push(() => plainServer.kill(), () => guardedServer.kill());
  start(plainServer.port, guardedServer.port, new RedisGuard({ breaker: new HostBreaker(), random: () => 0 }));
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  return { plain: connections(plainServer.port) - 1, guarded: connections(guardedServer.port) - 1 }; // less redis-cli's own
}

describe('RedisGuard + node-redis: a node answering every dial with an error', () => {
  it('guarded clients redial it no more often than plain ones (3 clients each, 2.5 s)', async () => {
    const { plain, guarded } = await redials((plainPort, guardedPort, guard) => {
      const clients = [
        ...[0, 1, 2].map(() => createClient({ socket: { host: '127.0.0.1', port: plainPort }, password: 'wrong' })),
        ...[0, 1, 2].map(() => guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: guardedPort }, password: 'wrong' })),
      ];
      for (const c of clients) {
        c.on('error', () => {});
        c.connect().catch(() => {});
        cleanups.push(() => c.isOpen && c.destroy());
      }
    });
    expect(plain).toBeGreaterThanOrEqual(6);
    expect(guarded).toBeLessThanOrEqual(plain + 3); // was several times plain's with the jitter at 0
  });

  it('ioredis likewise (3 clients each, 2.5 s)', async () => {
    const { plain, guarded } = await redials((plainPort, guardedPort, guard) => {
      const clients = [
        ...[0, 1, 2].map(() => new Redis({ host: '127.0.0.1', port: plainPort, password: 'wrong' })),
        ...[0, 1, 2].map(() => guard.ioredis(Redis, { host: '127.0.0.1', port: guardedPort, password: 'wrong' })),
      ];
      for (const c of clients) {
        c.on('error', () => {});
        cleanups.push(() => c.disconnect());
      }
    });
    expect(plain).toBeGreaterThanOrEqual(6);
    expect(guarded).toBeLessThanOrEqual(plain + 3);
  });

  it("ioredis 6, whose own default paces slower: guarded follows that default, not v5's (3 clients each, 2.5 s)", async () => {
    const { plain, guarded } = await redials((plainPort, guardedPort, guard) => {
      const clients = [
        ...[0, 1, 2].map(() => new Redis6({ host: '127.0.0.1', port: plainPort, password: 'wrong' })),
        ...[0, 1, 2].map(() => guard.ioredis(Redis6, { host: '127.0.0.1', port: guardedPort, password: 'wrong' })),
      ];
      for (const c of clients) {
        c.on('error', () => {});
        cleanups.push(() => c.disconnect());
      }
    });
    expect(plain).toBeGreaterThanOrEqual(6);
    expect(guarded).toBeLessThanOrEqual(plain + 3); // was about twice plain's (v5's pace: ~30 against ~18)
  });
});

describe("RedisGuard + ioredis: the floor is the client class's own default strategy", () => {
  /** The strategy a guarded client of `defaultOptions` got, asked about its first redial. */
  function firstRedial(defaultOptions: unknown): number {
    let strategy: ((times: number) => number) | undefined;
    class FakeRedis {
      static defaultOptions = defaultOptions;
      connector = { connect: () => Promise.reject(new Error('unused')), disconnect: () => {} };
      constructor(o: { lazyConnect?: boolean; retryStrategy: (times: number) => number }) {
        if (o.lazyConnect !== true) strategy = o.retryStrategy;
      }
      on(): this {
        return this;
      }
      listenerCount(): number {
        return 0;
      }
    }
    const guard = new RedisGuard({ breaker: new HostBreaker(), random: () => 0 });
    guard.ioredis(FakeRedis as unknown as typeof Redis, { host: '127.0.0.1', port: 6390 });
    return strategy!(1);
  }

  it("a class whose default waits 4 s: the guarded client's first redial waits 4 s", () => {
    expect(firstRedial({ retryStrategy: () => 4_000 })).toBe(4_000);
  });

  it('4 s exactly at any clock reading (CI read 3 999.999999999998: `now + 4000 - now` in floating point)', () => {
    const now = vi.spyOn(performance, 'now');
    try {
      for (const reading of [15_867.040684829359, 127_321.06956094613, 8_386_271.353358177]) {
        now.mockReturnValue(reading);
        expect(firstRedial({ retryStrategy: () => 4_000 })).toBe(4_000);
      }
    } finally {
      now.mockRestore();
    }
  });

  it("no default, one that throws or answers nonsense: ioredis 5's pace (50 ms for the first redial)", () => {
    expect(firstRedial(undefined)).toBe(50);
    expect(firstRedial({ retryStrategy: () => { throw new Error('bad'); } })).toBe(50);
    expect(firstRedial({ retryStrategy: () => Number.NaN })).toBe(50);
    expect(firstRedial({ retryStrategy: () => -1 })).toBe(50);
  });
});
