/**
 * A request's own `timeout` wins over the agent's while its socket connects, as on Node's agent
 * (Node arms the agent's on the connecting socket, then `setRequestSocket` sets the request's own
 * where it differs). The guarded agent read the options Node merges for `createConnection`, where
 * the agent's win: with an agent-wide `timeout: 1000` (a common idle bound for free sockets) a
 * request asking 10 s timed out during a 1.5 s handshake Node's agent served, and one asking
 * 300 ms went unbounded until `connectTimeout` (an outside review, r139). Raw `http.Agent` in the
 * same test, the same server and a 300 ms lookup as the slow dial.
 */
import http from 'node:http';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { countingServer, leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** Resolves any name to 127.0.0.1 after 300 ms. */
const slowLookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
  void setTimeout(() => (opts.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)), 300)) as unknown as net.LookupFunction;

/** One GET with the request's own `timeout`; the 'timeout' events it saw (none destroys it) and how it ended. */
function get(agent: http.Agent, port: number, timeout: number): Promise<{ timeouts: number; outcome: string }> {
  return new Promise((resolve) => {
    let timeouts = 0;
    const req = http.get({ host: 'slow.test', port, path: '/', agent, lookup: slowLookup, timeout }, (res) => {
      res.resume();
      res.on('end', () => resolve({ timeouts, outcome: String(res.statusCode) }));
    });
    req.on('timeout', () => void timeouts++);
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ timeouts, outcome: String(e.code) }));
  });
}

describe("node:http agents: a request's own timeout over the agent's, during the dial", () => {
  it.each([
    ['the agent 150 ms, the request 2 000 ms: no timeout during a 300 ms dial', 150, 2_000, { timeouts: 0, outcome: '200' }],
    ['the agent 60 000 ms, the request 150 ms: one timeout during a 300 ms dial', 60_000, 150, { timeouts: 1, outcome: '200' }],
  ])('%s, either agent', async (_name, agentTimeout, own, expected) => {
    const server = await countingServer({ handler: (_req, res) => void res.end('ok') });
    cleanups.push(() => server.close());
    const raw = new http.Agent({ keepAlive: true, timeout: agentTimeout });
    const guarded = new GuardedHttpAgent({ keepAlive: true, timeout: agentTimeout, breaker: new HostBreaker(), connectTimeout: 2_000 });
    cleanups.push(() => raw.destroy(), () => guarded.destroy());
    for (const [kind, agent] of [['raw', raw], ['guarded', guarded]] as const) {
      expect({ kind, ...(await get(agent, server.port, own)) }).toEqual({ kind, ...expected });
    }
  });
});
