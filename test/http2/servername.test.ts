/**
 * `tls.servername` names the virtual host a request reaches, as with node:http2: the request's
 * `:authority` is `servername:port` when the client dials an address and names the host by SNI
 * (node:http2 derives it so when it dials itself). Before, the authority said the address, and
 * behind nginx or an ingress the default virtual host answered instead.
 */
import http2 from 'node:http2';
import type tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenH2 } from './listen.js';

const cleanup = leakCheckEach();

/** A TLS HTTP/2 server that records each stream's `:authority` and the session's SNI. */
async function server(): Promise<{ port: number; seen: string[] }> {
  const seen: string[] = [];
  const srv = http2.createSecureServer({ key: TEST_KEY, cert: TEST_CERT }, (req, res) => {
    seen.push(`${req.headers[':authority']} sni=${(req.socket as tls.TLSSocket).servername || '-'}`);
    res.end('ok');
  });
  return { port: await listenH2(srv, cleanup), seen };
}

/** node:http2 itself, dialling `origin` with `options`: the authority it sends. */
async function rawAuthority(origin: string, options: http2.SecureClientSessionOptions): Promise<void> {
  const session = http2.connect(origin, options);
  try {
    await new Promise<void>((resolve, reject) => {
      const req = session.request({ ':path': '/' });
      req.on('error', reject);
      req.on('response', () => req.resume().on('end', resolve));
      req.end();
    });
  } finally {
    session.destroy();
  }
}

describe('Http2Client: tls.servername names the authority, as node:http2', () => {
  it('an address URL with servername: SNI and :authority are the name, as node:http2 sends', async () => {
    const { port, seen } = await server();
    const origin = `https://127.0.0.1:${port}`;
    await rawAuthority(origin, { ca: TEST_CERT, servername: 'localhost' });
    const client = new Http2Client({ breaker: new HostBreaker(), tls: { ca: TEST_CERT, servername: 'localhost' } });
    cleanup.push(() => client.close());
    const res = await client.request(`${origin}/`);
    expect(res.status).toBe(200);
    expect(seen).toEqual([`localhost:${port} sni=localhost`, `localhost:${port} sni=localhost`]);
  });

  it('without servername the authority is the URL host, as before (an address: no SNI)', async () => {
    const { port, seen } = await server();
    const origin = `https://127.0.0.1:${port}`;
    await rawAuthority(origin, { ca: TEST_CERT });
    const client = new Http2Client({ breaker: new HostBreaker(), tls: { ca: TEST_CERT } });
    cleanup.push(() => client.close());
    await client.request(`${origin}/`);
    await client.request(`https://localhost:${port}/`);
    expect(seen).toEqual([`127.0.0.1:${port} sni=-`, `127.0.0.1:${port} sni=-`, `localhost:${port} sni=localhost`]);
  });
});
