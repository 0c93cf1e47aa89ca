/**
 * GuardedHttpAgent / GuardedHttpsAgent with node:http, axios and got against real servers and
 * fault peers on loopback. Every test counts: connections the server accepted, dials the client
 * made (a counting resolver, where the peer is a closed port that can count nothing), requests.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import axios from 'axios';
import got from 'got';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent, GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { ConnectTimeoutError, HostUnavailableError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { lookupBreaker } from '../../../src/guard/addresses.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { acceptAndHold, refusing } from '../../../src/testing/tcp-peers.js';
import { TEST_CERT } from '../../../src/testing/test-cert.js';
import { countingLookup, countingServer, failure, get, guardedHttp, guardedHttps, leakChecked, manualBreaker, plain } from './helpers.js';

const cleanups = leakChecked();

/** Node's agent fields that @types/node leaves out. */
function books(agent: http.Agent): { totalSocketCount: number; options: object } {
  return agent as unknown as { totalSocketCount: number; options: object };
}

/** A lookup that answers 127.0.0.1 after `ms` (a slow resolver: the dial is in flight that long). */
function slowLookup(ms: number): net.LookupFunction {
  return ((_h: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) => {
    setTimeout(() => (opts?.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)), ms);
  }) as unknown as net.LookupFunction;
}

describe('GuardedHttpAgent: Node agent behaviour unchanged on a healthy host', () => {
  it('keep-alive reuse: 1 000 sequential requests open as many connections as a plain agent (one)', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const raw = plain(new http.Agent({ keepAlive: true }));
    for (let i = 0; i < 1_000; i++) await get(server.origin, raw);
    const rawConnections = server.connections;
    const agent = guardedHttp({ keepAlive: true });
    for (let i = 0; i < 1_000; i++) await get(server.origin, agent);
    expect(rawConnections).toBe(1);
    expect(server.connections - rawConnections).toBe(rawConnections);
    expect(server.requests).toBe(2_000);
  });

  it('keep-alive reuse through axios and got: 200 sequential requests each on one connection', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const agent = guardedHttp({ keepAlive: true });
    const client = axios.create({ httpAgent: agent });
    for (let i = 0; i < 200; i++) expect((await client.get(server.origin)).data).toBe('ok');
    expect(server.connections).toBe(1);
    const gotClient = got.extend({ agent: { http: agent } });
    for (let i = 0; i < 200; i++) expect((await gotClient(server.origin)).body).toBe('ok');
    expect(server.connections).toBe(1);
  });

  it('https keep-alive: 200 sequential requests on one TLS connection, as a plain https.Agent', async () => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    const agent = guardedHttps({ keepAlive: true });
    for (let i = 0; i < 200; i++) expect(await get(server.origin, agent)).toBe('ok');
    expect(server.connections).toBe(1);
    expect(agent).toBeInstanceOf(https.Agent);
  });

  it('the healthy path costs nothing per request: 16 got callers x 25 requests over https keep-alive ask the breaker once per connection, never per request', async () => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    const breaker = new HostBreaker();
    const agent = guardedHttps({ keepAlive: true, breaker });
    const client = got.extend({ agent: { https: agent }, https: { certificateAuthority: TEST_CERT }, retry: { limit: 0 } });
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let i = 0; i < 25; i++) expect((await client(server.origin)).body).toBe('ok');
    }));
    expect(server.requests).toBe(400);
    const s = breaker.stats();
    // Every dial asked the breaker and reported once; a reused socket never reached the guard.
    expect(s.succeeded + s.failed + s.abandoned + s.stale).toBe(server.connections);
    expect(server.connections).toBeLessThanOrEqual(16);
  });

  it('maxSockets 2: 20 concurrent requests open 2 connections, as a plain agent does', async () => {
    const server = await countingServer({
      handler: (req, res) => {
        req.resume();
        setTimeout(() => res.end('ok'), 5);
      },
    });
    cleanups.push(() => server.close());
    const raw = plain(new http.Agent({ keepAlive: true, maxSockets: 2 }));
    await Promise.all(Array.from({ length: 20 }, () => get(server.origin, raw)));
    const rawConnections = server.connections;
    const agent = guardedHttp({ keepAlive: true, maxSockets: 2 });
    await Promise.all(Array.from({ length: 20 }, () => get(server.origin, agent)));
    expect(rawConnections).toBe(2);
    expect(server.connections - rawConnections).toBe(2);
    expect(server.requests).toBe(40);
  });

  it('maxTotalSockets 1 across two origins: one connection at a time, every request served', async () => {
    const a = await countingServer();
    const b = await countingServer();
    cleanups.push(() => a.close(), () => b.close());
    const agent = guardedHttp({ maxTotalSockets: 1 });
    const bodies = await Promise.all(Array.from({ length: 10 }, (_, i) => get((i % 2 === 0 ? a : b).origin, agent)));
    expect(bodies).toEqual(Array(10).fill('ok'));
    expect(a.requests + b.requests).toBe(10);
    expect(books(agent).totalSocketCount).toBeLessThanOrEqual(1);
  });

  it('options: dialguard keys never reach Node; invalid ones throw naming the option', () => {
    const agent = guardedHttp({ keepAlive: true, connectTimeout: 2_000 });
    expect(books(agent).options).not.toHaveProperty('connectTimeout');
    expect(books(agent).options).not.toHaveProperty('breaker');
    expect(() => new GuardedHttpAgent({ connectTimeout: 0 })).toThrow(/connectTimeout/);
    expect(() => new GuardedHttpsAgent({ breaker: {} as HostBreaker })).toThrow(/breaker/);
    expect(() => agent.createConnection({ host: '127.0.0.1', port: 1 })).toThrow(TypeError);
  });
});

describe('GuardedHttpAgent: a dead host costs one bounded dial, not one per request', () => {
  it('a refused port: one dial, then HostUnavailableError in microseconds, as the error (node:http) or its cause (axios, got)', async () => {
    const peer = await refusing();
    const counter = countingLookup();
    const { breaker } = manualBreaker(1);
    const agent = guardedHttp({ breaker, lookup: counter.lookup });
    const url = `http://localhost:${peer.port}/`;
    expect((await failure(get(url, agent))).error).toMatchObject({ code: 'ECONNREFUSED' });
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const { error, ms } = await failure(get(url, agent));
      expect(error).toBeInstanceOf(HostUnavailableError);
      times.push(ms);
    }
    const axiosError = (await failure(axios.get(url, { httpAgent: agent }))).error as { cause?: unknown; code?: string };
    expect(axiosError.cause).toBeInstanceOf(HostUnavailableError);
    expect(axiosError.code).toBe('DIALGUARD_HOST_UNAVAILABLE');
    const gotError = (await failure(got(url, { agent: { http: agent } }))).error as { cause?: unknown; code?: string };
    expect(gotError.cause ?? gotError).toMatchObject({ code: 'DIALGUARD_HOST_UNAVAILABLE' });
    expect(counter.calls).toBe(1); // one dial for 52 requests
    times.sort((x, y) => x - y);
    expect(times[25]).toBeLessThan(5); // a refusal does no I/O (typically ~30 µs here)
  });

  it('20 concurrent requests to an unproven refused port: one dial, not 20 (plain agent: 20)', async () => {
    const peer = await refusing();
    const rawCounter = countingLookup();
    const raw = plain(new http.Agent({ lookup: rawCounter.lookup } as http.AgentOptions));
    await Promise.all(Array.from({ length: 20 }, () => failure(get(`http://localhost:${peer.port}/`, raw))));
    const counter = countingLookup();
    const agent = guardedHttp({ lookup: counter.lookup });
    const errors = await Promise.all(Array.from({ length: 20 }, () => failure(get(`http://localhost:${peer.port}/`, agent))));
    for (const { error } of errors) expect(error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(rawCounter.calls).toBe(20);
    expect(counter.calls).toBe(1);
  });

  it('maxSockets 1 and a dead host: every queued request fails, none hangs', async () => {
    const peer = await refusing();
    const counter = countingLookup();
    const { breaker } = manualBreaker(1);
    const agent = guardedHttp({ breaker, lookup: counter.lookup, maxSockets: 1 });
    const results = await Promise.all(Array.from({ length: 8 }, () => failure(get(`http://localhost:${peer.port}/`, agent))));
    // The first dial's error, shared by a request that joined it, then the breaker's refusal.
    expect(results[0]!.error).toMatchObject({ code: 'ECONNREFUSED' });
    for (const { error } of results) expect(['ECONNREFUSED', 'DIALGUARD_HOST_UNAVAILABLE']).toContain((error as { code?: string }).code);
    expect(results.at(-1)!.error).toBeInstanceOf(HostUnavailableError);
    expect(counter.calls).toBe(1);
    expect(books(agent).totalSocketCount).toBe(0);
    expect(Object.keys(agent.requests)).toEqual([]);
  });

  it("got retrying ECONNREFUSED stops at the breaker's refusal: one dial, not six (plain agent: six)", async () => {
    const peer = await refusing();
    const url = `http://localhost:${peer.port}/`;
    const retry = { limit: 5, calculateDelay: ({ computedValue }: { computedValue: number }) => (computedValue === 0 ? 0 : 1) };
    const rawCounter = countingLookup();
    const raw = plain(new http.Agent({ lookup: rawCounter.lookup } as http.AgentOptions));
    const rawError = (await failure(got(url, { agent: { http: raw }, retry }))).error as { code?: string };
    expect(rawError.code).toBe('ECONNREFUSED');
    expect(rawCounter.calls).toBe(6);
    const counter = countingLookup();
    const agent = guardedHttp({ breaker: manualBreaker(1).breaker, lookup: counter.lookup });
    let retries = 0;
    const error = (await failure(got(url, { agent: { http: agent }, retry, hooks: { beforeRetry: [() => void retries++] } }))).error as { code?: string };
    expect(error.code).toBe('DIALGUARD_HOST_UNAVAILABLE'); // not in got's retry.errorCodes: no further attempt
    expect(retries).toBe(1);
    expect(counter.calls).toBe(1);
  });

  it('accept-and-hold over https: the TLS phase times out once per dial, then refusals; the peer sees 2 connections for 10 requests', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const { breaker } = manualBreaker(2);
    const agent = guardedHttps({ breaker, connectTimeout: 150 });
    const url = `https://127.0.0.1:${peer.port}/`;
    for (let i = 0; i < 2; i++) {
      const { error } = await failure(get(url, agent));
      expect(error).toBeInstanceOf(ConnectTimeoutError);
      expect((error as ConnectTimeoutError).phase).toBe('tls');
    }
    for (let i = 0; i < 8; i++) expect((await failure(get(url, agent))).error).toBeInstanceOf(HostUnavailableError);
    expect(peer.attempts).toBe(2);
  });

  it('accept-and-hold over plain http: the dial succeeded, so request timeouts never open the host', async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const { breaker } = manualBreaker(1);
    const agent = guardedHttp({ breaker });
    for (let i = 0; i < 3; i++) {
      const { error } = await failure(axios.get(`http://${peer.address}/`, { httpAgent: agent, timeout: 50 }));
      expect(error).toMatchObject({ code: 'ECONNABORTED' });
    }
    expect(peer.attempts).toBe(3);
    expect(breaker.state(peer.address)?.state ?? 'closed').toBe('closed');
  });
});

describe('GuardedHttpAgent: restarts, and requests that leave while their dial is in flight', () => {
  it('a server restart shorter than the threshold: refused while down, served after, the host never opened', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const { breaker } = manualBreaker(3);
    const agent = guardedHttp({ breaker });
    expect(await get(server.origin, agent)).toBe('ok');
    await server.kill();
    expect((await failure(get(server.origin, agent))).error).toMatchObject({ code: 'ECONNREFUSED' });
    await server.restart();
    expect(await get(server.origin, agent)).toBe('ok');
    expect(server.connections).toBe(2);
    expect(breaker.state(server.address)?.state).toBe('closed');
  });

  it('a server restart past the threshold: refused without dialling until the window ends, then one probe and served', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const { clock, breaker } = manualBreaker(1, 30_000);
    const agent = guardedHttp({ breaker });
    await server.kill();
    expect((await failure(get(server.origin, agent))).error).toMatchObject({ code: 'ECONNREFUSED' });
    await server.restart();
    expect((await failure(get(server.origin, agent))).error).toBeInstanceOf(HostUnavailableError);
    expect(server.connections).toBe(0);
    clock.advance(30_000);
    expect(await get(server.origin, agent)).toBe('ok');
    expect(server.connections).toBe(1);
    expect(breaker.state(server.address)?.state).toBe('closed');
  });

  it('a request that gives up mid-dial does not cancel the dial: the dial completes and the breaker records it', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const breaker = new HostBreaker();
    const lookup = slowLookup(150);
    const agent = guardedHttp({ breaker, keepAlive: true, lookup });
    // A name resolved by a lookup of the agent's own is filed apart for that resolver.
    const filed = lookupBreaker(breaker, lookup);
    const url = `http://localhost:${server.port}/`;
    const left = await failure(axios.get(url, { httpAgent: agent, signal: AbortSignal.timeout(30) }));
    expect(left.error).toMatchObject({ code: 'ERR_CANCELED' });
    // The dial goes on and connects: recorded as a success, never abandoned. Node's agent then
    // closes the socket its request no longer wants (it has no request to keep alive for).
    await expect.poll(() => filed.stats().succeeded, { timeout: 2_000 }).toBe(1);
    expect(filed.stats().abandoned).toBe(0);
    expect(server.connections).toBe(1);
    expect(server.requests).toBe(0);
  });

  it('agent.destroy() while a dial is in flight: its request fails with ECONNRESET and its socket is closed', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const agent = new GuardedHttpAgent({ breaker: new HostBreaker(), lookup: slowLookup(50) });
    const pending = failure(get(`http://localhost:${server.port}/`, agent));
    agent.destroy();
    expect((await pending).error).toMatchObject({ code: 'ECONNRESET' });
    expect(server.requests).toBe(0);
  });

  it("a certificate the client does not trust: the request fails with Node's own TLS error, and no further dial is held back by a scout", async () => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    const agent = guardedHttps({ ca: undefined });
    const { error } = await failure(get(server.origin, agent));
    expect((error as { code?: string }).code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
    expect(server.connections).toBe(1);
    const trusting = guardedHttps({ rejectUnauthorized: false, keepAlive: true });
    expect(await get(server.origin, trusting)).toBe('ok');
  });

  it('two concurrent requests to one host with their own TLS options: the one that trusts the certificate is served, whatever the other\'s scout met (as Node\'s agent)', async () => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    // No `ca` key at all on the agent: Node lays the agent's options over each request's.
    const agent = plain(new GuardedHttpsAgent({ connectTimeout: 1_000, breaker: new HostBreaker(), keepAlive: true }));
    const [untrusting, trusting] = await Promise.allSettled([get(server.origin, agent), get(server.origin, agent, { ca: TEST_CERT } as https.RequestOptions)]);
    expect(untrusting.status).toBe('rejected');
    expect(trusting).toEqual({ status: 'fulfilled', value: 'ok' }); // was: the other's DEPTH_ZERO_SELF_SIGNED_CERT, never dialled
    expect(server.connections).toBe(2);
  });

  it('IPv6 loopback: served through the guard, a refused [::1] port refused by the breaker after one dial', async () => {
    const server = http.createServer((_req, res) => res.end('ok6'));
    await new Promise<void>((resolve) => server.listen(0, '::1', () => resolve()));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.address() as net.AddressInfo).port;
    const { breaker } = manualBreaker(1);
    const agent = guardedHttp({ breaker });
    expect(await get(`http://[::1]:${port}/`, agent)).toBe('ok6');
    const dead = await refusing({ host: '::1' });
    expect((await failure(get(`http://[::1]:${dead.port}/`, agent))).error).toMatchObject({ code: 'ECONNREFUSED' });
    const refused = (await failure(get(`http://[::1]:${dead.port}/`, agent))).error as HostUnavailableError;
    expect(refused).toBeInstanceOf(HostUnavailableError);
    expect(refused.host).toBe(`[::1]:${dead.port}`);
  });
});

describe('GuardedHttpAgent: Node agent bookkeeping around a dial, as Node keeps it', () => {
  it('maxTotalSockets 1: a dial to one origin fails, the request queued for another origin gets the slot (was: it hung)', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const dead = await refusing();
    cleanups.push(() => dead.close());
    const agent = guardedHttp({ maxTotalSockets: 1 });
    const [refused, served] = await Promise.allSettled([get(`http://${dead.address}/`, agent), get(`${server.origin}/`, agent)]);
    expect(refused.status).toBe('rejected');
    expect(served).toEqual({ status: 'fulfilled', value: 'ok' });
  });

  it('agent.destroy() while a dial is in flight: its request fails with ECONNRESET, the one queued behind it is dialled and served (was: it hung)', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const slow = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      void setTimeout(() => (opts?.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)), 200)) as unknown as net.LookupFunction;
    const agent = guardedHttp({ maxSockets: 1 });
    const url = `http://localhost:${server.port}/`;
    const first = get(url, agent, { lookup: slow }).then(() => 'served', (err: { code?: string }) => err.code);
    const second = get(url, agent, { lookup: slow }).then(() => 'served', (err: { code?: string }) => err.code);
    await new Promise((resolve) => setTimeout(resolve, 50));
    agent.destroy();
    expect(await first).toBe('ECONNRESET');
    expect(await second).toBe('served');
  });

  it('a request restricted to IPv6 finding no AAAA fails alone: the IPv4 request beside it is served and the host never opens', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const v4Only = ((_host: string, opts: { family?: number; all?: boolean }, cb: (...a: unknown[]) => void) => {
      if (opts?.family === 6) return void process.nextTick(cb, Object.assign(new Error('getaddrinfo ENOTFOUND localhost'), { code: 'ENOTFOUND' }));
      if (opts?.all === true) return void process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }]);
      process.nextTick(cb, null, '127.0.0.1', 4);
    }) as unknown as net.LookupFunction;
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const agent = guardedHttp({ breaker });
    const url = `http://localhost:${server.port}/`;
    const [v6, v4] = await Promise.allSettled([get(url, agent, { family: 6, lookup: v4Only }), get(url, agent, { family: 4, lookup: v4Only })]);
    expect(v6).toMatchObject({ status: 'rejected', reason: { code: 'ENOTFOUND' } });
    expect(v4).toEqual({ status: 'fulfilled', value: 'ok' }); // was: the scout's ENOTFOUND, never dialled
    for (let i = 0; i < 3; i++) await expect(get(url, agent, { family: 6, lookup: v4Only })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0 });
    expect(await get(url, agent, { lookup: v4Only })).toBe('ok');
  });

  it("a request's own timeout fires 'timeout' while its dial is still connecting, as Node's agent arms it (was: silent until connectTimeout)", async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const agent = guardedHttp({ connectTimeout: 3_000 });
    const t0 = performance.now();
    const what = await new Promise<string>((resolve) => {
      const req = http.get(`http://127.0.0.1:${hole.port}/`, { agent, timeout: 300 });
      req.on('timeout', () => {
        resolve('timeout');
        req.destroy();
      });
      req.on('error', () => resolve('error'));
    });
    expect(what).toBe('timeout');
    expect(performance.now() - t0).toBeLessThan(1_500);
  });
});


describe('a request that gives up while its dial is in flight (the peer accepts TCP and never answers TLS)', () => {
  /** One request through `agent` to `peer`, given up by `giveUp(req)`: what it ended with, and when. */
  async function givenUp(agent: http.Agent, port: number, giveUp: (req: http.ClientRequest) => void, options: https.RequestOptions = {}): Promise<{ error: Error & { code?: string }; ms: number }> {
    const t0 = performance.now();
    const error = await new Promise<Error>((resolve) => {
      const req = https.get(`https://127.0.0.1:${port}/`, { agent, ...options }, (res) => {
        res.resume();
        resolve(new Error(`answered ${res.statusCode}`));
      });
      req.on('error', resolve);
      giveUp(req);
    });
    return { error, ms: performance.now() - t0 };
  }

  it("fails at once with its own error, as with Node's agent (was: the whole connect timeout, then the dial's error); the dial runs on and is recorded", async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const agent = guardedHttps({ connectTimeout: 3_000, breaker });
    const destroyed = await givenUp(agent, peer.port, (req) => void setTimeout(() => req.destroy(new Error('gave up')), 100));
    expect(destroyed.error.message).toBe('gave up');
    expect(destroyed.ms).toBeLessThan(2_000);
    const signalled = await givenUp(agent, peer.port, () => {}, { signal: AbortSignal.timeout(100) });
    expect(signalled.error).toMatchObject({ code: 'ABORT_ERR' });
    expect(signalled.ms).toBeLessThan(2_000);
    const bare = await givenUp(agent, peer.port, (req) => void setTimeout(() => req.destroy(), 100));
    expect(bare.error).toMatchObject({ code: 'ECONNRESET', message: 'socket hang up' }); // Node's words for a reasonless destroy
    // The three requests shared one scout dial, which ran to its own end and opened the host.
    for (let i = 0; i < 400 && breaker.stats().failed === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(breaker.stats()).toMatchObject({ failed: 1, opened: 1 });
    expect(peer.attempts).toBe(1);
    expect(books(agent).totalSocketCount).toBe(0);
  });

  it("agent.destroy() fails a request whose dial is in flight at once, as Node's agent does, and gives the dial up: nothing counted, nothing left open (was: the whole connect timeout)", async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const agent = new GuardedHttpsAgent({ connectTimeout: 10_000, breaker, ca: TEST_CERT });
    const pending = givenUp(agent, peer.port, () => void setTimeout(() => agent.destroy(), 100));
    const { error, ms } = await pending;
    expect(error).toMatchObject({ code: 'ECONNRESET' });
    expect(ms).toBeLessThan(2_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(breaker.stats()).toMatchObject({ failed: 0, abandoned: 1 });
    expect(books(agent).totalSocketCount).toBe(0);
  });

  it("got's timeout.request and a req.setTimeout() fire during the dial (was: never, until connectTimeout)", async () => {
    const peer = await acceptAndHold();
    cleanups.push(() => peer.close());
    const agent = guardedHttps({ connectTimeout: 3_000 });
    const t0 = performance.now();
    const gotError = await got(`https://127.0.0.1:${peer.port}/`, { agent: { https: agent }, timeout: { request: 100 }, retry: { limit: 0 } }).catch((e: unknown) => e);
    expect(gotError).toMatchObject({ code: 'ETIMEDOUT' });
    expect(performance.now() - t0).toBeLessThan(2_000);
    const timedOut = await givenUp(agent, peer.port, (req) =>
      req.setTimeout(100, () => {
        req.destroy(new Error('setTimeout fired'));
      }),
    );
    expect(timedOut.error.message).toBe('setTimeout fired');
    expect(timedOut.ms).toBeLessThan(2_000);
  });
});
