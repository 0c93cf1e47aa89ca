/**
 * GuardedAgent keeps TLS sessions to resume them, heard on the socket's 'session' event once the
 * dial was over. A TLS 1.2 server's session is emitted in the same turn as 'secureConnect',
 * before that listener was there: against a TLS 1.2 server (nginx before 1.23.4 by default, many
 * load balancers) every new connection paid a full handshake (an outside review: 0 of 29 resumed
 * over 10 nginx reloads, plain undici 7 of 24). TLS 1.3's tickets come later and were kept.
 * Counted at the server: a connection per request (`Connection: close`), sequential.
 */
import https from 'node:https';
import type net from 'node:net';
import type tls from 'node:tls';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();

describe('GuardedAgent resumes TLS sessions', () => {
  it.each(['TLSv1.2', 'TLSv1.3'] as const)('%s: of 6 connections, the 5 after the first resume (was, TLS 1.2: none)', async (version) => {
    const reused: boolean[] = [];
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY, minVersion: version, maxVersion: version }, (req, res) => {
      req.resume();
      res.setHeader('connection', 'close');
      res.end('ok');
    });
    server.on('secureConnection', (s: tls.TLSSocket) => reused.push(s.isSessionReused()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    });
    const agent = new GuardedAgent({ breaker: new HostBreaker(), tls: { ca: TEST_CERT } });
    cleanups.push(() => agent.destroy());
    const url = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}/`;
    for (let i = 0; i < 6; i++) {
      const res = await request(url, { dispatcher: agent });
      expect(await res.body.text()).toBe('ok');
      // The server closed it: the next request dials anew (TLS 1.3's ticket arrives after the
      // handshake; a turn lets it land, as it would between a user's requests).
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(reused.length).toBe(6);
    expect(reused.slice(1)).toEqual([true, true, true, true, true]);
  });
});
