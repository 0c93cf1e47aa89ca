/**
 * A client's own reconnect strategy answering a number no timer can wait: NaN, Infinity, 2^31 ms
 * or more (found by an outside review). The guard answers the longer of the client's wait and its
 * own, and `Math.max` kept NaN and Infinity: the client handed them to `setTimeout`, which fires
 * after 1 ms, so a guarded ioredis client with `retryStrategy: () => NaN` was refused ~1 200 times
 * in a 1.5 s outage and spent ioredis's 20 retries per command within 20 ms of the guard's
 * refusals after the restart: 10 of 10 pings failed with MaxRetriesPerRequestError where the
 * plain clients (redialling every millisecond) answered all 10. Such an answer is now the
 * guard's own wait; a false, null or Error still ends the client, as the client's own decision.
 */
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();

type Strategy = (retries: number, cause?: unknown) => unknown;

const UNWAITABLE: Array<[string, number]> = [
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['2^31', 2 ** 31],
  ['-Infinity', Number.NEGATIVE_INFINITY],
];

/** A stand-in node-redis client, enough for the guard to watch; `options` is what the guard built. */
function capture(): { create: (options: unknown) => EventEmitter; readonly options: Record<string, unknown> } {
  let seen: Record<string, unknown> = {};
  return {
    create: (options) => {
      seen = options as Record<string, unknown>;
      return Object.assign(new EventEmitter(), { isOpen: true });
    },
    get options() {
      return seen;
    },
  };
}

/** The guarded reconnect strategy of each client kind, built over the client's own `own`. */
const kinds: Array<[string, (guard: RedisGuard, own: Strategy) => Strategy]> = [
  [
    'node-redis client',
    (guard, own) => {
      const c = capture();
      guard.nodeRedis(c.create, { socket: { host: '127.0.0.1', port: 6399, reconnectStrategy: own } });
      return (c.options.socket as { reconnectStrategy: Strategy }).reconnectStrategy;
    },
  ],
  [
    'node-redis pool',
    (guard, own) => {
      const c = capture();
      guard.nodeRedisPool(c.create, { socket: { host: '127.0.0.1', port: 6399, reconnectStrategy: own } });
      return (c.options.socket as { reconnectStrategy: Strategy }).reconnectStrategy;
    },
  ],
  [
    'node-redis cluster',
    (guard, own) => {
      const c = capture();
      guard.nodeRedisCluster(c.create, { rootNodes: [{ url: 'redis://127.0.0.1:6399' }], defaults: { socket: { reconnectStrategy: own } } });
      return ((c.options.defaults as { socket: { reconnectStrategy: Strategy } }).socket).reconnectStrategy;
    },
  ],
  [
    'ioredis client',
    (guard, own) => {
      const client = guard.ioredis(Redis, { host: '127.0.0.1', port: 6399, lazyConnect: true, retryStrategy: own as never }) as unknown as Redis;
      cleanups.push(() => client.disconnect());
      return (client.options as { retryStrategy: Strategy }).retryStrategy;
    },
  ],
];

describe('RedisGuard: a reconnect strategy answering a wait no timer can hold', () => {
  it.each(kinds)('%s: NaN, Infinity, 2^31 and -Infinity answer the guard\'s own wait, a number a timer holds; false, null and an Error pass through', (_kind, strategyOf) => {
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    for (const [name, value] of UNWAITABLE) {
      const answer = strategyOf(guard, () => value)(1, new Error('connect ECONNREFUSED'));
      expect({ name, finite: typeof answer === 'number' && Number.isFinite(answer) && answer >= 0 && answer < 2 ** 31 }).toEqual({ name, finite: true });
    }
    expect(strategyOf(guard, () => 5_000)(1, new Error('connect ECONNREFUSED'))).toBe(5_000); // a longer wait of its own stands
    const stop = new Error('stop');
    for (const decision of [false, null, stop]) expect(strategyOf(guard, () => decision)(1, new Error('connect ECONNREFUSED'))).toBe(decision);
  });

  it('ioredis with retryStrategy () => NaN across a 1.5 s restart: a ping sent right after it is answered, as by the plain client (was: MaxRetriesPerRequestError)', async () => {
    const port = await freePort();
    let server = await new RedisServer(port).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const client = guard.ioredis(Redis, { host: '127.0.0.1', port, retryStrategy: () => Number.NaN }) as unknown as Redis;
    cleanups.push(() => client.disconnect());
    client.on('error', () => {});
    await new Promise((resolve) => client.once('ready', resolve));
    await server.kill();
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    server = await new RedisServer(port).start();
    const answer = await client.ping().catch((e: unknown) => (e as Error).name);
    expect(answer).toBe('PONG');
  });
});

describe('RedisGuard: a `random` option answering outside [0, 1), or throwing', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** Made anew per test: a throw is reported once per function. */
  const bad = (): Array<[string, () => number]> => [
    ['NaN', () => Number.NaN],
    ['-5', () => -5],
    ['1e9', () => 1e9],
    ['a string', () => '0.5' as unknown as number],
    [
      'a throw',
      () => {
        throw new Error('rng boom');
      },
    ],
  ];

  it.each(kinds)('%s: each answer is replaced by Math.random\'s, so the waits are those of a good source (was: NaN or negative waits, redials with no spacing; a throw escaped ioredis\'s retryStrategy and crashed the process; an outside review)', (_kind, strategyOf) => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const cause = new Error('connect ECONNREFUSED');
    const expected = [1, 2, 3, 4].map((n) => strategyOf(new RedisGuard({ breaker: new HostBreaker(), random: () => 0.5 }), () => 0)(n, cause));
    for (const [name, random] of bad()) {
      const strategy = strategyOf(new RedisGuard({ breaker: new HostBreaker(), random }), () => 0);
      expect({ name, waits: [1, 2, 3, 4].map((n) => strategy(n, cause)) }).toEqual({ name, waits: expected });
    }
    expect(expected.every((w) => typeof w === 'number' && w >= 0 && w <= 2_000)).toBe(true);
    expect(warn.mock.calls.filter((c) => /RedisGuard's random threw/.test(String(c[0]))).length).toBe(1);
  });
});

