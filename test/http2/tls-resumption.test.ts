/**
 * Http2Client resumes TLS sessions: a reconnect to an origin it reached before offers that
 * session, so a server restarting (or closing idle sessions) costs an abbreviated handshake, not a
 * full one per redial (seed 002: a fresh TLS handshake per redial is what kept a sick node sick).
 * Before, no Http2Client connection was ever resumed (an outside review, r137: 0 over nginx
 * reloads; raw node:http2, which dials itself, resumes none either). Counted at the server: the
 * server ends each session after its one request, so each request is a new TLS connection.
 */
import http2 from 'node:http2';
import type tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenH2 } from './listen.js';

const cleanup = leakCheckEach();

describe('Http2Client resumes TLS sessions', () => {
  it.each([
    ['TLSv1.2', '127.0.0.1'],
    ['TLSv1.3', '127.0.0.1'],
    ['TLSv1.2', 'localhost'], // a name: dialled per address
    ['TLSv1.3', 'localhost'],
  ] as const)('%s to %s: of 5 connections, the 4 after the first resume (was: none)', async (version, host) => {
    const reused: boolean[] = [];
    const srv = http2.createSecureServer({ key: TEST_KEY, cert: TEST_CERT, minVersion: version, maxVersion: version }, (req, res) => {
      res.end('ok', () => req.stream.session?.close()); // GOAWAY after the answer: the next request needs a new connection
    });
    srv.on('secureConnection', (s: tls.TLSSocket) => reused.push(s.isSessionReused()));
    let closed = 0;
    srv.on('session', (session) => session.on('close', () => closed++));
    const port = await listenH2(srv, cleanup);
    const client = new Http2Client({ breaker: new HostBreaker(), tls: { ca: TEST_CERT } });
    cleanup.push(() => client.close());
    for (let i = 0; i < 5; i++) {
      const res = await client.request(`https://${host}:${port}/`);
      expect(res.status).toBe(200);
      // The session's close after its answer, before the next request: that one needs a new connection.
      await eventually(() => closed, (n) => n === i + 1);
    }
    expect(reused).toEqual([false, true, true, true, true]);
  });
});
