/**
 * Sees the sockets of one channel's connection as grpc-js builds it, so a connect the pool gave up
 * on can be ended, and a timeout can name the stage that stalled.
 *
 * grpc-js cannot cancel a connection attempt: closing a channel mid-connect leaves its socket
 * waiting for the peer (a peer that accepts TCP and never sends SETTINGS holds it for good). Its
 * credentials, though, are handed every TCP socket once connected (to run TLS, or to pass it on
 * when insecure). Wrapping them records each socket and the stage reached; aborting destroys them.
 * Only the TCP connect itself stays out of reach: against a blackholed host grpc-js's SYNs go on
 * until the kernel gives up (about 2 minutes on Linux), and a socket that connects after the
 * abort is destroyed as soon as it is handed over.
 *
 * This uses grpc-js's `_createSecureConnector` (1.12 and later); with credentials that lack it the
 * sockets go untracked and only the stage names are lost.
 *
 * @module
 */
import type net from 'node:net';
import { certificateRejected, sentRequestedCertificate } from '../../guard/client-certificate.js';
import type { PeerCertificate } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { ConnectPhase } from '../../core/errors.js';
import { caughtIdentityCheck } from '../../guard/identity-check.js';

type CreateSecureConnector = grpc.ChannelCredentials['_createSecureConnector'];
type SecureConnector = ReturnType<CreateSecureConnector>;
type SecureConnectResult = Awaited<ReturnType<SecureConnector['connect']>>;

/** What one channel's connection attempt has reached. */
export class ConnectTracker {
  /** The stage the connection is in; `onPhase` hears every change. */
  phase: ConnectPhase;
  onPhase: ((phase: ConnectPhase) => void) | undefined;
  /** Whether the credentials could be wrapped (so sockets are seen at all). */
  tracking = false;
  /**
   * The error the credentials' own handshake (TLS) failed with last, as Node raised it: a
   * certificate, hostname or ALPN verdict keeps its `code` here, where grpc-js keeps only its text.
   */
  handshakeError: unknown;
  /**
   * Whether the peer presented its certificate (the client's own `checkServerIdentity` was asked
   * about it): the host answered, whatever that check then said.
   */
  certificatePresented = false;
  /**
   * What the client's own `checkServerIdentity` answered in the last handshake when it refused
   * the certificate (an Error returned or thrown: a pin that does not match); undefined when it
   * accepted it, or was never asked.
   */
  identityRefused: Error | undefined;
  /**
   * Whether the server asked for this client's certificate in the last TLS handshake and the
   * client sent one: a hang-up with no byte after it is the server's refusal of the certificate
   * (see `client-certificate.ts`), not a dead host.
   */
  certificateSent = false;
  readonly #sockets = new Set<net.Socket>();
  /** The sockets HTTP/2 was to run over (a TLS socket counts cleartext), kept after they close. */
  readonly #carriers: net.Socket[] = [];
  #handedOver = 0;
  #aborted = false;

  constructor(phase: ConnectPhase) {
    this.phase = phase;
  }

  /** Moves to `phase`. */
  enter(phase: ConnectPhase): void {
    this.phase = phase;
    this.onPhase?.(phase);
  }

  /** Records a socket of this channel; destroys it at once if the attempt was already given up. */
  add(socket: net.Socket): void {
    if (this.#aborted) {
      socket.destroy();
      return;
    }
    if (this.#sockets.has(socket)) return;
    this.#handedOver++;
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  /**
   * Records a TLS-layer error (`ERR_SSL_...`) raised on a socket after its handshake resolved,
   * as the handshake's own error, unless one is already kept or the attempt was given up.
   */
  tlsAlert(err: unknown): void {
    const code = (err as { code?: unknown } | null)?.code;
    if (this.#aborted || this.handshakeError !== undefined || typeof code !== 'string' || !code.startsWith('ERR_SSL_')) return;
    this.handshakeError = err;
  }

  /** Records `socket` as one HTTP/2 runs over (see {@link ConnectTracker.answered}). */
  carry(socket: net.Socket): void {
    this.#carriers.push(socket);
  }

  /**
   * Whether the peer sent any HTTP/2-layer byte (after TLS, if any): a protocol answer, even one
   * that failed the handshake (an HTTP/1.1 reply to the preface, a GOAWAY), proves the host alive.
   */
  get answered(): boolean {
    return this.#carriers.some((s) => s.bytesRead > 0);
  }

  /** Whether the connection ended as a rejected client certificate ends one (see {@link certificateSent}). */
  get certificateRejected(): boolean {
    const last = this.#carriers.at(-1);
    return last !== undefined && certificateRejected(this.certificateSent, last);
  }

  /** Whether the attempt was given up. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /**
   * Whether the established connection's transport is closed (a dropped connection, as opposed to
   * a GOAWAY, which leaves the socket open while calls drain). False when nothing was handed over.
   */
  get transportClosed(): boolean {
    if (this.#handedOver === 0) return false;
    for (const s of this.#sockets) if (!s.destroyed) return false;
    return true;
  }

  /** Gives the attempt up: destroys every socket seen, and any handed over later. */
  abort(): void {
    this.#aborted = true;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
  }
}

/**
 * `credentials` wrapped so that `tracker` sees the sockets and stages of the one channel built
 * with them; `credentials` themselves when grpc-js offers no place to watch from.
 */
export function trackCredentials(credentials: grpc.ChannelCredentials, tracker: ConnectTracker): grpc.ChannelCredentials {
  if (typeof (credentials as Partial<grpc.ChannelCredentials>)._createSecureConnector !== 'function') return credentials;
  tracker.tracking = true;
  return new TrackedCredentials(credentials, tracker);
}

class TrackedCredentials extends grpc.ChannelCredentials {
  readonly #inner: grpc.ChannelCredentials;
  readonly #tracker: ConnectTracker;

  constructor(inner: grpc.ChannelCredentials, tracker: ConnectTracker) {
    super();
    this.#inner = inner;
    this.#tracker = tracker;
  }

  override _isSecure(): boolean {
    return this.#inner._isSecure();
  }

  override _equals(other: grpc.ChannelCredentials): boolean {
    return other === this;
  }

  override _createSecureConnector(...args: Parameters<CreateSecureConnector>): SecureConnector {
    const inner = this.#inner._createSecureConnector(...args);
    const tracker = this.#tracker;
    catchIdentityCheck(inner, tracker);
    const secure = this.#inner._isSecure();
    return {
      waitForReady: () => {
        // No TCP connect once the attempt was given up (every failed or abandoned connect is,
        // before its channel is closed). After a failed connect grpc-js's pick-first asks the
        // subchannel to connect again, which in TRANSIENT_FAILURE only sets its
        // `continueConnecting`; closing the channel neither clears that nor stops the subchannel's
        // reconnect backoff timer, nor shuts down its connector. So about 1 s later
        // (grpc.initial_reconnect_backoff_ms) the timer moves the orphaned subchannel to
        // CONNECTING and it dials the host again: unasked, and unseen by the breaker. grpc-js
        // awaits this before every connect: rejecting here fails that redial before any socket
        // exists, and with no one asking again, the subchannel then settles IDLE.
        if (tracker.aborted) return Promise.reject(new Error('connection attempt given up'));
        // grpc-js asks right before its TCP connect: the name has resolved.
        if (tracker.phase === 'lookup') tracker.enter('tcp');
        return inner.waitForReady();
      },
      connect: async (socket: net.Socket): Promise<SecureConnectResult> => {
        tracker.add(socket);
        if (tracker.aborted) throw new Error('connection attempt given up');
        tracker.enter(secure ? 'tls' : 'handshake');
        let result: SecureConnectResult;
        try {
          result = await inner.connect(socket);
        } catch (err) {
          if (!tracker.aborted) tracker.handshakeError = err;
          throw err;
        }
        if (result.socket !== socket) tracker.add(result.socket);
        tracker.carry(result.socket);
        if (secure) tracker.certificateSent = sentRequestedCertificate(result.socket);
        // A TLS 1.3 server that wants a client certificate sends its alert after the client's
        // handshake is done: it reaches the socket after this resolved, and grpc-js keeps only
        // its text. Kept with its code, it tells the host answered (dialFailureOutcome).
        if (secure) result.socket.once('error', (err: unknown) => tracker.tlsAlert(err));
        if (tracker.aborted) {
          result.socket.destroy();
          throw new Error('connection attempt given up');
        }
        tracker.enter('handshake');
        return result;
      },
      getCallCredentials: () => inner.getCallCredentials(),
      destroy: () => inner.destroy(),
    };
  }
}

/**
 * Makes the user's `checkServerIdentity` (grpc's `verifyOptions`, wrapped by grpc-js for
 * `grpc.ssl_target_name_override`) unable to throw, in the TLS options grpc-js built for this one
 * connector: a throw escaped uncaught from the handshake, the dial waited out its connect timeout,
 * and counted against the host, so one client's broken callback got the host refused for every
 * client of the breaker (an outside review). Returned, the error fails the handshake as a rejected
 * certificate does. Credentials that build their TLS options per connect (grpc-js's certificate
 * providers) keep no options here and are left as they are.
 */
function catchIdentityCheck(connector: object, tracker: ConnectTracker): void {
  const options = (connector as { connectionOptions?: { checkServerIdentity?: unknown } }).connectionOptions;
  if (typeof options !== 'object' || options === null || typeof options.checkServerIdentity !== 'function') return;
  const caught = caughtIdentityCheck(options.checkServerIdentity as Parameters<typeof caughtIdentityCheck>[0]);
  options.checkServerIdentity = function checkServerIdentity(this: unknown, host: string, cert: PeerCertificate) {
    tracker.certificatePresented = true;
    const verdict = caught.call(this, host, cert);
    tracker.identityRefused = verdict;
    return verdict;
  };
}
