/**
 * RedisGuard during the first seconds of an outage, with the breaker's defaults (minOutage
 * 1 500 ms: a blip must never open the node, issue 11). While the breaker is still closed, the
 * process's clients of one node redial it as one: one dial per round, rounds spaced by the guard's
 * jittered backoff, whatever the number of clients (seed 002: a fleet of reconnect loops is the
 * storm). Real `redis-server`, killed; dials counted where they happen (node-redis: the resolver
 * each TCP attempt asks; ioredis: every TCP socket the process opens).
 */
import { createHook } from 'node:async_hooks';
import diagnosticsChannel from 'node:diagnostics_channel';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { countingLookup } from '../http/helpers.js';
import { RedisServer, freePort } from './redis-server.js';

const cleanups = leakCheckEach();
const CLIENTS = 10;
/** The breaker's default minimum outage: the window in which it cannot open yet. */
const MIN_OUTAGE = 1_500;
/**
 * Most dials in the first 1.5 s: the lost connections' first redial, then rounds spaced by the
 * backoff (equal jitter from 50 ms, growing by 50 ms a round: at least 25, 50, 75, 100... ms), so
 * at most 10 rounds fit in 1.5 s; 2 of slack for a loaded machine. Ten clients' own loops make ~50.
 * (While the spacing doubled, at most 6 fit and this was 8; a node back from a 1 s restart then
 * waited 135-465 ms for its next round, plain ioredis 32 ms.)
 */
const MOST_DIALS = 12;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Counts every TCP socket this process opens (net.connect publishes each one). */
function countSockets(): { readonly count: number } {
  let count = 0;
  const onSocket = (): void => {
    count++;
  };
  diagnosticsChannel.subscribe('net.client.socket', onSocket);
  cleanups.push(() => diagnosticsChannel.unsubscribe('net.client.socket', onSocket));
  return {
    get count() {
      return count;
    },
  };
}

/**
 * Connects node-redis `clients`, kills `server`, and counts the lookups (each a dial) they make in
 * the first MIN_OUTAGE after the kill.
 */
async function redialsOnKill(server: RedisServer, clients: ReturnType<typeof createClient>[], dials: { readonly calls: number }): Promise<number> {
  for (const c of clients) c.on('error', () => {});
  cleanups.push(() => clients.forEach((c) => c.isOpen && c.destroy()));
  await Promise.all(clients.map((c) => c.connect()));
  const before = dials.calls;
  await server.kill();
  await sleep(MIN_OUTAGE);
  return dials.calls - before;
}

describe('RedisGuard, the first 1.5 s of an outage (breaker defaults, still closed): one redial per backoff round per process', () => {
  it(`node-redis, a killed node: 10 guarded clients dial it at most ${MOST_DIALS} times in the first 1.5 s, not once per client loop`, async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const dials = countingLookup();
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const clients = Array.from({ length: CLIENTS }, () => guard.nodeRedis(createClient, { socket: { host: 'localhost', port: server.port, lookup: dials.lookup } }));
    const redials = await redialsOnKill(server, clients, dials);
    expect(redials).toBeGreaterThanOrEqual(1);
    expect(redials).toBeLessThanOrEqual(MOST_DIALS);
  });

  it(`ioredis, a killed node: 10 guarded clients dial it at most ${MOST_DIALS} times in the first 1.5 s, not once per client loop`, async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const clients = Array.from({ length: CLIENTS }, () => guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of clients) c.on('error', () => {});
    cleanups.push(() => clients.forEach((c) => c.disconnect()));
    await Promise.all(clients.map((c) => c.ping()));
    const sockets = countSockets();
    await server.kill();
    await sleep(MIN_OUTAGE);
    expect(sockets.count).toBeGreaterThanOrEqual(1);
    expect(sockets.count).toBeLessThanOrEqual(MOST_DIALS);
  });

  it(`five guards on the shared default breaker, two node-redis clients each, a killed node: at most ${MOST_DIALS} dials in the first 1.5 s, not one series of rounds per guard`, async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const dials = countingLookup();
    // No breaker option: every guard reports to the process-wide sharedBreaker(), so their rounds are one.
    const guards = Array.from({ length: 5 }, () => new RedisGuard());
    const clients = guards.flatMap((guard) => [0, 1].map(() => guard.nodeRedis(createClient, { socket: { host: 'localhost', port: server.port, lookup: dials.lookup } })));
    const redials = await redialsOnKill(server, clients, dials);
    expect(redials).toBeGreaterThanOrEqual(1);
    expect(redials).toBeLessThanOrEqual(MOST_DIALS);
  });

  it('a restart of 300 ms (a blip): 10 node-redis and 10 ioredis guarded clients all serve again within 2 s of it, and the node never opens', async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const breaker = new HostBreaker();
    const guard = new RedisGuard({ breaker });
    const nr = Array.from({ length: CLIENTS }, () => guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port } }));
    const io = Array.from({ length: CLIENTS }, () => guard.ioredis(Redis, { host: '127.0.0.1', port: server.port, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of [...nr, ...io]) c.on('error', () => {});
    cleanups.push(() => nr.forEach((c) => c.isOpen && c.destroy()), () => io.forEach((c) => c.disconnect()));
    await Promise.all(nr.map((c) => c.connect()));
    await Promise.all(io.map((c) => c.ping()));
    await server.kill();
    await sleep(300);
    await server.start();
    const back = performance.now();
    const pings = await Promise.all([...nr.map((c) => c.ping()), ...io.map((c) => c.ping())]);
    expect(pings.every((p) => p === 'PONG')).toBe(true);
    expect(performance.now() - back).toBeLessThan(2_000);
    expect(breaker.stats().opened).toBe(0);
    expect(breaker.state(`127.0.0.1:${server.port}`)?.state ?? 'closed').toBe('closed');
  });
});

describe('RedisGuard: node-redis on its default strategy, back after a restart', () => {
  it("a client failed at the gate between rounds has dialled nothing: its own strategy's doubling does not pace it, the rounds do (it was back ~530 ms after a 1 s restart, every time; now with the next round)", async () => {
    const server = await new RedisServer(await freePort()).start();
    cleanups.push(() => server.kill());
    const client = new RedisGuard({ breaker: new HostBreaker() }).nodeRedis(createClient, { socket: { host: '127.0.0.1', port: server.port } });
    client.on('error', () => {});
    cleanups.push(() => client.isOpen && client.destroy());
    await client.connect();
    let readyAt = 0;
    client.on('ready', () => (readyAt = performance.now()));
    await server.kill();
    await sleep(1_000);
    await server.start();
    const up = performance.now();
    await expect.poll(() => readyAt, { timeout: 3_000, interval: 5 }).toBeGreaterThan(0);
    // The rounds' spacing 1 s into an outage: under 300 ms (growing 50 ms a round). node-redis's
    // own floor, doubled by each failure at the gate: 400, 800, 1 600 ms...
    expect(readyAt - up).toBeLessThan(350);
  });
});

describe('RedisGuard: a client closed while it waits for another client\'s redial', () => {
  it('ioredis: two clients disconnected while one redial is out (held by its peer) and the other waits for it: the waiter never dials', async () => {
    const port = await freePort();
    // connectTimeout 1 s: the guard fails a held dial after it, so the clients are disconnected
    // (at ~300 ms) while the round is still out.
    const guard = new RedisGuard({ breaker: new HostBreaker(), connectTimeout: 1_000 });
    const clients = [0, 1].map(() => guard.ioredis(Redis, { host: '127.0.0.1', port, maxRetriesPerRequest: null, disconnectTimeout: 50 }));
    for (const c of clients) c.on('error', () => {});
    cleanups.push(() => clients.forEach((c) => c.disconnect()));
    await sleep(150); // both dials refused: the node's redials go in rounds
    const peer = await acceptAndHold({ port });
    cleanups.push(() => peer.close());
    // One client leads the next round: TCP connects, ioredis's ready check is never answered.
    await expect.poll(() => peer.attempts, { timeout: 2_000, interval: 10 }).toBe(1);
    await sleep(300); // the other has come to dial and waits for that round
    for (const c of clients) c.disconnect();
    // The disconnected lead is never reported: it is let go after connectTimeout + 1 s, its
    // waiter is told to dial, and must not.
    await sleep(2_000);
    expect(peer.attempts).toBe(1);
  });
});

describe('RedisGuard: a node-redis client whose connect timed out while it waited for another client\'s redial', () => {
  it('its wait, longer than its own connect timeout, takes no permit and dials nothing; destroyed while waiting, it leaves no dial behind', async () => {
    const port = await freePort();
    const breaker = new HostBreaker();
    // The leader: an ioredis client whose dial an accept-and-hold peer holds in its handshake for
    // its guard's whole 3 s bound. Both guards share the breaker, so their clients share rounds.
    const guard = new RedisGuard({ breaker, connectTimeout: 3_000 });
    const io = guard.ioredis(Redis, { host: '127.0.0.1', port, maxRetriesPerRequest: null, disconnectTimeout: 50 });
    io.on('error', () => {});
    cleanups.push(() => io.disconnect());
    await expect.poll(() => breaker.stats().failed, { timeout: 2_000, interval: 10 }).toBe(1); // refused: rounds begin
    const peer = await acceptAndHold({ port });
    cleanups.push(() => peer.close());
    // ioredis leads the next round: TCP connects, and the handshake is held.
    await expect.poll(() => peer.attempts, { timeout: 2_000, interval: 10 }).toBe(1);
    const admitted = breaker.stats().succeeded + breaker.stats().failed + breaker.stats().abandoned;
    // node-redis with a 1 s connect timeout waits for that round; its own connect timeout fires
    // during the wait, which then must take no permit and dial nothing.
    const nr = new RedisGuard({ breaker, connectTimeout: 1_000 }).nodeRedis(createClient, { socket: { host: '127.0.0.1', port } });
    nr.on('error', () => {});
    cleanups.push(() => nr.isOpen && nr.destroy());
    nr.connect().catch(() => {});
    await sleep(1_500);
    expect(breaker.stats().failed).toBe(1);
    expect(peer.attempts).toBe(1);
    nr.destroy();
    io.disconnect(); // the lead given up: abandoned, nobody's failure
    await sleep(100);
    const after = breaker.stats();
    expect(after.failed).toBe(1);
    expect(after.succeeded + after.failed + after.abandoned - admitted).toBe(1); // the lead's dial only
    expect(peer.attempts).toBe(1); // was 2: the destroyed client dialled once the round ended
  });
});

describe('RedisGuard with node-redis: destroy() leaves no timer behind', () => {
  it('a client destroyed while waiting out a 10 s open window leaves no timer running 2.5 s later (node-redis cannot cancel a wait: the guard never hands it one over 2 s)', async () => {
    // Every timer created from here on: node-redis's reconnect wait is one of them.
    const timers: NodeJS.Timeout[] = [];
    const hook = createHook({
      init(_id, type, _trigger, resource) {
        if (type === 'Timeout') timers.push(resource as NodeJS.Timeout);
      },
    }).enable();
    cleanups.push(() => hook.disable());
    const port = await freePort();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 10_000 });
    const guard = new RedisGuard({ breaker });
    const client = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port } });
    client.on('error', () => {});
    client.connect().catch(() => {});
    // The dial is refused (ECONNREFUSED), the node opens for 10 s, the client is told to wait.
    await expect.poll(() => breaker.state(`127.0.0.1:${port}`)?.state, { timeout: 2_000, interval: 20 }).toBe('open');
    await sleep(100);
    client.destroy();
    await sleep(2_500);
    hook.disable();
    const running = timers.filter((t) => t.hasRef() && !(t as unknown as { _destroyed: boolean })._destroyed);
    expect(running.map((t) => (t as unknown as { _idleTimeout: number })._idleTimeout)).toEqual([]);
    expect(breaker.stats().failed).toBe(1);
  });
});
