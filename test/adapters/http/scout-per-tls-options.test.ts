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

describe('node:https agent: req.setTimeout of a request held behind another name\'s scout', () => {
  it("runs from its own dial's TCP connect once it dials on its own (was: from the scout's, a 'timeout' a raw agent never fires)", async () => {
    const context = tls.createSecureContext({ cert: TEST_CERT, key: TEST_KEY });
    const timers = new Set<NodeJS.Timeout>();
    // Every handshake takes 400 ms (a terminator asking its control plane); one name is refused.
    const SNICallback = (name: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void): void => {
      const t = setTimeout(() => (timers.delete(t), name === 'localhost' ? cb(null, context) : cb(new Error('unknown name'))), 400);
      timers.add(t);
    };
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY, SNICallback }, (_req, res) => res.end('ok'));
    server.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    cleanups.push(() => server.closeAllConnections());
    cleanups.push(() => timers.forEach((t) => clearTimeout(t)));
    const port = (server.address() as net.AddressInfo).port;
    const get = (agent: https.Agent, servername: string, timeout?: number): Promise<string> =>
      new Promise((resolve) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/', agent, servername, ca: TEST_CERT }, (res) => {
          res.resume();
          res.on('end', () => resolve('ok'));
        });
        if (timeout !== undefined) req.setTimeout(timeout, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
        req.on('error', (e: NodeJS.ErrnoException) => resolve(String(e.code)));
      });
    for (const kind of ['raw', 'guarded']) {
      const agent = kind === 'raw' ? new https.Agent() : new GuardedHttpsAgent({ breaker: new HostBreaker() });
      cleanups.push(() => agent.destroy());
      // Guarded, the good name waits for the scout's 400 ms handshake to fail (one scout per
      // host:port while it is unproven), then its own 400 ms: served at ~800 ms, its 600 ms
      // timeout counted from its own connect at ~400 ms. Raw: served at ~400 ms.
      const seen = await Promise.all([get(agent, 'slow.test'), get(agent, 'localhost', 600)]);
      expect({ kind, seen }).toEqual({ kind, seen: ['ECONNRESET', 'ok'] });
    }
  });
});
