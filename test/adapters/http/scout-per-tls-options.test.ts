/**
 * Over TLS, one dial scouts a host:port for every request, whatever its TLS options, but a
 * handshake that one request's options fail says nothing of another's: a request with other
 * options held behind it dials on its own. Was: the scout's failure failed them all (a server
 * hanging up on an unknown SNI name, as Envoy does with no matching filter chain, failed the good
 * name's requests undialled), and then, scouted apart, a second name asked a half-open breaker
 * whose one probe was out, and was refused. Raw `https.Agent` in the same test; connections
 * counted at the server.
 */
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { manualBreaker } from '../../helpers/adapter-tests.js';
import { leakChecked } from './helpers.js';

const cleanups = leakChecked();

describe('node:https agent: the dial scout and TLS options', () => {
  it('a bad SNI name fails alone; the good name, dialled at the same moment, is served (3 connections, as raw)', async () => {
    let connections = 0;
    const context = tls.createSecureContext({ cert: TEST_CERT, key: TEST_KEY });
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY, SNICallback: (name, cb) => (name === 'localhost' ? cb(null, context) : cb(new Error('unknown name'))) }, (_req, res) => res.end('ok'));
    server.on('connection', () => void connections++);
    server.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    cleanups.push(() => server.closeAllConnections());
    const port = (server.address() as net.AddressInfo).port;
    const get = (agent: https.Agent, servername: string): Promise<string> =>
      new Promise((resolve) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/', agent, servername, ca: TEST_CERT }, (res) => {
          res.resume();
          res.on('end', () => resolve('ok'));
        });
        req.on('error', (e: NodeJS.ErrnoException) => resolve(String(e.code)));
      });
    for (const kind of ['raw', 'guarded']) {
      const before = connections;
      const agent = kind === 'raw' ? new https.Agent({ keepAlive: true }) : new GuardedHttpsAgent({ keepAlive: true, breaker: new HostBreaker() });
      cleanups.push(() => agent.destroy());
      const seen = await Promise.all([get(agent, 'unknown.test'), get(agent, 'localhost'), get(agent, 'localhost')]);
      expect({ kind, seen, connections: connections - before }).toEqual({ kind, seen: ['ECONNRESET', 'ok', 'ok'], connections: 3 });
    }
  });
});

describe('node:https agent: a half-open breaker and requests with different TLS options', () => {
  it('one probe for the host: the other options wait for it and are served (was: scouted apart, the second asked the breaker while its probe was out: HostUnavailableError)', async () => {
    const { clock, breaker } = manualBreaker(1, 1_000);
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const agent = new GuardedHttpsAgent({ keepAlive: true, breaker });
    cleanups.push(() => agent.destroy());
    const get = (minVersion: tls.SecureVersion | undefined): Promise<string> =>
      new Promise((resolve) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/', agent, servername: 'localhost', ca: TEST_CERT, ...(minVersion === undefined ? {} : { minVersion }) }, (res) => {
          res.resume();
          res.on('end', () => resolve('ok'));
        });
        req.on('error', (e: NodeJS.ErrnoException) => resolve(String(e.code)));
      });
    expect(await get(undefined)).toBe('ECONNREFUSED'); // the port is closed: the breaker opens
    let connections = 0;
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY }, (_req, res) => res.end('ok'));
    server.on('connection', () => void connections++);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    cleanups.push(() => server.closeAllConnections());
    clock.advance(1_000); // half-open: one probe may go
    const seen = await Promise.all([get(undefined), get('TLSv1.2'), get('TLSv1.3')]);
    expect(seen).toEqual(['ok', 'ok', 'ok']);
    expect(connections).toBe(3);
  });
});

/**
 * A server whose every handshake takes 400 ms (a terminator asking its control plane for the
 * name's certificate), on `port` (0: any), serving 'localhost' and refusing unknown names.
 */
async function slowHandshakes(port = 0): Promise<number> {
  const context = tls.createSecureContext({ cert: TEST_CERT, key: TEST_KEY });
  const timers = new Set<NodeJS.Timeout>();
  const SNICallback = (name: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void): void => {
    const t = setTimeout(() => (timers.delete(t), name.endsWith('.unknown') ? cb(new Error('unknown name')) : cb(null, context)), 400);
    timers.add(t);
  };
  const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY, SNICallback }, (_req, res) => res.end('ok'));
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  cleanups.push(() => server.closeAllConnections());
  cleanups.push(() => timers.forEach((t) => clearTimeout(t)));
  return (server.address() as net.AddressInfo).port;
}

/** A GET with `servername`; resolves with 'ok' or the error's code, and when it settled (ms since `t0`). */
function timedGet(agent: https.Agent, port: number, servername: string, t0: number, timeout?: number): Promise<[string, number]> {
  return new Promise((resolve) => {
    const done = (what: string): void => resolve([what, performance.now() - t0]);
    const req = https.get({ host: '127.0.0.1', port, path: '/', agent, servername, ca: TEST_CERT }, (res) => {
      res.resume();
      res.on('end', () => done('ok'));
    });
    if (timeout !== undefined) req.setTimeout(timeout, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (e: NodeJS.ErrnoException) => done(String(e.code)));
  });
}

describe('node:https agent: a request held behind another name\'s scout', () => {
  it('dials once the scout\'s TCP connect is up, so a slow handshake of another name does not hold it (was: served after the other name failed, ~800 ms; raw ~400)', async () => {
    const port = await slowHandshakes();
    for (const kind of ['raw', 'guarded']) {
      const agent = kind === 'raw' ? new https.Agent() : new GuardedHttpsAgent({ breaker: new HostBreaker() });
      cleanups.push(() => agent.destroy());
      const t0 = performance.now();
      const [bad, good] = await Promise.all([timedGet(agent, port, 'slow.unknown', t0), timedGet(agent, port, 'localhost', t0)]);
      expect({ kind, seen: [bad[0], good[0]] }).toEqual({ kind, seen: ['ECONNRESET', 'ok'] });
      // Both handshakes ran side by side: the good one was served before the bad one's was
      // refused plus a handshake of its own (400 ms) could have passed.
      expect(good[1] - bad[1]).toBeLessThan(300);
    }
  });

  it("with a half-open breaker it waits for the probe, and its req.setTimeout runs from its own dial's TCP connect (was: from the scout's, a 'timeout' a raw agent never fires)", async () => {
    const { clock, breaker } = manualBreaker(1, 1_000);
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const closedPort = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const guarded = new GuardedHttpsAgent({ breaker });
    cleanups.push(() => guarded.destroy());
    expect((await timedGet(guarded, closedPort, 'localhost', 0))[0]).toBe('ECONNREFUSED'); // the breaker opens
    const port = await slowHandshakes(closedPort);
    clock.advance(1_000); // half-open: one probe may go
    for (const kind of ['raw', 'guarded']) {
      const agent = kind === 'raw' ? new https.Agent() : guarded;
      cleanups.push(() => agent.destroy());
      const t0 = performance.now();
      // The probe's name is not on the certificate: the client's own check refuses it at ~400 ms
      // (the host is alive: the probe closes the breaker). The good name then dials its own:
      // served at ~800 ms, its 600 ms timeout counted from its own connect at ~400 ms.
      const seen = await Promise.all([timedGet(agent, port, 'other.test', t0), timedGet(agent, port, 'localhost', t0, 600)]);
      expect({ kind, seen: seen.map(([what]) => what) }).toEqual({ kind, seen: ['ERR_TLS_CERT_ALTNAME_INVALID', 'ok'] });
    }
  });
});
