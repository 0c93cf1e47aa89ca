/**
 * A request that waits in the agent's queue while a dial is made for it may be served meanwhile:
 * Node's agent hands a queued request any keep-alive socket that frees. When that dial then
 * fails, its error must not reach the request, which the server has read (and maybe answered).
 * Was: the request got its response and then the dial's error, or (a slower answer) only the
 * error, so a POST the server had run was reported failed and got sent it again.
 *
 * `maxSockets: 2`, `localhost` resolved by the agent's own `lookup`, which fails (EAI_AGAIN, after
 * a wait) once the name goes dark. R1 holds one keep-alive socket for ~600 ms; Q queues
 * while the other slot dials, and R1's socket, freed, serves Q before that dial fails. Two ways
 * Q's dial starts: after R2's own dial failed (dialguard's next()), and after R2's connection
 * closed (Node's removeSocket). Raw `http.Agent` in the same test for each.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent, GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakChecked } from './helpers.js';

const cleanups = leakChecked();

interface Seen {
  paths: string[];
  port: number;
}

/** A server answering `/slow` after 600 ms, `/r2` after 50 ms (closing the connection if asked), anything else at once. */
async function server(closeR2: boolean): Promise<Seen> {
  const seen: Seen = { paths: [], port: 0 };
  const srv = http.createServer({ keepAliveTimeout: 10_000 }, (req, res) => {
    seen.paths.push(`${req.method} ${req.url}`);
    req.resume();
    if (req.url === '/r2' && closeR2) res.setHeader('connection', 'close');
    setTimeout(() => res.end('ok'), req.url === '/slow' ? 600 : req.url === '/r2' ? 50 : 0);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  seen.port = (srv.address() as net.AddressInfo).port;
  cleanups.push(() => new Promise<void>((resolve) => srv.close(() => resolve())));
  cleanups.push(() => srv.closeAllConnections());
  return seen;
}

/** A resolver for `localhost` that answers 127.0.0.1 until `dark`, then fails after `ms`. */
function darkening(ms: number): { lookup: net.LookupFunction; goDark: () => void } {
  let dark = false;
  const lookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) => {
    if (!dark) return opts.all === true ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4);
    setTimeout(() => cb(Object.assign(new Error('getaddrinfo EAI_AGAIN localhost'), { code: 'EAI_AGAIN' })), ms);
  }) as unknown as net.LookupFunction;
  return { lookup, goDark: () => void (dark = true) };
}

/** One request; what it saw: 'ok', or its error's code (and 'ok+CODE' for a response and an error both). */
function call(agent: http.Agent, port: number, path: string, method: string, timeout?: number): Promise<string> {
  return new Promise((resolve) => {
    let answered = false;
    let timeouts = 0;
    const req = http.request({ host: 'localhost', port, path, method, agent, ...(timeout === undefined ? {} : { timeout }) }, (res) => {
      answered = true;
      res.resume();
      // Waits past the dial's end, so a late error (or 'timeout') shows.
      res.on('end', () => setTimeout(() => resolve(timeouts === 0 ? 'ok' : `ok+${timeouts} timeout`), 600));
    });
    req.on('timeout', () => void timeouts++);
    req.on('error', (e: NodeJS.ErrnoException) => resolve(answered ? `ok+${e.code}` : String(e.code)));
    req.end(method === 'POST' ? 'body' : undefined);
  });
}

async function scene(kind: 'raw' | 'guarded', closeR2: boolean, method: string, timeout?: number): Promise<{ q: string; paths: string[] }> {
  const seen = await server(closeR2);
  // Q's dial must fail after R1's socket frees (~600 ms): it starts at ~350 ms after R2's failed
  // dial (300 ms), at ~70 ms after R2's closed connection (800 ms).
  const { lookup, goDark } = darkening(closeR2 ? 800 : 300);
  const options = { keepAlive: true, maxSockets: 2, lookup };
  const agent = kind === 'raw' ? new http.Agent(options) : new GuardedHttpAgent({ ...options, connectTimeout: 2_000, breaker: new HostBreaker() });
  cleanups.push(() => agent.destroy());
  const r1 = call(agent, seen.port, '/slow', 'GET'); // a keep-alive socket, busy ~600 ms
  let r2: Promise<string>;
  if (closeR2) {
    r2 = call(agent, seen.port, '/r2', 'GET'); // its connection closes at ~50 ms: Node dials for Q
    await new Promise((resolve) => setTimeout(resolve, 20));
    goDark();
  } else {
    await new Promise((resolve) => setTimeout(resolve, 50));
    goDark();
    r2 = call(agent, seen.port, '/r2', 'GET'); // its dial fails at ~350 ms: the agent dials for Q
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const q = call(agent, seen.port, '/q', method, timeout); // queued; R1's socket frees at ~600 ms
  const [, , qSaw] = await Promise.all([r1, r2, q]);
  return { q: qSaw, paths: seen.paths.filter((p) => p.endsWith('/q')) };
}

describe('node:http agents: a queued request served while a dial was made for it', () => {
  for (const [how, closeR2] of [
    ['after a failed dial freed the slot (the guard dials for it)', false],
    ["after a connection closed (Node's removeSocket dials for it)", true],
  ] as const) {
    it(`${how}: the request keeps its response, the dial's failure is nobody's, a POST runs once`, async () => {
      for (const method of ['GET', 'POST']) {
        const guarded = await scene('guarded', closeR2, method);
        expect({ method, ...guarded }).toEqual({ method, q: 'ok', paths: [`${method} /q`] });
      }
      // Raw Node hands Q the dialling socket at once, so Q never reaches the server and fails
      // with the dial's error: the guarded agent, which keeps Q queued, serves it instead.
      const raw = await scene('raw', closeR2, 'POST');
      expect(raw).toEqual({ q: 'EAI_AGAIN', paths: [] });
    });
  }
});

describe('node:https agents: req.setTimeout() of a queued request served meanwhile', () => {
  it("its dial's timer is stopped once another socket serves it (was: 'timeout' fired on it ~200 ms after its response)", async () => {
    // Connections after the first two wait 800 ms in their TLS handshake (the server's SNI
    // callback). R1 holds a keep-alive socket ~600 ms; R2's connection closes at ~50 ms, so Node
    // dials for Q, queued; Q calls setTimeout(700) once that dial is past TCP. R1's socket,
    // freed at ~600 ms, serves Q; the timer armed for Q's dial would fire at ~820 ms.
    const context = tls.createSecureContext({ cert: TEST_CERT, key: TEST_KEY });
    let handshakes = 0;
    const srv = https.createServer(
      { cert: TEST_CERT, key: TEST_KEY, keepAliveTimeout: 10_000, SNICallback: (_name, cb) => (++handshakes <= 2 ? cb(null, context) : void setTimeout(() => cb(null, context), 800)) },
      (req, res) => {
        req.resume();
        if (req.url === '/r2') res.setHeader('connection', 'close');
        setTimeout(() => res.end('ok'), req.url === '/slow' ? 600 : req.url === '/r2' ? 50 : 0);
      },
    );
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => srv.close(() => resolve())));
    cleanups.push(() => srv.closeAllConnections());
    const port = (srv.address() as net.AddressInfo).port;
    const agent = new GuardedHttpsAgent({ keepAlive: true, maxSockets: 2, maxCachedSessions: 0, connectTimeout: 2_000, breaker: new HostBreaker() }); // no resumed sessions: each handshake asks SNI
    cleanups.push(() => agent.destroy());
    const call = (path: string, setTimeoutAt?: number): Promise<string> =>
      new Promise((resolve) => {
        let timeouts = 0;
        const req = https.request({ host: 'localhost', port, path, agent, ca: TEST_CERT }, (res) => {
          res.resume();
          res.on('end', () => setTimeout(() => resolve(timeouts === 0 ? 'ok' : `ok+${timeouts} timeout`), 600));
        });
        req.on('timeout', () => void timeouts++);
        req.on('error', (e: NodeJS.ErrnoException) => resolve(String(e.code)));
        if (setTimeoutAt !== undefined) setTimeout(() => req.setTimeout(700), setTimeoutAt);
        req.end();
      });
    const r1 = call('/slow');
    const r2 = call('/r2');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const q = call('/q', 100);
    expect(await Promise.all([r1, r2, q])).toEqual(['ok', 'ok', 'ok']);
  });
});
