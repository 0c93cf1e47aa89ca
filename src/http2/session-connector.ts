/**
 * How the HTTP/2 client opens, watches and closes sessions for its ConnectionPool.
 *
 * Establishment is one bounded dial: TCP, TLS (ALPN h2) and the HTTP/2 preface/SETTINGS exchange.
 * A peer that accepts TCP and never sends SETTINGS fails in one connect timeout (phase
 * `handshake`) instead of hanging: a bare `http2.connect` gets no SETTINGS, error or close for
 * minutes. Once open, keep-alive PINGs mark a silent peer's session gone, GOAWAY retires it, and a
 * closed or failed session is gone.
 *
 * @module
 */
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import { type Clock, type TimerHandle, unrefTimer } from '../core/clock.js';
import { ClientCertificateRejectedError, KeepAliveTimeoutError, TransportClosedError } from '../core/errors.js';
import { certificateRejected, sentRequestedCertificate } from '../guard/client-certificate.js';
import { connect, openSocket, tlsTransportFor } from '../guard/connect.js';
import { TlsSessionCache } from '../guard/tls-sessions.js';
import type { DialContext } from '../guard/dial.js';
import type { HostBreaker, Transport } from '../guard/host-breaker.js';
import type { ConnectionWatch, Connector } from '../pool/connection-pool.js';

/** What the connector needs from the client's options. */
export interface SessionConnectorOptions {
  /** TLS options for `https:` origins; a secure context is built once per origin. */
  tls: tls.SecureContextOptions & Pick<tls.ConnectionOptions, 'rejectUnauthorized' | 'servername' | 'checkServerIdentity'>;
  /** Local SETTINGS. */
  settings: http2.Settings | undefined;
  /** Session limits passed to `http2.connect` (`maxSessionMemory`...), checked. */
  session: http2.ClientSessionOptions;
  /** PING interval, ms; 0 disables keep-alive. */
  keepAliveInterval: number;
  /** How long a PING may go unanswered before the session is gone, ms. */
  keepAliveTimeout: number;
  clock: Clock;
  /** Bound on one establishment, ms (per-address connects bound themselves with it). */
  connectTimeout: number;
  /**
   * The client's breaker. With one, a name is dialled per address (see `connect`'s
   * `perAddress`): the connector guards and bounds those dials itself.
   */
  breaker: HostBreaker | null;
  /** Resolves names (per address); default `dns.lookup`. */
  lookup: net.LookupFunction | undefined;
}

const noop = (): void => {};

/** TLS sessions kept for resumption, one per origin (undici's default count). */
const TLS_SESSIONS = 100;

/** node:http2's default `maxSessionMemory`, MB. */
const DEFAULT_SESSION_MEMORY = 10;

/** The GOAWAY a session received: its code and the last stream the peer says it processed. */
export interface GoawayReceived {
  readonly code: number;
  readonly lastStreamID: number;
}

const goaways = new WeakMap<http2.ClientHttp2Session, GoawayReceived>();

/**
 * The socket each session was made on. Closing a session closes it too: after a GOAWAY on an
 * idle session Node 20 can mark the session destroyed without ever closing its socket or
 * emitting 'close', and a session closed then would leave the connection open.
 */
const sockets = new WeakMap<http2.ClientHttp2Session, net.Socket>();

/** How to retire each watched session from outside its watch (see {@link retireRefusing}, {@link retireUnusable}). */
const retirers = new WeakMap<http2.ClientHttp2Session, { refusing: () => void; unusable: () => void; unsent: (bytes: number) => void }>();

/**
 * Retires `session` (no new requests; its streams finish) when one of its streams was reset with
 * ENHANCE_YOUR_CALM. node:http2 caps the memory a session may hold (`maxSessionMemory`, 10 MB):
 * past it (a big upload the server answered without reading it, uploads that timed out, big
 * downloads cancelled) the session refuses every new stream with that code, for good, while the
 * server runs each request and PINGs still pass. Kept ("a reset retires nothing"), every request
 * to the origin failed: 50 of 50 in 10 s, each run at the server (an outside review). A peer
 * saying it too (rate limiting) gets a new session, as a client honouring it would open.
 */
export function retireRefusing(session: http2.ClientHttp2Session): void {
  retirers.get(session)?.refusing();
}

/**
 * Charges to `session` the `bytes` of a request body its exchange left unsent (cut by its
 * timeout, the caller's abort, an answer before the body was read), and retires the session once
 * such bytes reach half its `maxSessionMemory`. node:http2 keeps them counted against the cap
 * after the stream is reset, for the session's life: four cut 3 MB uploads, or eleven of 1 MB,
 * and every later stream on it is refused with ENHANCE_YOUR_CALM (measured, raw node:http2
 * alike), after the server ran it. Retired at the first refusal only, a burst sent in between
 * failed whole (an outside review: 10 of 10 GETs after one 10 MB upload timed out). Half: the
 * session's own buffers count against the cap too. A cap raised for big uploads keeps its session.
 */
export function leftUnsent(session: http2.ClientHttp2Session, bytes: number): void {
  retirers.get(session)?.unsent(bytes);
}

/**
 * Tells the pool, now, that `session` takes no new stream: node:http2 closed it on its own (its
 * GOAWAY sent after a stream the peer refused for an oversized header, say) or destroyed it, and
 * its 'goaway' or 'close' event, if any, comes later. Requests sent on it in that gap failed with
 * ERR_HTTP2_GOAWAY_SESSION or ERR_HTTP2_INVALID_SESSION, certainly unsent, yet reached their
 * callers, as the pool still saw the session usable (an outside review: 168 of 400 requests, none
 * seen by the server). Destroyed: gone; closed: retired (its streams finish).
 */
export function retireUnusable(session: http2.ClientHttp2Session): void {
  retirers.get(session)?.unusable();
}

/**
 * @internal The GOAWAY `session` received, if any (recorded for its whole life, before anyone else
 * hears of it). A session that has one takes no new request, and a stream above `lastStreamID`
 * was provably not processed (RFC 9113 §6.8).
 */
export function goawayOf(session: http2.ClientHttp2Session): GoawayReceived | undefined {
  return goaways.get(session);
}

/** Most origins whose TLS context is kept; past it the cache starts over (bounded memory). */
const CONTEXT_CACHE = 256;

/** Opens sessions to origins (`http://h:p` for h2c, `https://h:p` for TLS). */
/**
 * How many keep-alive bounds (`keepAliveInterval + keepAliveTimeout`) a session draining after
 * the peer's GOAWAY may stay silent before it is gone: 3, 60 s by default. Without a PING a quiet
 * peer and a frozen one look alike, and long polls, sparse event streams and slow answers are
 * quiet for longer than a PING takes; a minute of silence from a peer that is shutting down is
 * taken as death.
 */
const DRAIN_SILENCE = 3;

export class SessionConnector implements Connector<http2.ClientHttp2Session> {
  readonly #options: SessionConnectorOptions;
  readonly #contexts = new Map<string, tls.ConnectionOptions>();
  /** TLS sessions by origin, offered when it is dialled again (see TlsSessionCache). */
  readonly #sessions = new TlsSessionCache(TLS_SESSIONS);

  constructor(options: SessionConnectorOptions) {
    this.#options = options;
  }

  /**
   * An `https:` origin is dialled over TLS, naming the server name it sends (the client's
   * `tls.servername`, else the origin's host when it is a name); an `http:` one (h2c) in the clear.
   */
  transport(origin: string): Transport {
    if (!origin.startsWith('https:')) return 'plain';
    return tlsTransportFor(this.#options.tls.servername, new URL(origin).hostname);
  }

  /**
   * Whether `origin`'s host is a name this connector dials per address (with the client's
   * breaker, each address its own entry, the HTTP/2 handshake inside each address's dial): the
   * pool then leaves guarding and bounding to it.
   */
  guardsItself(origin: string): boolean {
    if (this.#options.breaker === null) return false;
    const host = new URL(origin).hostname;
    return !host.startsWith('[') && net.isIP(host) === 0;
  }

  async connect(origin: string, ctx: DialContext): Promise<http2.ClientHttp2Session> {
    const url = new URL(origin);
    const secure = url.protocol === 'https:';
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = Number(url.port || (secure ? 443 : 80));
    const tlsOptions = secure ? this.#withSession(origin, this.#tlsFor(origin)) : undefined;
    const sessions = secure ? this.#sessions : undefined;
    if (this.guardsItself(origin)) {
      // Each address's dial runs TCP, TLS and the SETTINGS exchange; the one that wins is kept.
      const established = new WeakMap<net.Socket, http2.ClientHttp2Session>();
      const { breaker, connectTimeout, clock, lookup } = this.#options;
      const socket = await connect(
        { host, port },
        {
          breaker,
          timeout: connectTimeout,
          clock,
          signal: ctx.signal,
          tls: tlsOptions,
          ...(lookup === undefined ? {} : { socket: { lookup } }),
          handshake: (sock, inner) => {
            sessions?.remember(origin, sock as tls.TLSSocket);
            return this.#handshake(origin, sock, inner).then((session) => void established.set(sock, session));
          },
        },
      );
      return established.get(socket)!;
    }
    const socket = await openSocket({ host, port }, { tls: tlsOptions }, ctx);
    sessions?.remember(origin, socket as tls.TLSSocket);
    ctx.phase = 'handshake';
    return this.#handshake(origin, socket, ctx);
  }

  /** The HTTP/2 preface and SETTINGS exchange on a connected socket, watching `ctx.signal`. */
  #handshake(origin: string, socket: net.Socket, ctx: DialContext): Promise<http2.ClientHttp2Session> {
    // `servername` names the request's authority, as node:http2 does when it dials itself: a
    // client that reaches a host by address and names the virtual host by SNI must reach that
    // host (was: `:authority` said the address, and the server's default host answered).
    const { servername } = this.#options.tls;
    const session = http2.connect(origin, {
      ...this.#options.session,
      createConnection: () => socket,
      settings: this.#options.settings,
      ...(servername !== undefined && servername !== '' && origin.startsWith('https:') ? { servername } : {}),
    });
    sockets.set(session, socket);
    // Read now, while the handshake's state is there: a hang-up without a byte after a server
    // asked for our certificate is its refusal of it, not a dead host (see client-certificate.ts).
    const sentCertificate = sentRequestedCertificate(socket);
    // Errors reach the pool through watch(); this keeps one arriving after unwatch from crashing.
    session.on('error', noop);
    // Registered first, so it is known before any stream hears of the GOAWAY (node emits 'goaway'
    // before it closes or destroys the session and fails its streams).
    session.on('goaway', (code: number, lastStreamID: number) => {
      if (!goaways.has(session)) goaways.set(session, { code, lastStreamID });
    });
    return new Promise((resolve, reject) => {
      const cleanup = (): void => {
        session.off('remoteSettings', onSettings);
        session.off('error', onError);
        session.off('close', onClose);
        socket.off('error', onError);
        ctx.signal.removeEventListener('abort', onAbort);
      };
      const fail = (thrown: unknown): void => {
        const hungUp = thrown instanceof TransportClosedError || ['ECONNRESET', 'EPIPE'].includes((thrown as { code?: unknown } | null)?.code as string);
        const err = hungUp && certificateRejected(sentCertificate, socket) ? new ClientCertificateRejectedError(origin, { cause: thrown }) : thrown;
        // Bytes from the peer after TCP/TLS (a protocol answer: an HTTP/1.1 reply to the preface,
        // a GOAWAY) prove it alive, so this failure never counts against the host (DESIGN rule 1).
        // A peer that hangs up or stalls without a byte still does. (A TLS socket counts cleartext.)
        if (socket.bytesRead > 0) ctx.answered = true;
        cleanup();
        session.destroy();
        socket.destroy();
        reject(err);
      };
      const onSettings = (): void => {
        cleanup();
        resolve(session);
      };
      const onError = (err: Error): void => fail(err);
      const onClose = (): void => fail(new TransportClosedError(origin, 'connection (in its HTTP/2 handshake)', { handshake: true }));
      const onAbort = (): void => fail(ctx.signal.reason);
      session.once('remoteSettings', onSettings);
      session.once('error', onError);
      session.once('close', onClose);
      // The socket's own errors too: a TLS 1.3 server that wants a client certificate sends its
      // alert after the client's handshake is done, and node:http2 reports it on the socket
      // alone (the session neither errors nor closes). Unheard, the dial stalled to its timeout
      // and counted against a live host; heard, the alert proves it alive (dialFailureOutcome).
      socket.once('error', onError);
      ctx.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  close(session: http2.ClientHttp2Session, reason: unknown): Promise<void> {
    const socket = sockets.get(session);
    if (session.destroyed) {
      socket?.destroy();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      let closed = false;
      const done = (): void => {
        if (closed) return;
        closed = true;
        socket?.destroy(); // its session is gone: never leave the connection behind it open
        resolve();
      };
      session.once('close', done);
      socket?.once('close', done);
      // Node ends a closed session by ending its socket, then waits for the peer's end before
      // 'close'. A peer draining after its GOAWAY may keep its side open for good: once our end
      // is out and the session destroyed, nothing more will come over it.
      socket?.once('finish', () => {
        if (session.destroyed) done();
      });
      // Retired sessions close only once drained, so both paths end at once: destroy when the
      // transport is dead (nothing to say goodbye to), close gracefully otherwise. Destroyed
      // with the reason: node:http2 then fails each stream still open with it. Destroyed without
      // one, it ended them as if complete (NO_ERROR), so a body cut by a silent peer's keep-alive
      // timeout or by close() after closeTimeout read as a whole, shorter body.
      // (NO_ERROR in the GOAWAY still: the peer is told what it was told before.)
      if (reason instanceof Error) session.destroy(reason, http2.constants.NGHTTP2_NO_ERROR);
      else session.close();
    });
  }

  watch(session: http2.ClientHttp2Session, watch: ConnectionWatch, origin: string): () => void {
    const onGoaway = (): void => watch.retire('goaway');
    // maxSessionMemory is in megabytes: read as 10^6 bytes, the smaller of the two readings.
    const unsentLimit = ((this.#options.session.maxSessionMemory ?? DEFAULT_SESSION_MEMORY) * 1e6) / 2;
    let unsent = 0;
    retirers.set(session, {
      refusing: () => watch.retire('refusing'),
      unsent: (bytes) => {
        unsent += bytes;
        if (unsent >= unsentLimit) watch.retire('refusing');
      },
      // Retired first even when destroyed: the pool then releases the session's rides a turn
      // later, so the request that found it dead lands first with its own "not sent" and goes to
      // a fresh session. Gone at once, it was released as cut by the death (maybe sent), never
      // resent on a session that had served nothing: node:http2 destroys a session still
      // connecting when it refuses a header, and the next GET failed CONNECTION_GONE (a review).
      unusable: () => {
        watch.retire('goaway');
        if (session.destroyed) watch.gone(new TransportClosedError(origin, 'HTTP/2 session'));
      },
    });
    const onClose = (): void => watch.gone(new TransportClosedError(origin, 'HTTP/2 session'));
    const onError = (err: Error): void => watch.gone(err);
    session.on('goaway', onGoaway);
    session.once('close', onClose);
    session.on('error', onError);
    const stopKeepAlive = this.#keepAlive(session, watch);
    return () => {
      stopKeepAlive();
      retirers.delete(session);
      session.off('goaway', onGoaway);
      session.off('close', onClose);
      session.off('error', onError);
    };
  }

  /**
   * Pings every `keepAliveInterval`, idle or not; a PING unanswered for `keepAliveTimeout` makes
   * the session gone (it is destroyed, releasing every stream on it). A session draining after
   * the peer's GOAWAY cannot be pinged (node:http2 cancels every PING once it closes), so there
   * the peer must be heard otherwise: nothing read from it for `DRAIN_SILENCE` times
   * (`keepAliveInterval + keepAliveTimeout`), 60 s by default, while streams still ride it makes
   * it gone too (longer than a PING's bound: a quiet long poll on a drained connection is alive). Before, its keep-alive
   * stopped for good, and a peer that drained and then went silent (a frozen worker after an
   * nginx reload) held its streams forever. Returns the stopper.
   */
  #keepAlive(session: http2.ClientHttp2Session, watch: ConnectionWatch): () => void {
    const { keepAliveInterval: interval, keepAliveTimeout: timeout, clock } = this.#options;
    if (interval <= 0) return () => {};
    let next: TimerHandle | undefined;
    let deadline: TimerHandle | undefined;
    let stopped = false;
    /** Bytes read from the peer at the last look while draining, and since when that has not moved. */
    let lastRead = -1;
    let quietSince = 0;
    const gone = (): void => {
      const err = new KeepAliveTimeoutError(interval, timeout);
      watch.gone(err);
      // The pool closes it (destroyed with its ConnectionGoneError, which each stream still open
      // then fails with), at once or, for a retired session, a turn later: only if it did not.
      setImmediate(() => {
        if (!session.destroyed) session.destroy(err);
      });
    };
    const schedule = (): void => {
      if (!stopped && !session.destroyed) next = unrefTimer(clock.setTimeout(ping, interval));
    };
    const ping = (): void => {
      if (stopped || session.destroyed) return;
      if (session.closed) {
        // Draining: watch the socket instead of pinging.
        const read = sockets.get(session)?.bytesRead ?? 0;
        const now = clock.now();
        if (read !== lastRead) {
          lastRead = read;
          quietSince = now;
        } else if (now - quietSince >= DRAIN_SILENCE * (interval + timeout)) {
          gone();
          return;
        }
        schedule();
        return;
      }
      deadline = unrefTimer(
        clock.setTimeout(() => {
          if (!stopped) gone();
        }, timeout),
      );
      const sent = session.ping(() => {
        if (deadline !== undefined) clock.clearTimeout(deadline);
        deadline = undefined;
        if (stopped) return;
        // Answered, or cancelled because the session began to close (a GOAWAY came): either way
        // the next look follows, which watches a draining session's socket instead.
        schedule();
      });
      if (!sent) {
        clock.clearTimeout(deadline);
        schedule();
      }
    };
    schedule();
    return () => {
      stopped = true;
      if (next !== undefined) clock.clearTimeout(next);
      if (deadline !== undefined) clock.clearTimeout(deadline);
    };
  }

  /** `options` offering `origin`'s last TLS session, when there is one. */
  #withSession(origin: string, options: tls.ConnectionOptions): tls.ConnectionOptions {
    const session = this.#sessions.get(origin);
    return session === undefined ? options : { ...options, session };
  }

  /** Connect options for `origin`, around a secure context built once per origin. */
  #tlsFor(origin: string): tls.ConnectionOptions {
    let options = this.#contexts.get(origin);
    if (options === undefined) {
      if (this.#contexts.size >= CONTEXT_CACHE) this.#contexts.clear();
      const { rejectUnauthorized, servername, checkServerIdentity } = this.#options.tls;
      options = { secureContext: tls.createSecureContext(this.#options.tls), ALPNProtocols: ['h2'] };
      // Only what was given: an explicit undefined would replace tls.connect's own defaults.
      if (rejectUnauthorized !== undefined) options.rejectUnauthorized = rejectUnauthorized;
      if (servername !== undefined) options.servername = servername;
      if (checkServerIdentity !== undefined) options.checkServerIdentity = checkServerIdentity;
      this.#contexts.set(origin, options);
    }
    return options;
  }
}
