/**
 * Telling a server's refusal of this client's certificate from a dead host. Node's TLS servers
 * (node:https, node:http2, grpc-js) check a client's certificate only after the handshake, and
 * under TLS 1.3 the client's side of the handshake is done by then: a certificate the server
 * rejects ends in a hang-up with no alert and no byte, exactly what a dead backend behind a TLS
 * terminator looks like. Counted against the host, one client's expired certificate got the host
 * refused for every correctly configured client on the breaker (an outside review: 0 of 10 served).
 *
 * What sets the two apart is read at the end of the handshake: the server sent a
 * CertificateRequest (OpenSSL fills a client's shared signature algorithms only from one) and this
 * client sent a certificate in answer. A server that asked for our certificate and hung up before
 * a byte of its protocol refused it, most likely; it answered (it presented its certificate too).
 *
 * @module
 */
import type net from 'node:net';

/** The two reads this needs of a TLS socket (Node's `TLSSocket`). */
interface HandshakeFacts {
  getSharedSigalgs(): string[];
  getCertificate(): object | null;
}

/**
 * Whether the server asked this client for its certificate in the handshake just done, and the
 * client sent one. Call it once the handshake is done and before the socket closes (its TLS state
 * is gone after); false for a plain socket, or when it cannot be read.
 */
export function sentRequestedCertificate(socket: net.Socket): boolean {
  const tls = socket as Partial<HandshakeFacts> & { encrypted?: boolean };
  if (tls.encrypted !== true || typeof tls.getSharedSigalgs !== 'function' || typeof tls.getCertificate !== 'function') return false;
  try {
    if (tls.getSharedSigalgs().length === 0) return false; // no CertificateRequest
    const own = tls.getCertificate();
    return own !== null && Object.keys(own).length > 0; // an empty object: no certificate sent
  } catch {
    return false; // a destroyed socket: nothing to read
  }
}

/**
 * Whether a connection ended the way a rejected client certificate ends it: after a handshake
 * in which the client sent the certificate the server asked for (`sentCertificate`, read by
 * {@link sentRequestedCertificate} when it was done), with not one byte from the server since.
 */
export function certificateRejected(sentCertificate: boolean, socket: { readonly bytesRead: number }): boolean {
  return sentCertificate && socket.bytesRead === 0;
}
