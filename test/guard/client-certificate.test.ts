/**
 * Telling a server's refusal of this client's certificate from a dead host (client-certificate.ts),
 * read from real TLS handshakes on loopback: whether the server asked for a certificate and the
 * client sent one; and what the resulting error means to the breaker and to `classify`.
 */
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { ClientCertificateRejectedError, ErrorCodes } from '../../src/core/errors.js';
import { certificateRejected, sentRequestedCertificate } from '../../src/guard/client-certificate.js';
import { dialFailureOutcome } from '../../src/guard/dial-outcome.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { OTHER_CERT, OTHER_KEY } from '../helpers/other-cert.js';

const undo: (() => void)[] = [];
afterEach(() => undo.splice(0).forEach((f) => f()));

/** What `sentRequestedCertificate` says of a client socket once its handshake is done. */
async function afterHandshake(requestCert: boolean, clientCert: boolean, maxVersion: tls.SecureVersion = 'TLSv1.3'): Promise<boolean> {
  const server = tls.createServer({ key: TEST_KEY, cert: TEST_CERT, requestCert, rejectUnauthorized: false, maxVersion }, (s) => s.on('error', () => {}));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  undo.push(() => server.close());
  const socket = tls.connect({
    host: '127.0.0.1',
    port: (server.address() as net.AddressInfo).port,
    ca: TEST_CERT,
    servername: 'localhost',
    ...(clientCert ? { key: OTHER_KEY, cert: OTHER_CERT } : {}),
  });
  undo.push(() => socket.destroy());
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  return sentRequestedCertificate(socket);
}

describe('sentRequestedCertificate', () => {
  it.each([
    [true, true, 'TLSv1.3', true],
    [true, true, 'TLSv1.2', true],
    [true, false, 'TLSv1.3', false], // asked, none sent
    [false, true, 'TLSv1.3', false], // one configured, never asked for
    [false, false, 'TLSv1.3', false],
  ] as const)('server asks: %s, client has one: %s (%s) → %s', async (requestCert, clientCert, version, want) => {
    expect(await afterHandshake(requestCert, clientCert, version)).toBe(want);
  });

  it('a plain socket, something that is not a socket, or one whose reads throw: false', async () => {
    const server = net.createServer((s) => s.destroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    undo.push(() => server.close());
    const plain = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    undo.push(() => plain.destroy());
    await new Promise((resolve) => plain.once('connect', resolve));
    expect(sentRequestedCertificate(plain)).toBe(false);
    const fake = (o: object): net.Socket => o as net.Socket;
    const facts = { encrypted: true, getSharedSigalgs: () => ['ECDSA+SHA256'], getCertificate: () => ({ subject: {} }) };
    expect(sentRequestedCertificate(fake(facts))).toBe(true);
    expect(sentRequestedCertificate(fake({ ...facts, encrypted: false }))).toBe(false);
    expect(sentRequestedCertificate(fake({ ...facts, getSharedSigalgs: undefined }))).toBe(false);
    expect(sentRequestedCertificate(fake({ ...facts, getCertificate: undefined }))).toBe(false);
    expect(sentRequestedCertificate(fake({ ...facts, getCertificate: () => null }))).toBe(false);
    expect(sentRequestedCertificate(fake({ ...facts, getCertificate: () => ({}) }))).toBe(false);
    expect(sentRequestedCertificate(fake({ ...facts, getSharedSigalgs: () => [] }))).toBe(false);
    expect(sentRequestedCertificate(fake({ ...facts, getSharedSigalgs: () => { throw new Error('destroyed'); } }))).toBe(false);
  });
});

describe('certificateRejected', () => {
  it('only a certificate sent on request, and then not one byte from the server', () => {
    expect(certificateRejected(true, { bytesRead: 0 })).toBe(true);
    expect(certificateRejected(true, { bytesRead: 1 })).toBe(false);
    expect(certificateRejected(false, { bytesRead: 0 })).toBe(false);
  });
});

describe('ClientCertificateRejectedError', () => {
  it('is the host answering (a success for the breaker), a dial not sent, and not worth a retry', () => {
    const err = new ClientCertificateRejectedError('127.0.0.1:443', { cause: new Error('other side closed') });
    expect(err.code).toBe(ErrorCodes.CLIENT_CERTIFICATE_REJECTED);
    expect(err.target).toBe('127.0.0.1:443');
    expect(err.message).toMatch(/^127\.0\.0\.1:443 closed the connection right after a TLS handshake in which it asked for this client's certificate/);
    expect(dialFailureOutcome(err)).toBe('succeeded');
    expect(dialFailureOutcome(Object.assign(new Error('wrapped'), { cause: err }))).toBe('succeeded');
    expect(classify(err)).toMatchObject({ kind: 'dial', code: ErrorCodes.CLIENT_CERTIFICATE_REJECTED, notSent: true, transient: false });
  });
});
