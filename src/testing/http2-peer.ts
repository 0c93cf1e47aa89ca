/**
 * An HTTP/2 fault peer (h2c or TLS) on loopback: serves normally until told to misbehave, and
 * counts the connections, sessions and streams it sees.
 *
 * Misbehaviours: reset every stream with a chosen RST_STREAM code; send GOAWAY; go silent after
 * the handshake (nothing flows either way, so PINGs go unanswered and requests hang, while TCP
 * stays open); die abruptly with streams in flight (every socket reset) and come back on the same
 * port. A peer that accepts TCP and never sends SETTINGS is `acceptAndHold`.
 *
 * Each client connection is relayed to an internal HTTP/2 server on loopback. The relay is what
 * can fall silent: an HTTP/2 session reads its socket natively, so pausing that socket would not
 * stop it answering PINGs.
 *
 * @module
 */
import http2 from 'node:http2';
import net from 'node:net';
import { TEST_CERT, TEST_KEY } from './test-cert.js';
import { type FaultPeer, type LoopbackHost, type PeerOptions, addressOf, listenOn, loopback } from './tcp-peers.js';
import { checkDuration, thrownText } from '../core/validate.js';

/** Answers one stream. Default: 200 with body `ok` (after `delay` ms if set). */
export type Http2Handler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;

/** Options of {@link http2Peer}. */
export interface Http2PeerOptions extends PeerOptions {
  /** Serve over TLS (ALPN h2) with {@link TEST_CERT}. Default false (h2c, prior knowledge). */
  tls?: boolean;
  /** Answers streams while the peer behaves. */
  handler?: Http2Handler;
  /**
   * Delay before the default handler answers, ms. Default 0. `Infinity`: it never answers (the
   * stream stays open until the client gives up or the peer closes).
   */
  delay?: number;
}

/** What the peer does to new streams. */
type Mode = { kind: 'serve' } | { kind: 'rst'; code: number } | { kind: 'silent' };

/** An HTTP/2 peer that can be told to misbehave. */
export class Http2Peer implements FaultPeer {
  readonly kind = 'http2';
  readonly host: LoopbackHost;
  readonly tls: boolean;
  #port: number;
  #server: net.Server | undefined;
  #h2: http2.Http2Server | http2.Http2SecureServer | undefined;
  #h2Port = 0;
  /**
   * Client-side sockets, each with its relay to the internal server, whether the relay flows
   * (piped: a second pipe sent every byte twice and broke the session), and a promise of its close.
   */
  readonly #sockets = new Map<net.Socket, { upstream: net.Socket; piped: boolean; closed: Promise<void> }>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #pending = new Set<ReturnType<typeof setTimeout>>();
  readonly #handler: Http2Handler;
  #mode: Mode = { kind: 'serve' };
  #connections = 0;
  #sessionsSeen = 0;
  #streams = 0;

  constructor(options: Http2PeerOptions = {}) {
    this.host = loopback(options.host);
    this.#port = options.port ?? 0;
    this.tls = options.tls ?? false;
    // Checked: a timer given NaN or more than 2^31-1 ms fires at once, so a peer meant to be slow
    // (or never to answer) would answer at once.
    const delay = checkDuration('delay', options.delay ?? 0, 0, true);
    this.#handler =
      options.handler ??
      ((stream) => {
        const answer = (): void => {
          if (stream.destroyed || stream.closed) return;
          stream.respond({ ':status': 200, 'content-type': 'text/plain' });
          stream.end('ok');
        };
        if (delay <= 0) return answer();
        if (delay === Number.POSITIVE_INFINITY) return;
        const t = setTimeout(() => {
          this.#pending.delete(t);
          answer();
        }, delay);
        this.#pending.add(t);
      });
  }

  /** Runs the handler; one that throws resets the stream (INTERNAL_ERROR), never an uncaught exception. */
  #serve(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    try {
      this.#handler(stream, headers);
    } catch (err) {
      process.emitWarning(`dialguard: an http2Peer handler threw: ${thrownText(err)}`);
      if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    }
  }

  get port(): number {
    return this.#port;
  }

  get address(): string {
    return addressOf(this.host, this.#port);
  }

  /** The origin to request, e.g. `http://127.0.0.1:12345`. */
  get origin(): string {
    return `${this.tls ? 'https' : 'http'}://${this.address}`;
  }

  /** TCP connections accepted. */
  get attempts(): number {
    return this.#connections;
  }

  /** HTTP/2 sessions established (connection preface and SETTINGS exchanged). */
  get sessions(): number {
    return this.#sessionsSeen;
  }

  /** Streams (requests) received. */
  get streams(): number {
    return this.#streams;
  }

  /** Sessions open now. */
  get openSessions(): number {
    return this.#sessions.size;
  }

  /** Binds (again, on the same port after {@link kill}). */
  async listen(): Promise<this> {
    if (this.#server !== undefined) return this;
    const started = this.#h2 === undefined;
    if (started) await this.#startInternal();
    const server = net.createServer({ noDelay: true }, (socket) => this.#accept(socket));
    try {
      this.#port = await listenOn(server, this.host, this.#port);
    } catch (err) {
      // Its port taken or invalid: the internal server started for it goes too (it kept the
      // process alive, and the factory's caller had no peer to close).
      if (started) await this.close();
      throw err;
    }
    this.#server = server;
    return this;
  }

  /** Serve normally again (silent relays start flowing; flowing ones are left as they are). */
  serve(): void {
    this.#mode = { kind: 'serve' };
    for (const [socket, relay] of this.#sockets) {
      if (relay.piped) continue;
      relay.piped = true;
      socket.pipe(relay.upstream);
      relay.upstream.pipe(socket);
    }
  }

  /** Every new stream is reset with RST_STREAM `code` (e.g. `http2.constants.NGHTTP2_REFUSED_STREAM`). */
  rstStreams(code: number): void {
    this.#mode = { kind: 'rst', code };
  }

  /**
   * Goes silent: nothing flows either way on any connection (PINGs go unanswered, requests are
   * never answered) while TCP stays open, like a peer whose host froze.
   */
  silence(): void {
    this.#mode = { kind: 'silent' };
    for (const [socket, relay] of this.#sockets) {
      relay.piped = false;
      socket.unpipe(relay.upstream);
      relay.upstream.unpipe(socket);
      socket.pause();
      relay.upstream.pause();
    }
  }

  /** Sends GOAWAY (default NO_ERROR) on every session and closes each once its streams finish. */
  goaway(code: number = http2.constants.NGHTTP2_NO_ERROR): void {
    for (const session of this.#sessions) {
      if (session.closed || session.destroyed) continue;
      session.goaway(code);
      session.close();
    }
  }

  /**
   * Resets (RST) every connection open now, streams in flight and all, but keeps listening: a
   * connection dies mid-burst while the host stays up.
   */
  async resetConnections(): Promise<void> {
    const open = [...this.#sockets];
    for (const [socket, { upstream }] of open) {
      socket.resetAndDestroy();
      upstream.destroy();
    }
    await Promise.all(open.map(([, x]) => x.closed));
  }

  /**
   * Dies abruptly with whatever is in flight: every connection reset (RST), the listener closed.
   * Connects are refused until {@link listen} is called again.
   */
  async kill(): Promise<void> {
    await this.#stopListening((socket) => socket.resetAndDestroy());
  }

  async close(): Promise<void> {
    await this.#stopListening((socket) => socket.destroy());
    const h2 = this.#h2;
    this.#h2 = undefined;
    if (h2 !== undefined) await new Promise<void>((resolve) => h2.close(() => resolve()));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #startInternal(): Promise<void> {
    const h2 = this.tls
      ? http2.createSecureServer({ key: TEST_KEY, cert: TEST_CERT, allowHTTP1: false })
      : http2.createServer();
    h2.on('session', (session) => {
      // Counted once the client's SETTINGS arrived (its preface with them): a TCP connection that
      // sent nothing, or an HTTP/1.1 request, is no session.
      session.once('remoteSettings', () => this.#sessionsSeen++);
      this.#sessions.add(session);
      session.on('error', () => {});
      session.once('close', () => this.#sessions.delete(session));
    });
    h2.on('stream', (stream, headers) => {
      this.#streams++;
      stream.on('error', () => {});
      const mode = this.#mode;
      if (mode.kind === 'rst') stream.close(mode.code);
      else if (mode.kind === 'serve') this.#serve(stream, headers);
      // silent: never answered
    });
    this.#h2Port = await listenOn(h2, '127.0.0.1', 0);
    this.#h2 = h2;
  }

  #accept(socket: net.Socket): void {
    this.#connections++;
    const upstream = net.connect({ host: '127.0.0.1', port: this.#h2Port, noDelay: true });
    socket.on('error', () => {});
    upstream.on('error', () => {});
    const closed = Promise.all([
      new Promise<void>((resolve) => socket.once('close', () => resolve())),
      new Promise<void>((resolve) => upstream.once('close', () => resolve())),
    ]).then(() => {
      this.#sockets.delete(socket);
    });
    // Either side ending ends the relay (a reset stays a reset toward the client).
    socket.once('close', () => upstream.destroy());
    upstream.once('close', () => socket.destroy());
    const piped = this.#mode.kind !== 'silent';
    this.#sockets.set(socket, { upstream, piped, closed });
    if (!piped) {
      socket.pause();
      upstream.pause();
      return;
    }
    socket.pipe(upstream);
    upstream.pipe(socket);
  }

  async #stopListening(end: (socket: net.Socket) => void): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const t of this.#pending) clearTimeout(t);
    this.#pending.clear();
    for (const [socket, { upstream }] of this.#sockets) {
      end(socket);
      upstream.destroy();
    }
    for (const session of this.#sessions) session.destroy();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
    await Promise.all([...this.#sockets.values()].map((x) => x.closed));
  }
}

/** Starts an {@link Http2Peer}. */
export async function http2Peer(options: Http2PeerOptions = {}): Promise<Http2Peer> {
  return new Http2Peer(options).listen();
}
