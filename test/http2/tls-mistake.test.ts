/**
 * One client's TLS configuration never makes a shared breaker refuse another client (issue 11,
 * DESIGN rule 1), through Http2Client: a real TLS HTTP/2 server on loopback, a client with a
 * wrong CA (or a wrong server name, or a peer refusing h2, or one that is not HTTP/2 at all) next
 * to a correctly configured one. The breakers are counted: one failed dial credited to the host
 * would show. The wrong client gets the real TLS error.
 */
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { ClientCertificateRejectedError, ErrorCodes, HostUnavailableError, TransportClosedError } from '../../src/core/errors.js';
import { sharedBreaker } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client, type Http2ClientOptions } from '../../src/http2/client.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { OTHER_CERT, OTHER_KEY } from '../helpers/other-cert.js';

const cleanup = leakCheckEach();

/** A breaker that opens on the third failed dial round, with no minimum outage: as strict as they come. */
function strictBreaker(): HostBreaker {
  return new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 60_000 });
}

async function listen(server: net.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

/**
 * A TLS HTTP/2 server (the self-signed TEST_CERT) answering 200 `ok`; counts the streams it saw.
 * With `mtls`, it requires a client certificate TEST_CERT signs.
 */
async function h2Server(mtls = false): Promise<{ origin: string; streams: () => number }> {
  let streams = 0;
  const options = mtls ? { key: TEST_KEY, cert: TEST_CERT, ca: TEST_CERT, requestCert: true, rejectUnauthorized: true } : { key: TEST_KEY, cert: TEST_CERT };
  const server = http2.createSecureServer(options, (_req, res) => {
    streams++;
    res.end('ok');
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  cleanup.push(() => {
    for (const s of sessions) s.destroy();
  });
  return { origin: await listen(server), streams: () => streams };
}

function h2Client(options: Http2ClientOptions): Http2Client {
  const c = new Http2Client({ connectTimeout: 2_000, closeTimeout: 100, ...options });
  cleanup.push(() => c.close());
  return c;
}

async function rejection(p: Promise<unknown>): Promise<Error & { code?: unknown }> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('the request succeeded');
}

describe('Http2Client: a client’s TLS mistake is not the host’s failure', () => {
  it('a wrong-CA client next to a correct one on an explicit shared breaker: the correct one is never refused, the host never counted', async () => {
    const server = await h2Server();
    const breaker = strictBreaker();
    const wrong = h2Client({ breaker }); // the default trust store does not know TEST_CERT
    const right = h2Client({ breaker, tls: { ca: TEST_CERT } });
    for (let i = 0; i < 5; i++) {
      const err = await rejection(wrong.request(`${server.origin}/`));
      expect(err).not.toBeInstanceOf(HostUnavailableError);
      expect(err.code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
      const res = await right.request(`${server.origin}/`);
      expect(res.body.toString()).toBe('ok');
    }
    expect(server.streams()).toBe(5);
    expect(breaker.state(server.origin.slice('https://'.length))).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it('a wrong-CA client on the default shared breaker: not one failed dial against the host, and the correct client is served', async () => {
    const server = await h2Server();
    const before = sharedBreaker().stats();
    const wrong = h2Client({});
    const right = h2Client({ tls: { ca: TEST_CERT } });
    for (let i = 0; i < 5; i++) expect((await rejection(wrong.request(`${server.origin}/`))).code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
    expect((await right.request(`${server.origin}/`)).status).toBe(200);
    const after = sharedBreaker().stats();
    expect(after.failed - before.failed).toBe(0);
    expect(after.refused - before.refused).toBe(0);
  });

  it('a wrong server name and a peer refusing h2 (an alert) never count against the host either', async () => {
    const server = await h2Server();
    const http1 = tls.createServer({ key: TEST_KEY, cert: TEST_CERT, ALPNProtocols: ['http/1.1'] }, (s) => s.end());
    http1.on('tlsClientError', () => {});
    const http1Origin = await listen(http1);
    const breaker = strictBreaker();
    const c = h2Client({ breaker, tls: { ca: TEST_CERT, servername: 'wrong.example' } });
    const alpn = h2Client({ breaker, tls: { ca: TEST_CERT } });
    for (let i = 0; i < 4; i++) {
      expect((await rejection(c.request(`${server.origin}/`))).code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
      expect((await rejection(alpn.request(`${http1Origin}/`))).code).toMatch(/^ERR_SSL_.*ALERT_NO_APPLICATION_PROTOCOL$/);
    }
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it('a TLS server that is not HTTP/2 (no ALPN, answers the preface as HTTP/1.1) is alive: no failed dial', async () => {
    // It completes the handshake (no ALPN to refuse), then answers the client preface as an
    // HTTP/1.1 server would and hangs up: a protocol answer, from a live host.
    const server = tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, (s) => {
      s.on('error', () => {});
      s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'));
    });
    const origin = await listen(server);
    const breaker = strictBreaker();
    const c = h2Client({ breaker, tls: { ca: TEST_CERT } });
    for (let i = 0; i < 4; i++) {
      const err = await rejection(c.request(`${origin}/`));
      expect(err).not.toBeInstanceOf(HostUnavailableError);
      expect(err.code).toBe('ERR_HTTP2_ERROR');
    }
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0, succeeded: 4 });
  });

  it('so is a plaintext (h2c) port that answers the preface as HTTP/1.1: no failed dial', async () => {
    const server = net.createServer((s) => {
      s.on('error', () => {});
      s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'));
    });
    const origin = (await listen(server)).replace('https:', 'http:');
    const breaker = strictBreaker();
    const c = h2Client({ breaker });
    for (let i = 0; i < 4; i++) expect((await rejection(c.request(`${origin}/`))).code).toBe('ERR_HTTP2_ERROR');
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0, succeeded: 4 });
  });

  it('a client without the certificate an mTLS server requires (TLS 1.3: the alert comes after its handshake) fails with that alert at once, and the host is never counted', async () => {
    const { origin, streams } = await h2Server(true);
    const breaker = strictBreaker();
    const noCert = h2Client({ breaker, tls: { ca: TEST_CERT } });
    const withCert = h2Client({ breaker, tls: { ca: TEST_CERT, key: TEST_KEY, cert: TEST_CERT } });
    for (let i = 0; i < 4; i++) {
      // Was: a ConnectTimeoutError after the whole connect timeout (the alert reached the socket
      // alone, unheard), counted as a dead host's dial; the third opened it for withCert too.
      const err = await rejection(noCert.request(`${origin}/`));
      expect(err.code).toBe('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
      expect((await withCert.request(`${origin}/`)).body.toString()).toBe('ok');
    }
    expect(streams()).toBe(4);
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it('a client whose certificate an mTLS server rejects (TLS 1.3: Node\'s server hangs up after the handshake, no alert) fails at once, typed, one dial a request, and never gets the host refused for the right client (was: 0 of 10 served, an outside review)', async () => {
    const { origin, streams } = await h2Server(true);
    const breaker = strictBreaker();
    const untrusted = h2Client({ breaker, tls: { ca: TEST_CERT, key: OTHER_KEY, cert: OTHER_CERT } });
    const right = h2Client({ breaker, tls: { ca: TEST_CERT, key: TEST_KEY, cert: TEST_CERT } });
    for (let i = 0; i < 5; i++) {
      const err = await rejection(untrusted.request(`${origin}/`));
      expect(err).toBeInstanceOf(ClientCertificateRejectedError);
      expect(err.code).toBe(ErrorCodes.CLIENT_CERTIFICATE_REJECTED);
      expect(err.message).toMatch(/asked for this client's certificate/);
      expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true, transient: false });
    }
    for (let i = 0; i < 5; i++) expect((await right.request(`${origin}/`)).body.toString()).toBe('ok');
    expect(streams()).toBe(5);
    // 5 dials of the untrusted client (never retried: the same certificate gets the same answer), 1 of the right one.
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0, succeeded: 6 });
  });

  it('an http: (h2c) client aimed at the TLS-only port opens the host for plain dials only: the https: client beside it is served, and its dial closes the host', async () => {
    const server = await h2Server();
    const breaker = strictBreaker();
    const wrong = h2Client({ breaker, retry: false }); // one dial a request: counted here one by one
    const right = h2Client({ breaker, tls: { ca: TEST_CERT } });
    const plainOrigin = server.origin.replace('https:', 'http:');
    // The TLS server hangs up on the cleartext preface without a byte: as a dead host would.
    for (let i = 0; i < 3; i++) expect(await rejection(wrong.request(`${plainOrigin}/`))).not.toBeInstanceOf(HostUnavailableError);
    expect(await rejection(wrong.request(`${plainOrigin}/`))).toBeInstanceOf(HostUnavailableError); // opened: the wrong client fails fast
    const host = server.origin.slice('https://'.length);
    expect(breaker.state(host)?.state).toBe('open');
    const res = await right.request(`${server.origin}/`); // it was refused: "3 consecutive failed dial round(s)"
    expect(res.status).toBe(200);
    expect(server.streams()).toBe(1);
    expect(breaker.state(host)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it('while a TLS peer that hangs up before sending a byte of HTTP/2 still counts: the third such dial opens the host', async () => {
    const server = tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, (s) => {
      s.on('error', () => {});
      s.end();
    });
    const origin = await listen(server);
    const breaker = strictBreaker();
    const c = h2Client({ breaker, tls: { ca: TEST_CERT }, retry: false }); // one dial a request
    for (let i = 0; i < 3; i++) {
      const err = await rejection(c.request(`${origin}/`));
      // Was a bare Error with no code: classify called it unknown and not transient. Nothing
      // was sent on it: a dial's failure (which the client's retry dials again).
      expect(err).toBeInstanceOf(TransportClosedError);
      expect(err.code).toBe(ErrorCodes.TRANSPORT_CLOSED);
      expect(err.message).toMatch(/HTTP\/2 handshake/);
      expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true, transient: true });
    }
    expect(await rejection(c.request(`${origin}/`))).toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 1, succeeded: 0 });
  });
});

describe('Http2Client: a TLS option at the top level', () => {
  it.each(['ca', 'rejectUnauthorized', 'servername', 'cert'])('%s there is a TypeError naming where it goes (it was ignored, and a misplaced ca failed every request)', (key) => {
    expect(() => new Http2Client({ [key]: 'x' } as never)).toThrow(new TypeError(`${key} is a TLS option: pass it as tls: { ${key} } (at the top level it was ignored)`));
  });

  it('not an object: a TypeError', () => {
    expect(() => new Http2Client(null as never)).toThrow(/options must be an object, got null/);
  });
});

describe('Http2Client: `tls` that is not an object', () => {
  // `tls: null` was taken; every request then failed reading it ("Cannot destructure property
  // 'servername'"), http:// ones too, each leaving its session open: the process never exited.
  it.each([null, true, '100', -1])('tls: %o is a TypeError naming tls', (value) => {
    expect(() => new Http2Client({ tls: value as never })).toThrow(/tls must be an object of TLS options/);
  });

  it.each([
    [[], /tls must be an object of TLS options/],
    [{ ca: 5 }, /^tls: /],
    [{ servername: 5 }, /tls\.servername must be a string, got 5/],
    [{ rejectUnauthorized: 'no' }, /tls\.rejectUnauthorized must be a boolean/],
    [{ checkServerIdentity: true }, /tls\.checkServerIdentity must be a function/],
  ])('tls: %o is a TypeError at construction (ca: 5 failed every dial, each counted against the live host)', (value, message) => {
    expect(() => new Http2Client({ tls: value as never })).toThrow(message);
  });

  it('left out or an object: accepted', async () => {
    await new Http2Client({}).close();
    await new Http2Client({ tls: { rejectUnauthorized: false } }).close();
  });
});

describe('Http2Client: call options that are not an object', () => {
  it('request(url, null), stream(url, null), a string, or headers that are not an object: a TypeError naming them, nothing sent', async () => {
    const client = new Http2Client({ breaker: null });
    try {
      await expect(client.request('http://127.0.0.1:1/', null as never)).rejects.toThrow(/options must be an object, got null/);
      await expect(client.stream('http://127.0.0.1:1/', null as never)).rejects.toThrow(/options must be an object, got null/);
      await expect(client.request('http://127.0.0.1:1/', 'x' as never)).rejects.toThrow(/options must be an object/);
      await expect(client.request('http://127.0.0.1:1/', { headers: 'x' as never })).rejects.toThrow(/headers must be an object, got "x"/);
    } finally {
      await client.close();
    }
  });
});
