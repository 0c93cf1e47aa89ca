/**
 * Two memcached clients for the storm scenario (seed 002).
 *
 * - {@link NaiveMemcached}: what the incident's clients did. One cached connection per node; any
 *   failure (a timeout included) drops it, and the next request dials again at once: no backoff,
 *   no memory.
 * - {@link GuardedMemcached}: built on dialguard's ConnectionPool. One shared connection per node,
 *   established in one bounded dial that includes a `version` handshake (a frozen node accepts TCP
 *   in its kernel but never answers); a `version` keep-alive marks a silent connection gone; the
 *   node's HostBreaker stops the redials.
 *
 * @module
 */
import net from 'node:net';
import { TransportClosedError } from '../../core/errors.js';
import type { HostBreaker } from '../../guard/host-breaker.js';
import { openSocket } from '../../guard/connect.js';
import { ConnectionPool } from '../../pool/connection-pool.js';
import { MemcachedConnection } from './connection.js';

/** `host:port` of a memcached node. */
export type Node = string;

function split(node: Node): { host: string; port: number } {
  const i = node.lastIndexOf(':');
  return { host: node.slice(0, i), port: Number(node.slice(i + 1)) };
}

/** Options both clients share. */
export interface MemcachedClientOptions {
  /** Per-request timeout, ms. */
  requestTimeout: number;
  /** Called for every dial started to `node`. */
  onDial?: (node: Node) => void;
}

/** The incident's client: redial on every failure. */
export class NaiveMemcached {
  readonly #connections = new Map<Node, MemcachedConnection>();
  readonly #options: MemcachedClientOptions;

  constructor(options: MemcachedClientOptions) {
    this.#options = options;
  }

  async get(node: Node, key: string): Promise<string | undefined> {
    let c = this.#connections.get(node);
    if (c === undefined || c.closed) {
      this.#options.onDial?.(node);
      c = new MemcachedConnection(net.connect({ ...split(node), noDelay: true }));
      this.#connections.set(node, c);
    }
    try {
      return await c.get(key, this.#options.requestTimeout);
    } catch (err) {
      if (this.#connections.get(node) === c) this.#connections.delete(node);
      c.close();
      throw err;
    }
  }

  close(): void {
    for (const c of this.#connections.values()) c.close();
    this.#connections.clear();
  }
}

/** Options of {@link GuardedMemcached}. */
export interface GuardedMemcachedOptions extends MemcachedClientOptions {
  breaker: HostBreaker;
  /** Bound on TCP connect + the `version` handshake, ms. */
  connectTimeout: number;
  /** Keep-alive `version` every this many ms; a late answer (after `requestTimeout`) means gone. */
  keepAlive: number;
}

/** The same client on dialguard's ConnectionPool. */
export class GuardedMemcached {
  readonly #pool: ConnectionPool<MemcachedConnection>;
  readonly #requestTimeout: number;

  constructor(options: GuardedMemcachedOptions) {
    const { requestTimeout, connectTimeout, keepAlive, onDial } = options;
    this.#requestTimeout = requestTimeout;
    this.#pool = new ConnectionPool<MemcachedConnection>({
      breaker: options.breaker,
      connectTimeout,
      connector: {
        connect: async (node, ctx) => {
          onDial?.(node);
          const socket = await openSocket(split(node), {}, ctx);
          ctx.phase = 'handshake';
          const c = new MemcachedConnection(socket);
          ctx.signal.addEventListener('abort', () => c.close(), { once: true });
          await c.version(connectTimeout);
          return c;
        },
        close: (c) => c.close(),
        watch: (c, watch, node) => {
          const onClose = (): void => watch.gone(new TransportClosedError(node, 'memcached connection'));
          c.socket.once('close', onClose);
          const timer = setInterval(() => {
            c.version(requestTimeout).catch((err: unknown) => watch.gone(err));
          }, keepAlive);
          timer.unref();
          return () => {
            clearInterval(timer);
            c.socket.off('close', onClose);
          };
        },
      },
    });
  }

  get(node: Node, key: string): Promise<string | undefined> {
    return this.#pool.use(node, (lease) => lease.connection.get(key, this.#requestTimeout), { idempotent: true });
  }

  close(): Promise<void> {
    return this.#pool.close();
  }
}
