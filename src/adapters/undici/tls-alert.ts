/**
 * A TLS alert a server sends after the client's handshake is done (TLS 1.3: "certificate
 * required" from a server that wants a client certificate) reaches undici as a socket error, and
 * undici fails the request with a bare `SocketError` ("other side closed"), the alert lost. Read
 * alone, that is a connection that died under an unanswered request, which the retrying layer
 * would send again on a fresh connection, each a full TLS handshake refused the same way (three
 * dials for one request where raw undici makes one). Here the guarded connector's TLS sockets are
 * watched for such an alert, and a request that failed on one gets it as its error's `cause`:
 * `classify()` then reads a handshake the peer refused (permanent, never retried), and the caller
 * sees why.
 *
 * @module
 */
import type net from 'node:net';
import type { TLSSocket } from 'node:tls';
import { heardOnLiveConnection } from '../../core/classify.js';
import { TLS_MISMATCH_ALERT } from '../../core/tls-codes.js';

/** Where a connection runs: both ends, as undici's `SocketError.socket` reports them. */
interface Ends {
  localAddress?: string | undefined;
  localPort?: number | undefined;
  remoteAddress?: string | undefined;
  remotePort?: number | undefined;
}

/**
 * Alerts heard, by the connection's ends, until a turn after the connection closes (undici fails
 * its requests while it closes). Only connections that met an alert are in it.
 */
const alerts = new Map<string, Error>();

function endsKey(e: Ends): string {
  return `${e.localAddress}|${e.localPort}|${e.remoteAddress}|${e.remotePort}`;
}

/**
 * Watches `socket`, a connected socket handed to undici. Its error came from a live connection
 * (`heardOnLiveConnection`): whatever its code, never a dial's "not sent" (an SSL record error
 * ends a live TLS connection with a code a handshake also fails with, and read as a dial's, a POST
 * the server had received was sent again). One exception, on TLS: an alert from its peer saying
 * the two ends' configurations disagree (`TLS_MISMATCH_ALERT`: a certificate required or
 * refused...) before the peer sent a byte of HTTP is the handshake's own verdict, kept for
 * {@link withTlsAlert}. An alert on a connection that has answered (an `internal_error` from a
 * failing terminator) may follow a request the server read: a dead connection, maybe sent.
 */
export function watchErrors(socket: net.Socket): void {
  const secure = (socket as Partial<TLSSocket>).encrypted === true;
  // Read now: a destroyed socket no longer knows its ends (unless something asked before).
  const key = secure ? endsKey(socket) : '';
  socket.once('error', (err: Error & { code?: unknown }) => {
    if (!secure || typeof err.code !== 'string' || !err.code.startsWith('ERR_SSL_') || !TLS_MISMATCH_ALERT.test(err.code) || socket.bytesRead > 0) {
      heardOnLiveConnection(err);
      return;
    }
    alerts.set(key, err);
    socket.once('close', () => setImmediate(() => alerts.delete(key)));
  });
}

/**
 * Gives `err`, a request's failure, the alert its connection met as its `cause`, when it is
 * undici's bare `SocketError` for such a connection. Returns `err`.
 */
export function withTlsAlert(err: unknown): unknown {
  if (alerts.size === 0) return err;
  const e = err as { code?: unknown; socket?: Ends; cause?: unknown } | null;
  if (e?.code !== 'UND_ERR_SOCKET' || e.cause !== undefined || typeof e.socket !== 'object' || e.socket === null) return err;
  const alert = alerts.get(endsKey(e.socket));
  if (alert !== undefined) Object.defineProperty(e, 'cause', { value: alert, writable: true, configurable: true, enumerable: false });
  return err;
}
