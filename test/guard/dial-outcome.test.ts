/**
 * Only the host's failures count (DESIGN rule 1, issue 11): a host that presented a certificate
 * or sent an alert is alive, and one client's TLS configuration must never make a shared breaker
 * refuse another client. Real TLS servers on loopback; the breaker is the strictest one (the
 * count alone trips), so a single mistaken count would show.
 */
import https from 'node:https';
import type net from 'node:net';
import tls from 'node:tls';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../src/adapters/undici/agent.js';
import { HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { dial } from '../../src/guard/dial.js';
import { dialFailureOutcome } from '../../src/guard/dial-outcome.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';

/** A breaker that opens on the third failed dial, with no minimum outage: as strict as they come. */
function strictBreaker(): HostBreaker {
  return new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 60_000 });
}

async function listen<S extends net.Server>(server: S): Promise<{ server: S; port: number; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return { server, port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function sys(code: string): Error {
  return Object.assign(new Error(code), { code });
}

describe('dialFailureOutcome', () => {
  it.each([
    ['ECONNREFUSED', 'failed'],
    ['ECONNRESET', 'failed'],
    ['EHOSTUNREACH', 'failed'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'succeeded'],
    ['CERT_HAS_EXPIRED', 'succeeded'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'succeeded'],
    ['ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL', 'succeeded'],
    ['ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', 'succeeded'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'succeeded'],
    ['ERR_SSL_TLSV1_UNRECOGNIZED_NAME', 'succeeded'],
    ['ERR_SSL_TLSV1_CERTIFICATE_UNOBTAINABLE', 'succeeded'],
    ['ERR_SSL_NO_PROTOCOLS_AVAILABLE', 'abandoned'],
    ['EMFILE', 'abandoned'],
    ['ENFILE', 'abandoned'],
    ['EADDRNOTAVAIL', 'abandoned'],
    ['ENOBUFS', 'abandoned'],
  ] as const)('%s -> %s', (code, outcome) => {
    expect(dialFailureOutcome(sys(code))).toBe(outcome);
  });

  it('reads the code through a cause chain, and any answer from the peer proves it alive', () => {
    expect(dialFailureOutcome(new Error('wrapped', { cause: sys('DEPTH_ZERO_SELF_SIGNED_CERT') }))).toBe('succeeded');
    expect(dialFailureOutcome(sys('ECONNRESET'), true)).toBe('succeeded');
    expect(dialFailureOutcome(new Error('no code'))).toBe('failed');
    expect(dialFailureOutcome(undefined)).toBe('failed');
  });
});

describe('dial: local failures are abandoned', () => {
  it('EMFILE, ENFILE, EADDRNOTAVAIL and ENOBUFS never count against the host, and reach the caller unchanged', async () => {
    const breaker = strictBreaker();
    for (const code of ['EMFILE', 'ENFILE', 'EADDRNOTAVAIL', 'ENOBUFS', 'EMFILE', 'EMFILE']) {
      const err = sys(code);
      await expect(dial('db:5432', () => Promise.reject(err), { breaker })).rejects.toBe(err);
    }
    expect(breaker.state('db:5432')).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ failed: 0, abandoned: 6 });
  });
});

describe('connect: a client’s TLS mistake is not the host’s failure', () => {
  it('a wrong-CA client and a correct client share one breaker: the correct one is never refused, the wrong one sees the real TLS error', async () => {
    const peer = await listen(tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, (s) => s.end()));
    const breaker = strictBreaker();
    const target = { host: '127.0.0.1', port: peer.port };
    try {
      for (let i = 0; i < 6; i++) {
        // The default trust store does not know the self-signed TEST_CERT.
        const wrong = await connect(target, { breaker, tls: true }).catch((e: unknown) => e);
        expect(wrong).not.toBeInstanceOf(HostUnavailableError);
        expect(wrong).toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
        const right = await connect(target, { breaker, tls: { ca: TEST_CERT } });
        right.destroy();
      }
      expect(breaker.state(`127.0.0.1:${peer.port}`)).toMatchObject({ state: 'closed', failures: 0 });
      expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, succeeded: 12 });
    } finally {
      await peer.close();
    }
  });

  it('a hostname mismatch and a refused ALPN protocol never count either', async () => {
    const peer = await listen(tls.createServer({ key: TEST_KEY, cert: TEST_CERT, ALPNProtocols: ['h2'] }, (s) => s.end()));
    const breaker = strictBreaker();
    const target = { host: '127.0.0.1', port: peer.port };
    try {
      for (let i = 0; i < 4; i++) {
        const name = await connect(target, { breaker, tls: { ca: TEST_CERT, servername: 'wrong.example', ALPNProtocols: ['h2'] } }).catch((e: unknown) => e);
        expect(name).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
        const alpn = await connect(target, { breaker, tls: { ca: TEST_CERT, ALPNProtocols: ['http/1.1'] } }).catch((e: unknown) => e);
        expect(alpn).toMatchObject({ code: expect.stringMatching(/^ERR_SSL_.*ALERT_NO_APPLICATION_PROTOCOL$/) });
      }
      expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
    } finally {
      await peer.close();
    }
  });

  it('a client key or pfx that does not parse, and a pinning checkServerIdentity that refuses, never count either; a correct client is served', async () => {
    const peer = await listen(tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, (s) => s.end()));
    const breaker = strictBreaker();
    const target = { host: '127.0.0.1', port: peer.port };
    const pinned = (): Error => new Error('certificate fingerprint does not match the pin');
    try {
      for (let i = 0; i < 4; i++) {
        // Thrown by tls.connect before any I/O (a path where the PEM should be; garbage for a pfx).
        const key = await connect(target, { breaker, tls: { ca: TEST_CERT, key: '/etc/ssl/client.key', cert: '/etc/ssl/client.pem' } }).catch((e: unknown) => e);
        expect(key).toMatchObject({ code: expect.stringMatching(/^ERR_OSSL_/) });
        const pfx = await connect(target, { breaker, tls: { ca: TEST_CERT, pfx: Buffer.from('not a pfx') } }).catch((e: unknown) => e);
        expect(pfx).toBeInstanceOf(Error);
        // Refused by the client's own check, after the host presented its certificate.
        const pin = await connect(target, { breaker, tls: { ca: TEST_CERT, checkServerIdentity: pinned } }).catch((e: unknown) => e);
        expect(pin).toMatchObject({ message: 'certificate fingerprint does not match the pin' });
      }
      expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 }); // was: opened at the third of each
      const socket = await connect(target, { breaker, tls: { ca: TEST_CERT } });
      socket.destroy();
    } finally {
      await peer.close();
    }
  });

  it('a client that accepts any certificate (rejectUnauthorized: false): a handshake failing after TLS is the host\'s failure', async () => {
    const peer = await listen(tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, (s) => s.destroy())); // TLS, then hangs up
    const breaker = strictBreaker();
    const target = { host: '127.0.0.1', port: peer.port };
    const handshake = (socket: net.Socket): Promise<void> =>
      new Promise((_, reject) => socket.once('close', () => reject(Object.assign(new Error('hung up before the protocol handshake'), { code: 'ECONNRESET' }))));
    try {
      for (let i = 0; i < 3; i++) await expect(connect(target, { breaker, tls: { rejectUnauthorized: false }, handshake })).rejects.toMatchObject({ code: 'ECONNRESET' });
      expect(breaker.stats()).toMatchObject({ failed: 3, succeeded: 0 }); // the certificate proved nothing after TLS
    } finally {
      await peer.close();
    }
  });

  it('through GuardedAgents: a wrong-CA agent never gets a correctly configured agent refused', async () => {
    const peer = await listen(https.createServer({ key: TEST_KEY, cert: TEST_CERT }, (_req, res) => res.end('ok')));
    const breaker = strictBreaker();
    const wrong = new GuardedAgent({ breaker });
    const right = new GuardedAgent({ breaker, tls: { ca: TEST_CERT } });
    const origin = `https://127.0.0.1:${peer.port}`;
    try {
      for (let i = 0; i < 4; i++) {
        const err = await request(origin, { dispatcher: wrong }).catch((e: unknown) => e);
        expect(err).not.toBeInstanceOf(HostUnavailableError);
        expect(err).toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
      }
      const res = await request(origin, { dispatcher: right });
      expect(await res.body.text()).toBe('ok');
      expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
    } finally {
      await wrong.destroy();
      await right.destroy();
      await peer.close();
    }
  });

  it('through a GuardedAgent: a refused ALPN is one dial per request, not one per attempt, and never counts', async () => {
    // An h2-only TLS server and an agent that offers only http/1.1: the server's
    // no_application_protocol alert fails the same way every time, so no attempt is retried.
    let dials = 0;
    const peer = await listen(tls.createServer({ key: TEST_KEY, cert: TEST_CERT, ALPNProtocols: ['h2'] }, (s) => s.end()));
    peer.server.on('connection', () => dials++);
    const breaker = strictBreaker();
    const agent = new GuardedAgent({ breaker, tls: { ca: TEST_CERT } });
    try {
      for (let i = 0; i < 4; i++) {
        const err = await request(`https://127.0.0.1:${peer.port}`, { dispatcher: agent }).catch((e: unknown) => e);
        expect(err).toMatchObject({ code: expect.stringMatching(/ALERT_NO_APPLICATION_PROTOCOL$/) });
      }
      expect(dials).toBe(4);
      expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
    } finally {
      await agent.destroy();
      await peer.close();
    }
  });
});

describe('dialFailureOutcome: JavaScript\'s own error for a bug is this process\'s failure', () => {
  it.each([
    ['TypeError', new TypeError('CONFIG is not set')],
    ['ReferenceError', new ReferenceError('x is not defined')],
    ['SyntaxError', new SyntaxError('Unexpected token')],
    ['RangeError', new RangeError('bad size')],
    ['EvalError', new EvalError('no')],
  ])('%s with no code: abandoned, never the host\'s', (_name, err) => {
    expect(dialFailureOutcome(err)).toBe('abandoned');
  });

  it('one that carries a code on its chain stays the host\'s (fetch failed around ECONNREFUSED), as do other errors', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(dialFailureOutcome(new TypeError('fetch failed', { cause: refused }))).toBe('failed');
    expect(dialFailureOutcome(new Error('handshake failed'))).toBe('failed');
    expect(dialFailureOutcome(new TypeError('parse error'), true)).toBe('succeeded'); // the peer answered first
  });

  it('a pool whose async connector rejects with a TypeError before any I/O does not open the host for another pool on the same breaker (was: 31 failed rounds, the healthy node refused)', async () => {
    const { ConnectionPool } = await import('../../src/pool/connection-pool.js');
    const breaker = new HostBreaker({ minOutage: 0 });
    let attempts = 0;
    const bad = new ConnectionPool<object>({
      breaker,
      connector: {
        connect: async () => {
          attempts++;
          throw new TypeError('CONFIG is not set');
        },
        close: () => undefined,
      },
    });
    try {
      for (let i = 0; i < 8; i++) await bad.use('127.0.0.1:6399', async () => 'never').catch(() => undefined);
      expect(attempts).toBe(8); // every call reached the connector: none refused by the breaker
      expect(breaker.state('127.0.0.1:6399')?.failures ?? 0).toBe(0);
    } finally {
      await bad.close();
    }
  });
});
