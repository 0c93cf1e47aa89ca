/**
 * RedisGuard with node-redis and ioredis against a FROZEN `redis-server` (SIGSTOP, waited for in
 * /proc): its kernel still completes TCP handshakes into the listener's backlog, so a frozen node
 * looks like accept-and-hold. Dials are counted at the clients' only way out: the resolver each
 * TCP attempt calls (node-redis) and the connector each dial goes through (ioredis), with the
 * breaker's own counts beside them. Then SIGCONT, and the node is used again after one probe.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { countingLookup } from '../http/helpers.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();
const CLIENTS = 5;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** ioredis's own connector, counting each dial that reaches it (the guard's gate sits in front). */
function countingConnector(): { Connector: unknown; readonly dials: number } {
  const Base = (new Redis({ lazyConnect: true }) as unknown as { connector: { constructor: new (o: unknown) => { connect(e: unknown): Promise<unknown> } } }).connector.constructor;
  let dials = 0;
  class Counting extends Base {
    override connect(emitter: unknown): Promise<unknown> {
      dials++;
      return super.connect(emitter);
    }
  }
  return {
    Connector: Counting,
    get dials() {
      return dials;
    },
  };
}

/** Settles to the reply, or to 'pending' if none came within `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T | 'pending' | 'error'> {
  return Promise.race([p.catch(() => 'error' as const), sleep(ms).then(() => 'pending' as const)]);
}

describe('RedisGuard: a frozen node (SIGSTOP, accept-and-hold)', () => {
  it('default and guarded clients, connected before the freeze: none redials, commands wait until SIGCONT, then all answer with no new dial', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 300 });
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const raw = countingLookup();
    const gated = countingLookup();
    const rawIo = countingConnector();
    const gatedIo = countingConnector();
    const nr = [
      createClient({ socket: { host: 'localhost', port: server.port, lookup: raw.lookup } as never }),
      guard.nodeRedis(createClient, { socket: { host: 'localhost', port: server.port, lookup: gated.lookup } }),
    ];
    const io = [
      new Redis({ host: '127.0.0.1', port: server.port, Connector: rawIo.Connector as never }),
      guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, Connector: gatedIo.Connector }),
    ];
    for (const c of [...nr, ...io]) c.on('error', () => {});
    cleanups.push(() => nr.forEach((c) => c.isOpen && c.destroy()), () => io.forEach((c) => c.disconnect()));
    await Promise.all(nr.map((c) => c.connect()));
    const ping = (c: (typeof nr)[number] | (typeof io)[number]): Promise<string> => (c instanceof Redis ? c.ping() : c.ping());
    const clients = [...nr, ...io];
    expect(await Promise.all(clients.map(ping))).toEqual(['PONG', 'PONG', 'PONG', 'PONG']);
    const before = [raw.calls, gated.calls, rawIo.dials, gatedIo.dials];
    expect(before).toEqual([1, 1, 1, 1]);

    await server.freeze();
    const pings = clients.map(ping);
    // Neither client has a reply timeout by default: the commands wait, and nothing redials.
    expect(await Promise.all(pings.map((p) => within(p, 1_500)))).toEqual(['pending', 'pending', 'pending', 'pending']);
    expect([raw.calls, gated.calls, rawIo.dials, gatedIo.dials]).toEqual(before);
    expect(breaker.stats().failed).toBe(0);

    await server.thaw();
    expect(await Promise.all(pings)).toEqual(['PONG', 'PONG', 'PONG', 'PONG']);
    expect([raw.calls, gated.calls, rawIo.dials, gatedIo.dials]).toEqual(before);
    expect(breaker.state(`127.0.0.1:${server.port}`)?.state ?? 'closed').toBe('closed');
  });

  it('node-redis with socketTimeout, 5 plain and 5 guarded clients on a frozen node: plain ones redial after every timeout, guarded ones open the breaker and probe once per window; after SIGCONT one probe brings them all back', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 500 });
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const raw = countingLookup();
    const gated = countingLookup();
    // socketTimeout: node-redis's only bound on a silent server (an idle timeout, off by default).
    // node-redis 5's default strategy closes the client for good on a socket timeout; a service
    // that wants it back gives a strategy, here node-redis 4's default (50 ms steps up to 500 ms).
    const reconnectStrategy = (retries: number): number => Math.min(retries * 50, 500);
    const socket = { host: 'localhost', port: server.port, socketTimeout: 300, reconnectStrategy };
    const defaults = Array.from({ length: CLIENTS }, () => createClient({ socket: { ...socket, lookup: raw.lookup } as never }));
    const guarded = Array.from({ length: CLIENTS }, () => guard.nodeRedis(createClient, { socket: { ...socket, lookup: gated.lookup } }));
    for (const c of [...defaults, ...guarded]) c.on('error', () => {});
    cleanups.push(() => [...defaults, ...guarded].forEach((c) => c.isOpen && c.destroy()));
    await Promise.all([...defaults, ...guarded].map((c) => c.connect()));
    // No traffic: node-redis's socket timeout is Node's idle timeout, which every write resets,
    // so it fires on a frozen node only for a client that is not writing. Idle clients also time
    // out on a healthy node (and reconnect at once, successfully): only the frozen span is counted.
    const [raw0, gated0] = [raw.calls, gated.calls];

    await server.freeze();
    await sleep(2_500);
    const rawFrozen = raw.calls - raw0;
    const gatedFrozen = gated.calls - gated0;
    // Unguarded: each client redials within 0..500 ms of each 300 ms timeout, again and again.
    expect(rawFrozen).toBeGreaterThan(3 * CLIENTS);
    // Guarded: the first redial of each client (one round: they all time out together), then at
    // most one probe per 500 ms window, plus a window of slack for a loaded machine.
    expect(gatedFrozen).toBeLessThanOrEqual(CLIENTS + Math.ceil(2_500 / 500) + 1);
    expect(breaker.state(`localhost:${server.port}`)?.state).not.toBe('closed');

    const stats = breaker.stats();
    await server.thaw();
    await expect.poll(async () => (await Promise.all(guarded.map((c) => within(c.ping(), 250)))).join(), { timeout: 5_000, interval: 50 }).toBe(Array(CLIENTS).fill('PONG').join());
    expect(breaker.state(`localhost:${server.port}`)?.state).toBe('closed');
    // Back after one probe: at most one more granted, and the node never opened again.
    expect(breaker.stats().probesGranted - stats.probesGranted).toBeLessThanOrEqual(1);
    expect(breaker.stats().opened).toBe(stats.opened);
  });

  it('ioredis, 5 guarded and 5 default clients created while the node is frozen: default ones stay in their never-answered ready check on one dial each; guarded ones fail that dial after connectTimeout (counted by the breaker) and redial at most once per round; all ready after SIGCONT', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 300 });
    const guard = new RedisGuard({ breaker, connectTimeout: 300 });
    const rawIo = countingConnector();
    const gatedIo = countingConnector();
    await server.freeze();
    const defaults = Array.from({ length: CLIENTS }, () => new Redis({ host: '127.0.0.1', port: server.port, Connector: rawIo.Connector as never }));
    const guarded = Array.from({ length: CLIENTS }, () => guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, Connector: gatedIo.Connector }));
    const all = [...defaults, ...guarded];
    for (const c of all) c.on('error', () => {});
    cleanups.push(() => all.forEach((c) => c.disconnect()));
    await sleep(1_500);
    // Default: TCP connected (ioredis's connectTimeout is over); the ready check (INFO) waits for
    // a reply with no bound. Guarded: the whole dial is bounded, so none is left waiting in it.
    expect(defaults.map((c) => c.status)).toEqual(Array(CLIENTS).fill('connect'));
    expect(guarded.filter((c) => c.status === 'connect').length).toBeLessThanOrEqual(1); // a redial in flight
    expect(rawIo.dials).toBe(CLIENTS);
    // The first dials (one round), then at most one per 300 ms window, plus one of slack.
    expect(gatedIo.dials).toBeLessThanOrEqual(CLIENTS + Math.ceil(1_500 / 300) + 1);
    expect(breaker.stats().failed).toBeGreaterThanOrEqual(1);
    await server.thaw();
    expect(await Promise.all(all.map((c) => c.ping()))).toEqual(Array(2 * CLIENTS).fill('PONG'));
    expect(rawIo.dials).toBe(CLIENTS);
    expect(breaker.state(`127.0.0.1:${server.port}`)?.state ?? 'closed').toBe('closed');
  });
});
