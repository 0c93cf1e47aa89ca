/**
 * A socket the guarded agent dials is handed to Node connected, so the listeners users add on
 * `'socket'` for its `'connect'`, `'ready'` and `'secureConnect'` never ran: the widely copied
 * certificate pin (`req.on('socket', s => s.on('secureConnect', check))`) was skipped silently
 * and every request went to an unpinned peer, and a hand-made connect timer armed on 'socket' and
 * cleared on 'connect' failed requests Node's agent served (an outside review, r139: 10 of 10
 * reached the server where Node's agent refused 10 of 10). Each new socket now emits them to its
 * first request's listeners, before the request is written (a pin that destroys the socket sends
 * nothing). Raw `https.Agent` in the same test, counted at the server.
 */
import http from 'node:http';
import https from 'node:https';
import type tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent, GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT } from '../../../src/testing/test-cert.js';
import { countingServer, leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** One GET whose 'socket' listener pins `fingerprint` on 'secureConnect'; how it ended and the checks made. */
function pinned(agent: http.Agent, port: number, fingerprint: string, checks: { n: number }): Promise<string> {
  return new Promise((resolve) => {
    const req = https.get({ host: 'localhost', port, path: '/', agent, ca: TEST_CERT }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    req.on('socket', (socket: tls.TLSSocket) => {
      socket.on('secureConnect', () => {
        checks.n++;
        if (socket.getPeerCertificate().fingerprint256 !== fingerprint) req.destroy(new Error('certificate pin mismatch'));
      });
    });
    req.on('error', (e) => resolve(e.message));
  });
}

/** One GET whose connect timer is armed on 'socket' and cleared on 'connect' (100 ms); how it ended. */
function timedConnect(agent: http.Agent, port: number, events: string[]): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.statusCode)));
    });
    req.on('socket', (socket) => {
      const timer = setTimeout(() => req.destroy(new Error('connect timeout')), 100);
      for (const event of ['connect', 'ready']) socket.once(event, () => void events.push(event));
      socket.once('connect', () => clearTimeout(timer));
      socket.once('close', () => clearTimeout(timer));
    });
    req.on('error', (e) => resolve(e.message));
  });
}

describe("node:http agents: a new socket's connect events reach the request's own listeners", () => {
  it("a certificate pin checked on 'secureConnect': a wrong pin refuses every request before it is sent, a right one serves, either agent", async () => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    const raw = new https.Agent({ keepAlive: false });
    const guarded = new GuardedHttpsAgent({ keepAlive: false, breaker: new HostBreaker() });
    cleanups.push(() => raw.destroy(), () => guarded.destroy());
    for (const [kind, agent] of [['raw', raw], ['guarded', guarded]] as const) {
      const before = server.requests;
      const checks = { n: 0 };
      const outcomes: string[] = [];
      for (let i = 0; i < 5; i++) outcomes.push(await pinned(agent, server.port, 'AA:BB', checks));
      expect({ kind, outcomes, checks: checks.n, served: server.requests - before }).toEqual({ kind, outcomes: Array(5).fill('certificate pin mismatch'), checks: 5, served: 0 });
    }
    const right = await new Promise<string>((resolve) => {
      const probe = https.get({ host: 'localhost', port: server.port, path: '/', agent: raw, ca: TEST_CERT }, (res) => {
        res.resume();
        resolve((res.socket as tls.TLSSocket).getPeerCertificate().fingerprint256);
      });
      probe.on('error', () => resolve(''));
    });
    const checks = { n: 0 };
    expect(await pinned(guarded, server.port, right, checks)).toBe('200');
    expect(checks.n).toBe(1);
  });

  it("a connect timer armed on 'socket' and cleared on 'connect': served, with 'connect' then 'ready' once per new socket, either agent", async () => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const raw = new http.Agent({ keepAlive: true });
    const guarded = new GuardedHttpAgent({ keepAlive: true, breaker: new HostBreaker() });
    cleanups.push(() => raw.destroy(), () => guarded.destroy());
    for (const [kind, agent] of [['raw', raw], ['guarded', guarded]] as const) {
      const events: string[] = [];
      const outcomes: string[] = [];
      // The second request rides the first one's kept-alive socket: no connect events, either agent.
      for (let i = 0; i < 2; i++) outcomes.push(await timedConnect(agent, server.port, events));
      await new Promise((resolve) => setTimeout(resolve, 150)); // a timer left armed would fire by now
      expect({ kind, outcomes, events }).toEqual({ kind, outcomes: ['200', '200'], events: ['connect', 'ready'] });
    }
  });
});
