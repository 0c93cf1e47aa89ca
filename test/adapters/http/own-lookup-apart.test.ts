/**
 * A request's own `lookup` is its own resolver: what it answers says nothing of the name as other
 * clients resolve it. The http agents dial a name as one breaker entry (`host:port`, Node's
 * connect doing the lookup), and a lookup of one client's that answered `ENOTFOUND` counted
 * there: about 1.5 s later every other client of the shared breaker was refused the live name,
 * GuardedAgent (undici) too, whose own lookup worked (an outside review: 5 of 5 right requests
 * refused, each adapter; Node's agent served 5 of 5). The README promised "a client whose
 * resolver answers ENOTFOUND gets the name refused for itself only". Now a name resolved by a
 * lookup of the request's own is filed apart for that function (as `connect()` files its
 * lookups): its failures refuse that resolver's requests only. An operator's isolation of the
 * name still holds for them.
 */
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import nodeHttp from 'node:http';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { connect } from '../../../src/guard/connect.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { countingServer, get, guardedHttp, leakChecked, plain } from './helpers.js';

const cleanups = leakChecked();

const failingLookup = ((host: string, _opts: unknown, cb: (err: Error) => void) => {
  setImmediate(() => cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname: host })));
}) as unknown as net.LookupFunction;

/** A resolver of the test's: every name is 127.0.0.1. */
const goodLookup = ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
  if (opts?.all === true) cb(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
}) as unknown as net.LookupFunction;

const code = (p: Promise<unknown>): Promise<string> => p.then(
  () => 'ok',
  (e: { code?: string }) => e.code ?? 'error',
);

describe("GuardedHttpAgent: a request's own lookup failing refuses that resolver's requests only", () => {
  it('8 requests with a failing lookup on one agent; then every other client of the breaker is served (was: refused)', async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const url = `http://dialguard-own-lookup.test:${server.port}/`;
    const bad = guardedHttp({ breaker });
    const badCodes: string[] = [];
    for (let i = 0; i < 8; i++) badCodes.push(await code(get(url, bad, { lookup: failingLookup })));
    expect(badCodes[0]).toBe('ENOTFOUND');
    // Its own resolver's name is refused to it, as it would be for dns.lookup's failures.
    expect(badCodes.slice(1).every((c) => c === 'ENOTFOUND' || c === 'DIALGUARD_HOST_UNAVAILABLE')).toBe(true);
    expect(badCodes).toContain('DIALGUARD_HOST_UNAVAILABLE');

    // The name's own entry, which every client resolving it by dns.lookup asks, heard nothing.
    expect(breaker.state(`dialguard-own-lookup.test:${server.port}`)?.failures ?? 0).toBe(0);
    // Another GuardedHttpAgent of the breaker, its requests resolving through a working lookup.
    const right = guardedHttp({ breaker });
    const rightCodes: string[] = [];
    for (let i = 0; i < 5; i++) rightCodes.push(await code(get(url, right, { lookup: goodLookup })));
    expect(rightCodes).toEqual(Array(5).fill('ok')); // was: 5 of 5 DIALGUARD_HOST_UNAVAILABLE
    // undici's GuardedAgent and connect() on the same breaker, resolving the name themselves.
    const agent = new GuardedAgent({ breaker, socket: { lookup: goodLookup } });
    cleanups.push(() => agent.destroy());
    const { request } = await import('undici');
    expect(await code(request(url, { dispatcher: agent }).then((r) => r.body.dump()))).toBe('ok');
    expect(await code(connect({ host: 'dialguard-own-lookup.test', port: server.port }, { breaker, socket: { lookup: goodLookup }, perAddress: false }).then((s) => s.destroy()))).toBe('ok');
    // Node's own agent, for the same requests: the bad one fails, the right ones are served.
    const node = plain(new nodeHttp.Agent());
    expect(await code(get(url, node, { lookup: failingLookup }))).toBe('ENOTFOUND');
    expect(await code(get(url, node, { lookup: goodLookup }))).toBe('ok');
  });

  it("an operator's isolation of the name refuses requests resolving it with a lookup of their own too", async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const breaker = new HostBreaker();
    const url = `http://dialguard-own-lookup.test:${server.port}/`;
    const agent = guardedHttp({ breaker });
    const release = breaker.isolate(`dialguard-own-lookup.test:${server.port}`);
    expect(await code(get(url, agent, { lookup: goodLookup }))).toBe('DIALGUARD_HOST_UNAVAILABLE');
    release();
    expect(await code(get(url, agent, { lookup: goodLookup }))).toBe('ok');
    expect(server.connections).toBe(1);
  });
});
