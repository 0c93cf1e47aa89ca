/**
 * One client's TLS configuration never makes a shared breaker refuse another client (issue 11,
 * DESIGN rule 1), through GrpcGuard: a real TLS grpc-js server on loopback, a client with a wrong
 * CA (or a wrong server name, or a peer refusing its ALPN protocol) next to a correctly
 * configured one. The breakers are counted: a single failed dial credited to the host would show.
 * The wrong client sees the real TLS error, as the cause of its ChannelConnectError.
 */
import net from 'node:net';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { ChannelConnectError, GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { ClientCertificateRejectedError, HostUnavailableError } from '../../../src/core/errors.js';
import { sharedBreaker } from '../../../src/guard/dial.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { listenLoopback } from '../../helpers/listen.js';
import { OTHER_CERT, OTHER_KEY } from '../../helpers/other-cert.js';
import { EchoClient, call, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();
const trusted = (): grpc.ChannelCredentials => grpc.credentials.createSsl(Buffer.from(TEST_CERT));

/** A breaker that opens on the third failed dial round, with no minimum outage: as strict as they come. */
function strictBreaker(): HostBreaker {
  return new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 60_000 });
}

/**
 * A TLS grpc-js server (the self-signed TEST_CERT) answering Echo; counts the calls it saw. With
 * `mtls`, it requires a client certificate TEST_CERT signs.
 */
async function tlsEchoServer(mtls = false): Promise<{ address: string; calls: () => number }> {
  let calls = 0;
  const server = new grpc.Server();
  const unused = (_c: unknown, cb?: grpc.sendUnaryData<Buffer>): void => cb?.({ code: grpc.status.UNIMPLEMENTED });
  server.addService(echoService, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      calls++;
      cb(null, c.request);
    },
    Hold: unused,
    Fail: unused,
    Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => c.end(),
    Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
  });
  const credentials = grpc.ServerCredentials.createSsl(mtls ? Buffer.from(TEST_CERT) : null, [{ private_key: Buffer.from(TEST_KEY), cert_chain: Buffer.from(TEST_CERT) }], mtls);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))));
  cleanup.push(() => server.forceShutdown());
  return { address: `127.0.0.1:${port}`, calls: () => calls };
}

function guarded(options: GrpcGuardOptions): GrpcGuard {
  const guard = new GrpcGuard({ connectTimeout: 2_000, closeTimeout: 100, ...options });
  cleanup.push(() => guard.close());
  return guard;
}

function client(address: string, credentials: grpc.ChannelCredentials, guard: GrpcGuard, options: grpc.ChannelOptions = {}): EchoClient {
  const c = new EchoClient(address, credentials, { ...options, ...guard.clientOptions() });
  cleanup.push(() => c.close());
  return c;
}

/** The wrong client's failure: the documented class, not a refusal, with Node's TLS error (`code`) as its cause. */
async function tlsFailure(p: Promise<unknown>, code: string | RegExp): Promise<void> {
  const err = await failure(p);
  expect(err).not.toBeInstanceOf(HostUnavailableError);
  expect(err).toBeInstanceOf(ChannelConnectError);
  expect(err.code).toBe(grpc.status.UNAVAILABLE);
  expect(err.cause).toBeInstanceOf(Error);
  expect((err.cause as { code?: unknown }).code).toMatch(code);
}

describe('grpc guard: a client’s TLS mistake is not the host’s failure', () => {
  it('a wrong-CA client next to a correct one on an explicit shared breaker: the correct one is never refused, the host never counted', async () => {
    const server = await tlsEchoServer();
    const breaker = strictBreaker();
    // Two guards (two teams' clients in one process) and one guard holding both credentials.
    const wrongGuard = guarded({ breaker, retry: false });
    const rightGuard = guarded({ breaker, retry: false });
    const wrong = client(server.address, grpc.credentials.createSsl(), wrongGuard); // default trust store: TEST_CERT unknown
    const right = client(server.address, trusted(), rightGuard);
    const rightSameGuard = client(server.address, trusted(), wrongGuard);
    for (let i = 0; i < 5; i++) {
      await tlsFailure(call(wrong, 'Echo'), 'DEPTH_ZERO_SELF_SIGNED_CERT');
      expect(String(await call(right, 'Echo', `r${i}`))).toBe(`r${i}`);
      expect(String(await call(rightSameGuard, 'Echo', `s${i}`))).toBe(`s${i}`);
    }
    expect(server.calls()).toBe(10);
    expect(breaker.state(server.address)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it('a wrong-CA client on the default shared breaker: not one failed dial against the host, and the correct client is served', async () => {
    const server = await tlsEchoServer();
    const before = sharedBreaker().stats();
    const guard = guarded({ retry: false }); // no breaker option: the process-wide one
    const wrong = client(server.address, grpc.credentials.createSsl(), guard);
    const right = client(server.address, trusted(), guard);
    for (let i = 0; i < 5; i++) await tlsFailure(call(wrong, 'Echo'), 'DEPTH_ZERO_SELF_SIGNED_CERT');
    expect(String(await call(right, 'Echo', 'ok'))).toBe('ok');
    const after = sharedBreaker().stats();
    expect(after.failed - before.failed).toBe(0);
    expect(after.refused - before.refused).toBe(0);
    expect(sharedBreaker().state(server.address)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it('with retries on (the default), the wrong-CA call fails once with its TLS error and spends no retry on it', async () => {
    const server = await tlsEchoServer();
    const breaker = strictBreaker();
    const guard = guarded({ breaker });
    const wrong = client(server.address, grpc.credentials.createSsl(), guard);
    const right = client(server.address, trusted(), guard);
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) await tlsFailure(call(wrong, 'Echo', 'x', { deadline: Date.now() + 5_000 }), 'DEPTH_ZERO_SELF_SIGNED_CERT');
    const ms = performance.now() - t0;
    // One dial (settled as the host's success: it answered), no backoff waited; the later calls
    // fail with its error during grpc's reconnect backoff, dialling nothing.
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0, succeeded: 1 });
    expect(ms).toBeLessThan(1_000); // a retry would wait out grpc's 1 s reconnect backoff
    expect(String(await call(right, 'Echo', 'ok'))).toBe('ok');
  });

  it("a wrong-CA client fails its calls at once during grpc's reconnect backoff, as a grpc-js channel in TRANSIENT_FAILURE does, instead of a TLS handshake per call (an outside review: 249 connections in 3 s where plain grpc-js made 3); after the backoff it dials again", async () => {
    const server = await tlsEchoServer();
    // A TCP front counting the connections the server is given.
    let connections = 0;
    const [host, port] = server.address.split(':') as [string, string];
    const sockets = new Set<net.Socket>();
    const front = net.createServer((c) => {
      connections++;
      const up = net.connect(Number(port), host);
      for (const s of [c, up]) {
        sockets.add(s);
        s.on('error', () => {});
        s.on('close', () => {
          sockets.delete(s);
          c.destroy();
          up.destroy();
        });
      }
      c.pipe(up).pipe(c);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => front.close(() => resolve()));
    });
    const address = `127.0.0.1:${(front.address() as net.AddressInfo).port}`;
    const breaker = strictBreaker();
    const guard = guarded({ breaker, retry: false });
    const wrong = client(address, grpc.credentials.createSsl(), guard, { 'grpc.initial_reconnect_backoff_ms': 400, 'grpc.max_reconnect_backoff_ms': 400 });
    for (let i = 0; i < 20; i++) await tlsFailure(call(wrong, 'Echo'), 'DEPTH_ZERO_SELF_SIGNED_CERT'); // the same error each time
    expect(connections).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 600)); // past the backoff (400 ms ±20 %)
    await tlsFailure(call(wrong, 'Echo'), 'DEPTH_ZERO_SELF_SIGNED_CERT');
    expect(connections).toBe(2);
    const right = client(address, trusted(), guard);
    expect(String(await call(right, 'Echo', 'ok'))).toBe('ok'); // a right client beside it dials and is served
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it.each([
    ['its own verifyOptions', {}],
    ['behind ssl_target_name_override', { 'grpc.ssl_target_name_override': 'localhost' }],
  ])('a client whose checkServerIdentity throws (%s): fails at once with that error, nothing uncaught, never counted against the host (was: uncaught, the dial timed out and counted)', async (_name, channelOptions) => {
    const server = await tlsEchoServer();
    const breaker = strictBreaker();
    const guard = guarded({ breaker, retry: false });
    const thrown = new Error('identity callback bug');
    const broken = grpc.credentials.createSsl(Buffer.from(TEST_CERT), null, null, {
      checkServerIdentity: () => {
        throw thrown;
      },
    });
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    cleanup.push(() => void process.off('uncaughtException', onUncaught));
    const wrong = client(server.address, broken, guard, channelOptions);
    const right = client(server.address, trusted(), guarded({ breaker, retry: false }));
    const t0 = performance.now();
    for (let i = 0; i < 4; i++) {
      const err = await failure(call(wrong, 'Echo'));
      expect(err).not.toBeInstanceOf(HostUnavailableError);
      expect(err.cause).toBe(thrown);
    }
    expect(performance.now() - t0).toBeLessThan(1_500); // one connect timeout is 2 s
    expect(uncaught).toEqual([]);
    expect(String(await call(right, 'Echo', 'ok'))).toBe('ok');
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it('a wrong server name (ssl_target_name_override) never counts against the host either', async () => {
    const server = await tlsEchoServer();
    const breaker = strictBreaker();
    const guard = guarded({ breaker, retry: false });
    const wrong = client(server.address, trusted(), guard, { 'grpc.ssl_target_name_override': 'wrong.example' });
    const right = client(server.address, trusted(), guard);
    for (let i = 0; i < 4; i++) await tlsFailure(call(wrong, 'Echo'), 'ERR_TLS_CERT_ALTNAME_INVALID');
    expect(String(await call(right, 'Echo', 'ok'))).toBe('ok');
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });

  it('a peer that refuses the h2 ALPN protocol (a TLS alert) proves itself alive: no failed dial', async () => {
    // A TLS server that speaks only http/1.1: it answers grpc-js's ClientHello with an alert.
    const peer = tls.createServer({ key: TEST_KEY, cert: TEST_CERT, ALPNProtocols: ['http/1.1'] }, (s) => s.end());
    peer.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => peer.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => new Promise<void>((resolve) => peer.close(() => resolve())));
    const address = `127.0.0.1:${(peer.address() as net.AddressInfo).port}`;
    const breaker = strictBreaker();
    const guard = guarded({ breaker, retry: false });
    const wrong = client(address, trusted(), guard);
    for (let i = 0; i < 4; i++) await tlsFailure(call(wrong, 'Echo'), /^ERR_SSL_.*ALERT_NO_APPLICATION_PROTOCOL$/);
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
  });
});

/** A server on loopback (TLS with TEST_CERT and no ALPN, or plain TCP) running `onSocket`; its `host:port`. */
async function rawServer(secure: boolean, onSocket: (s: net.Socket) => void): Promise<string> {
  const server = secure ? tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, onSocket) : net.createServer(onSocket);
  return `127.0.0.1:${await listenLoopback(server, cleanup, secure ? 'secureConnection' : 'connection')}`;
}

/** An HTTP/1.1 server's answer to the HTTP/2 client preface. */
const http1 = (s: net.Socket): void => {
  s.on('error', () => {});
  s.once('data', () => s.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n'));
};

describe('grpc guard: a client without the certificate an mTLS server requires', () => {
  it('fails once with the alert as its cause (TLS 1.3 sends it after the client’s handshake), is not retried, and never gets the host refused for a client with the certificate', async () => {
    const { address, calls } = await tlsEchoServer(true);
    const breaker = strictBreaker();
    // Two teams' guards on one breaker, retries on (the default): the wrong one's call is not retried.
    const noCert = client(address, trusted(), guarded({ breaker }));
    const withCert = client(address, grpc.credentials.createSsl(Buffer.from(TEST_CERT), Buffer.from(TEST_KEY), Buffer.from(TEST_CERT)), guarded({ breaker }));
    for (let i = 0; i < 3; i++) {
      // Was: the cause only grpc-js's text, so each call was retried as not sent (5 dial rounds
      // for one call, each counted against the host), and withCert was refused.
      await tlsFailure(call(noCert, 'Echo'), 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
      expect(String(await call(withCert, 'Echo', 'hi'))).toBe('hi');
    }
    expect(calls()).toBe(3);
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0 });
    expect(breaker.stats().succeeded).toBeLessThanOrEqual(3 + 3); // one dial per failed call, and the good client's
  });

  it('a client whose certificate the server rejects (TLS 1.3: a hang-up after the handshake, no alert) fails once, typed, not retried, and never gets the host refused (was: the right client 0 of 10, an outside review)', async () => {
    const { address, calls } = await tlsEchoServer(true);
    const breaker = strictBreaker();
    const untrusted = client(address, grpc.credentials.createSsl(Buffer.from(TEST_CERT), Buffer.from(OTHER_KEY), Buffer.from(OTHER_CERT)), guarded({ breaker }));
    const withCert = client(address, grpc.credentials.createSsl(Buffer.from(TEST_CERT), Buffer.from(TEST_KEY), Buffer.from(TEST_CERT)), guarded({ breaker }));
    for (let i = 0; i < 4; i++) {
      const err = await failure(call(untrusted, 'Echo', 'x', { deadline: Date.now() + 5_000 }));
      expect(err).toBeInstanceOf(ChannelConnectError);
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.cause).toBeInstanceOf(ClientCertificateRejectedError);
      expect(err.details).toMatch(/asked for this client's certificate/);
    }
    for (let i = 0; i < 4; i++) expect(String(await call(withCert, 'Echo', `w${i}`))).toBe(`w${i}`);
    expect(calls()).toBe(4);
    // One dial (never retried; the later calls fail with its error during grpc's reconnect
    // backoff, as raw grpc-js's do), then the right client's one.
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0, succeeded: 2 });
  });
});

describe('grpc guard: a client pointed at a port that is not gRPC', () => {
  it.each([
    ['plaintext', false],
    ['TLS without ALPN', true],
  ])('an HTTP/1.1 server (%s) answering the preface is alive: no failed dial, however many calls', async (_name, secure) => {
    const address = await rawServer(secure, http1);
    const breaker = strictBreaker();
    const guard = guarded({ breaker, retry: false });
    const c = client(address, secure ? trusted() : grpc.credentials.createInsecure(), guard);
    for (let i = 0; i < 4; i++) {
      const err = await failure(call(c, 'Echo'));
      expect(err).not.toBeInstanceOf(HostUnavailableError);
      expect(err).toBeInstanceOf(ChannelConnectError);
    }
    // One dial: the later calls fail with its error during grpc's reconnect backoff, as raw grpc-js's do.
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, opened: 0, succeeded: 1 });
  });

  it.each([
    ['plaintext', false],
    ['TLS without ALPN', true],
  ])('with the default retry, a call to an HTTP/1.1 server (%s) fails at once, as raw grpc-js does: one connection, not three; the next, during the reconnect backoff, dials nothing', async (_name, secure) => {
    let connections = 0;
    const address = await rawServer(secure, (s) => {
      connections++;
      http1(s);
    });
    const breaker = strictBreaker();
    const c = client(address, secure ? trusted() : grpc.credentials.createInsecure(), guarded({ breaker }));
    for (let i = 0; i < 2; i++) {
      // Was: retried as never sent, 3 connections and about 1.5 s a call, each failing with the same "Protocol error".
      const err = await failure(call(c, 'Echo'));
      expect(err).toBeInstanceOf(ChannelConnectError);
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
    }
    expect(connections).toBe(1);
    expect(breaker.stats()).toMatchObject({ refused: 0, failed: 0, succeeded: 1 });
  });

  it('an insecure client aimed at the TLS-only port opens the host for plaintext dials only: a TLS client beside it is served, and its dial closes the host', async () => {
    const server = await tlsEchoServer();
    const breaker = strictBreaker();
    const wrong = client(server.address, grpc.credentials.createInsecure(), guarded({ breaker, retry: false }));
    // The TLS server hangs up on the cleartext preface without a byte: as a dead host would.
    for (let i = 0; i < 3; i++) expect(await failure(call(wrong, 'Echo'))).not.toBeInstanceOf(HostUnavailableError);
    expect((await failure(call(wrong, 'Echo'))).cause).toBeInstanceOf(HostUnavailableError); // opened: the wrong client fails fast
    expect(breaker.state(server.address)?.state).toBe('open');
    const right = client(server.address, trusted(), guarded({ breaker, retry: false }));
    expect(String(await call(right, 'Echo', 'ok'))).toBe('ok'); // it was refused: "3 consecutive failed dial round(s)"
    expect(server.calls()).toBe(1);
    expect(breaker.state(server.address)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it("a TLS client's waitForReady is ready at once while only plaintext dials keep the host open", async () => {
    const server = await tlsEchoServer();
    const breaker = strictBreaker();
    // What an insecure client hung up on by this TLS port leaves behind: open, for plaintext dials.
    for (let i = 0; i < 3; i++) breaker.admit(server.address, undefined, 'plain').failed(new Error('closed during the handshake'));
    const right = client(server.address, trusted(), guarded({ breaker, retry: false }));
    const err = await new Promise<Error | undefined>((resolve) => right.waitForReady(Date.now() + 3_000, resolve));
    expect(err).toBeUndefined(); // was "Failed to connect before the deadline": the guard read the host as open
    expect(breaker.state(server.address)?.state).toBe('closed');
  });

  it('while a peer that hangs up without a byte of HTTP/2 still counts: the third such dial opens the host', async () => {
    const address = await rawServer(true, (s) => {
      s.on('error', () => {});
      s.end();
    });
    const breaker = strictBreaker();
    const guard = guarded({ breaker, retry: false });
    const c = client(address, trusted(), guard);
    for (let i = 0; i < 3; i++) expect(await failure(call(c, 'Echo'))).not.toBeInstanceOf(HostUnavailableError);
    expect((await failure(call(c, 'Echo'))).cause).toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 1, succeeded: 0 });
  });
});
