/**
 * `req.setTimeout(ms)` called while the guarded agent dials runs as on Node's agent: from the
 * socket's TCP connect, never during the wait before it (here a 300 ms lookup, the agent's own
 * `lookup`). Was: armed at the call, it fired at 150 ms, during the lookup, where Node's does not,
 * and again after the socket came; got's `timeout.socket` failed a request Node's agent served.
 * Raw `http.Agent` in the same test, the same server and lookup.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import got from 'got';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent, GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { countingServer, leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** Resolves any name to 127.0.0.1 after 300 ms. */
const slowLookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
  void setTimeout(() => (opts.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)), 300)) as unknown as net.LookupFunction;

/** One GET with `setTimeout(150)` called at once; the 'timeout' events it saw and how it ended. */
function get(agent: http.Agent, port: number): Promise<{ timeouts: number; outcome: string }> {
  return new Promise((resolve) => {
    let timeouts = 0;
    const req = http.get({ host: 'slow.test', port, path: '/', agent, lookup: slowLookup }, (res) => {
      res.resume();
      res.on('end', () => setTimeout(() => resolve({ timeouts, outcome: String(res.statusCode) }), 300)); // a late 'timeout' would show
    });
    req.on('timeout', () => void timeouts++);
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ timeouts, outcome: String(e.code) }));
    req.setTimeout(150);
  });
}

function agents(): Array<[string, http.Agent]> {
  const raw = new http.Agent({ keepAlive: false });
  const guarded = new GuardedHttpAgent({ keepAlive: false, breaker: new HostBreaker(), connectTimeout: 2_000 });
  cleanups.push(() => raw.destroy(), () => guarded.destroy());
  return [
    ['raw', raw],
    ['guarded', guarded],
  ];
}

describe('node:http agents: req.setTimeout() during the dial', () => {
  it('an answer 50 ms after the socket: no timeout, either agent; 400 ms after it: one, either agent', async () => {
    for (const [answerAfter, expected] of [
      [50, { timeouts: 0, outcome: '200' }],
      [400, { timeouts: 1, outcome: '200' }],
    ] as const) {
      const server = await countingServer({ handler: (_req, res) => void setTimeout(() => res.end('ok'), answerAfter).unref() });
      cleanups.push(() => server.close());
      for (const [kind, agent] of agents()) expect({ kind, answerAfter, ...(await get(agent, server.port)) }).toEqual({ kind, answerAfter, ...expected });
    }
  });

  it("got's timeout.socket (150 ms) does not fail a request whose lookup takes 300 ms, either agent", async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    for (const [kind, agent] of agents()) {
      const res = await got(`http://slow.test:${server.port}/`, { agent: { http: agent }, dnsLookup: slowLookup as never, timeout: { socket: 150 }, retry: { limit: 0 } }).catch((e: { code?: string }) => ({ statusCode: e.code }));
      expect({ kind, status: res.statusCode }).toEqual({ kind, status: 200 });
    }
    expect(server.requests).toBe(2);
  });
});

describe('node:https agents: req.setTimeout() and another request\'s dial', () => {
  it("another request's dial connecting during this one's own slow lookup does not start its timeout (was: it fired at 150 ms, where raw Node's does not)", async () => {
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.address() as net.AddressInfo).port;
    const fastLookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      void (opts.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4))) as unknown as net.LookupFunction;
    const one = (agent: http.Agent, lookup: net.LookupFunction, timeout?: number): Promise<{ timeouts: number; outcome: string }> =>
      new Promise((resolve) => {
        let timeouts = 0;
        const req = https.get({ host: 'slow.test', port, path: '/', agent: agent as https.Agent, lookup, servername: 'localhost', ca: TEST_CERT }, (res) => {
          res.resume();
          res.on('end', () => setTimeout(() => resolve({ timeouts, outcome: String(res.statusCode) }), 200));
        });
        req.on('timeout', () => void timeouts++);
        req.on('error', (e: NodeJS.ErrnoException) => resolve({ timeouts, outcome: String(e.code) }));
        if (timeout !== undefined) req.setTimeout(timeout);
      });
    const raw = new https.Agent({ keepAlive: false });
    const guarded = new GuardedHttpsAgent({ keepAlive: false, breaker: new HostBreaker(), connectTimeout: 2_000 });
    cleanups.push(() => raw.destroy(), () => guarded.destroy());
    for (const [kind, agent] of [['raw', raw], ['guarded', guarded]] as const) {
      expect((await one(agent, fastLookup)).outcome).toBe('200'); // the host is proven: no dial waits behind another
      const [a, b] = await Promise.all([one(agent, fastLookup), one(agent, slowLookup, 150)]);
      expect({ kind, a, b }).toEqual({ kind, a: { timeouts: 0, outcome: '200' }, b: { timeouts: 0, outcome: '200' } });
    }
  });
});

describe('node:http agents: the timeout option of a request held behind the first dial', () => {
  it("a request's own `timeout` option, held behind the first dial of a new host, runs from its own dial (was: from the request, so it spanned both dials and fired where Node's agent served)", async () => {
    // Three requests together, 250 ms lookups, timeout 400: each of Node's has its own socket at
    // once, so its 400 ms spans one lookup; two of the guarded ones wait for the first dial and
    // then dial themselves (another 250 ms lookup).
    const lookup250 = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      void setTimeout(() => (opts.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)), 250)) as unknown as net.LookupFunction;
    const server = await countingServer();
    cleanups.push(() => server.close());
    const one = (agent: http.Agent, options: http.RequestOptions): Promise<string> =>
      new Promise((resolve) => {
        const req = http.get({ host: 'slow.test', port: server.port, path: '/', agent, ...options }, (res) => {
          res.resume();
          res.on('end', () => resolve(String(res.statusCode)));
        });
        req.on('timeout', () => req.destroy(new Error('timed out')));
        req.on('error', (e) => resolve(e.message));
      });
    const lanes: Array<[string, () => http.Agent, http.RequestOptions]> = [
      ['raw, per request', () => new http.Agent({ lookup: lookup250 } as http.AgentOptions), { timeout: 400 }],
      ['guarded, per request', () => new GuardedHttpAgent({ lookup: lookup250, breaker: new HostBreaker(), connectTimeout: 2_000 } as http.AgentOptions), { timeout: 400 }],
      ['guarded, agent-wide', () => new GuardedHttpAgent({ lookup: lookup250, timeout: 400, breaker: new HostBreaker(), connectTimeout: 2_000 } as http.AgentOptions), {}],
    ];
    for (const [lane, make, options] of lanes) {
      const agent = make();
      cleanups.push(() => agent.destroy());
      const outcomes = await Promise.all([one(agent, options), one(agent, options), one(agent, options)]);
      expect({ lane, outcomes }).toEqual({ lane, outcomes: ['200', '200', '200'] });
    }
  });
});
