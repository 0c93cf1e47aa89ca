/**
 * TCP fault peers: real listeners on loopback that misbehave in one specific way each, count the
 * connections they see, and close cleanly (listener and every socket).
 *
 * @module
 */
import net from 'node:net';
import { thrownText } from '../core/validate.js';

/**
 * Loopback addresses the peers use: tests never touch any other network. Peers bind 127.0.0.1 or
 * ::1; a `veth` blackhole answers for another address of 127.0.0.0/8 inside a test's own namespace.
 */
export type LoopbackHost = '127.0.0.1' | '::1' | `127.${number}.${number}.${number}`;

/** Options every peer takes. */
export interface PeerOptions {
  /** Loopback address to bind. Default `127.0.0.1`. */
  host?: LoopbackHost;
  /** Port to bind. Default 0 (the kernel picks a free one). */
  port?: number;
}

/** What every fault peer offers. */
export interface FaultPeer {
  /** What the peer does, e.g. `accept-and-hold`. */
  readonly kind: string;
  /** The loopback address it listens on. */
  readonly host: LoopbackHost;
  readonly port: number;
  /** `host:port` (IPv6 in brackets): the key a HostBreaker files this peer under. */
  readonly address: string;
  /** Connection attempts the peer saw (for TCP peers: connections accepted). */
  readonly attempts: number;
  /** Stops listening and destroys every socket it holds; resolves once all are closed. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Checks that `host` is loopback: the fault peers never bind anything else. */
export function loopback(host: string | undefined): LoopbackHost {
  const h = host ?? '127.0.0.1';
  // Any of 127.0.0.0/8 (a name resolving to 127.0.0.2, .3, .4 stands for several hosts).
  if (h !== '::1' && !(net.isIPv4(h) && h.startsWith('127.'))) {
    throw new RangeError(`fault peers bind loopback only (127.0.0.0/8 or ::1), got ${JSON.stringify(h)}`);
  }
  return h as LoopbackHost;
}

/** `host:port`, bracketing IPv6. */
export function addressOf(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Binds `server` to `host:port` (0: any free port) and resolves with the port it got. */
export function listenOn(server: net.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve((server.address() as net.AddressInfo).port);
    });
  });
}

/**
 * A TCP listener that hands each accepted socket to `onSocket`, tracks it, and can be killed
 * (every socket reset, listener closed) and restarted on the same port. The base of the TCP peers.
 */
export class TcpPeer implements FaultPeer {
  readonly kind: string;
  readonly host: LoopbackHost;
  #port: number;
  #attempts = 0;
  #server: net.Server | undefined;
  /** Open sockets, each with a promise that settles once it has closed and left the set. */
  readonly #sockets = new Map<net.Socket, Promise<void>>();
  readonly #onSocket: (socket: net.Socket) => void;

  /** Use the factories ({@link acceptAndHold}, {@link echoPeer}, ...) rather than this directly. */
  constructor(kind: string, options: PeerOptions, onSocket: (socket: net.Socket) => void) {
    this.kind = kind;
    this.host = loopback(options.host);
    this.#port = options.port ?? 0;
    this.#onSocket = onSocket;
  }

  get port(): number {
    return this.#port;
  }

  get address(): string {
    return addressOf(this.host, this.#port);
  }

  get attempts(): number {
    return this.#attempts;
  }

  /** Sockets currently open on the peer's side. */
  get openSockets(): number {
    return this.#sockets.size;
  }

  /** Whether the peer is listening. */
  get listening(): boolean {
    return this.#server !== undefined;
  }

  /** Binds (again, on the same port after {@link kill}). */
  async listen(): Promise<this> {
    if (this.#server !== undefined) return this;
    const server = net.createServer({ noDelay: true }, (socket) => {
      this.#attempts++;
      socket.on('error', () => {}); // a peer's sockets die by design; never crash the test
      const closed = new Promise<void>((resolve) =>
        socket.once('close', () => {
          this.#sockets.delete(socket);
          resolve();
        }),
      );
      this.#sockets.set(socket, closed);
      try {
        this.#onSocket(socket);
      } catch (err) {
        // A behaviour that throws resets its socket; never an uncaught exception in the test.
        process.emitWarning(`dialguard: a TcpPeer's onSocket threw: ${thrownText(err)}`);
        socket.resetAndDestroy();
      }
    });
    this.#port = await listenOn(server, this.host, this.#port);
    this.#server = server;
    return this;
  }

  /**
   * Dies abruptly: stops listening and resets every open socket (RST), as a killed process's
   * kernel would. New connects are refused until {@link listen} is called again.
   */
  async kill(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets.keys()) socket.resetAndDestroy();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
    await this.#drained();
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets.keys()) socket.destroy();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
    await this.#drained();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #drained(): Promise<void> {
    await Promise.all(this.#sockets.values());
  }
}

/** Accepts TCP and never sends a byte: a TLS or HTTP/2 handshake against it never completes. */
export async function acceptAndHold(options: PeerOptions = {}): Promise<TcpPeer> {
  return new TcpPeer('accept-and-hold', options, () => {}).listen();
}

/** Accepts and at once resets (RST) every connection. */
export async function resetOnAccept(options: PeerOptions = {}): Promise<TcpPeer> {
  return new TcpPeer('reset-on-accept', options, (socket) => socket.resetAndDestroy()).listen();
}

/** A healthy peer that echoes every byte back. */
export async function echoPeer(options: PeerOptions = {}): Promise<TcpPeer> {
  return new TcpPeer('echo', options, (socket) => socket.pipe(socket)).listen();
}

/** A closed port on loopback: every connect is refused at once (ECONNREFUSED). */
export interface RefusingPeer extends FaultPeer {
  /** Throws: a closed port sees nothing. Count refused dials at the client, or use a netns blackhole. */
  readonly attempts: number;
}

/**
 * A port nothing listens on, so connects are refused (RST in reply to SYN). The port is found by
 * binding an ephemeral one and closing it; the kernel does not hand it out again soon.
 */
export async function refusing(options: PeerOptions = {}): Promise<RefusingPeer> {
  const host = loopback(options.host);
  // A free port, found by binding it for a moment; a port given is bound likewise, so one that
  // something listens on fails with EADDRINUSE as every other peer's does (it was returned as a
  // "refusing" peer whose connects were accepted).
  const probe = net.createServer();
  const port = await listenOn(probe, host, options.port ?? 0);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const close = async (): Promise<void> => {};
  return {
    kind: 'refusing',
    host,
    port,
    address: addressOf(host, port),
    get attempts(): number {
      throw new Error('a refusing peer cannot observe connection attempts: count them at the client');
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
