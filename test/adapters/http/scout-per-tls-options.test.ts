/**
 * Over TLS, concurrent dials to one host:port with different TLS options (here `servername`) are
 * scouted apart: a handshake that one name's options fail says nothing of another's. Was: the
 * scout was per host:port, so a server hanging up on an unknown SNI name (as Envoy does with no
 * matching filter chain) failed the requests for the good name waiting behind it, undialled.
 * Raw `https.Agent` in the same test; connections counted at the server.
 */
import https from 'node:https';
import type net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
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
