/**
 * An HTTP/1.1 fault peer on loopback: a `node:http` server that serves normally until told to
 * misbehave, counting connections and requests. It can go silent (stop reading and answering,
 * TCP open), die abruptly with requests in flight (every socket reset) and come back on the same
 * port.
 *
 * @module
 */
import http from 'node:http';
import net from 'node:net';
import { type FaultPeer, type LoopbackHost, type PeerOptions, addressOf, listenOn, loopback } from './tcp-peers.js';
import { thrownText } from '../core/validate.js';

/** Answers one request. Default: 200 with body `ok`. */
export type HttpHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Options of {@link httpPeer}. */
export interface HttpPeerOptions extends PeerOptions {
  handler?: HttpHandler;
}

const ok: HttpHandler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('ok');
};

/** A killable, silenceable HTTP/1.1 server. */
export class HttpPeer implements FaultPeer {
  readonly kind = 'http';
  readonly host: LoopbackHost;
  #port: number;
  #server: net.Server | undefined;
  readonly #http: http.Server;
  readonly #sockets = new Map<net.Socket, Promise<void>>();
  #silent = false;
  /** Requests read while silent, answered by {@link serve} (those whose connection closed meanwhile too: their answer goes nowhere). */
  #held: Array<() => void> = [];
  #connections = 0;
  #requests = 0;

  constructor(options: HttpPeerOptions = {}) {
    this.host = loopback(options.host);
    this.#port = options.port ?? 0;
    const handler = options.handler ?? ok;
    const answer = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      try {
        handler(req, res);
      } catch (err) {
        // A handler that throws answers 500 (or cuts a response it started); never an uncaught exception.
        process.emitWarning(`dialguard: an httpPeer handler threw: ${thrownText(err)}`);
        if (res.headersSent) res.destroy();
        else res.writeHead(500).end();
      }
    };
    this.#http = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
      this.#requests++;
      // Read while silent (it arrived before the silence, or with it): answered once served again.
      if (this.#silent) this.#held.push(() => answer(req, res));
      else answer(req, res);
    });
  }

  get port(): number {
    return this.#port;
  }

  get address(): string {
    return addressOf(this.host, this.#port);
  }

  /** `http://host:port`. */
  get origin(): string {
    return `http://${this.address}`;
  }

  /** TCP connections accepted. */
  get attempts(): number {
    return this.#connections;
  }

  /** Requests received. */
  get requests(): number {
    return this.#requests;
  }

  /** Binds (again, on the same port after {@link kill}). */
  async listen(): Promise<this> {
    if (this.#server !== undefined) return this;
    const server = net.createServer({ noDelay: true }, (socket) => {
      this.#connections++;
      socket.on('error', () => {});
      this.#sockets.set(
        socket,
        new Promise<void>((resolve) =>
          socket.once('close', () => {
            this.#sockets.delete(socket);
            resolve();
          }),
        ),
      );
      this.#http.emit('connection', socket);
      // After the server took it: node:http resumes a socket it is given, and read the request of
      // a connection opened while silent (then dropped it, even once served again).
      if (this.#silent) socket.pause();
    });
    this.#port = await listenOn(server, this.host, this.#port);
    this.#server = server;
    return this;
  }

  /** Stops reading and answering on every connection (TCP stays open), new ones included. */
  silence(): void {
    this.#silent = true;
    for (const s of this.#sockets.keys()) s.pause();
  }

  /** Serves again: the requests read while silent are answered now, and reading resumes. */
  serve(): void {
    this.#silent = false;
    for (const run of this.#held.splice(0)) run();
    for (const s of this.#sockets.keys()) s.resume();
  }

  /** Resets (RST) every connection open now, requests in flight and all; keeps listening. */
  async resetConnections(): Promise<void> {
    const open = [...this.#sockets];
    for (const [s] of open) s.resetAndDestroy();
    await Promise.all(open.map(([, closed]) => closed));
  }

  /** Dies abruptly: every connection reset, the listener closed, until {@link listen}. */
  async kill(): Promise<void> {
    await this.#stop((s) => s.resetAndDestroy());
  }

  async close(): Promise<void> {
    this.#held = [];
    await this.#stop((s) => s.destroy());
    this.#http.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #stop(end: (socket: net.Socket) => void): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets.keys()) end(s);
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
    await Promise.all(this.#sockets.values());
  }
}

/** Starts an {@link HttpPeer}. */
export async function httpPeer(options: HttpPeerOptions = {}): Promise<HttpPeer> {
  return new HttpPeer(options).listen();
}
