/**
 * The machinery both guarded agents share: one guarded dial for Node's agent, counted in the
 * agent's own books while it is in flight.
 *
 * Node's agent counts a socket against `maxSockets` only once `createConnection` hands it over.
 * A dial that answers later through the callback would be invisible meanwhile, and 100 concurrent
 * requests would open 100 connections whatever `maxSockets` says. So while a dial is in flight a
 * {@link PendingDial} stands in the agent's `sockets` list in its place: Node's own arithmetic
 * (`maxSockets`, `maxTotalSockets`, the request queue) then works unchanged. When the dial
 * settles the stand-in leaves and the real socket (or the error) goes to Node's callback.
 *
 * The dial belongs to no request. A request that gives up (axios's `timeout`, an abort) does not
 * cancel it: the dial runs to its own bounded end, so the breaker learns the host's fate (rule 7),
 * and a socket that connects after its request left goes to the agent's free list, as Node does
 * with any late socket.
 *
 * @module
 */
import type http from 'node:http';
import net from 'node:net';
import { dial } from '../../guard/dial.js';
import { hostKey } from '../../guard/host-key.js';
import { DialScout } from '../undici/dial-scout.js';
import type { AgentGuardSettings } from './options.js';

/** Node's callback for `createConnection`. */
export type OnCreate = (err: Error | null, socket?: net.Socket) => void;

/** What Node's agent keeps and this module reads or adjusts (`sockets`, `requests`, `totalSocketCount`). */
interface AgentBooks {
  sockets: Record<string, unknown[] | undefined>;
  requests: Record<string, http.ClientRequest[] | undefined>;
  totalSocketCount: number;
  createSocket(req: http.ClientRequest, options: object, cb: OnCreate): void;
}

/** The options Node passes `createConnection` (a subset, read here). */
export interface ConnectionOptions {
  host?: string | null;
  hostname?: string | null;
  port?: number | string | null;
  socketPath?: string;
  path?: string | null;
  _agentKey?: string;
}

/**
 * Stands in the agent's `sockets` list while its dial is in flight, so Node counts it against
 * `maxSockets`. `agent.destroy()` calls its `destroy()`: the dial still settles (and is recorded),
 * its socket is then closed and its request fails with `ECONNRESET`, as a destroyed connecting
 * socket's request does in Node.
 */
export class PendingDial {
  /** Marks the stand-in for code that walks `agent.sockets`. */
  readonly pending = true;
  destroyed = false;

  /** Called by `agent.destroy()`. */
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

/** Per-agent state of the guard. */
export class AgentGuard {
  readonly settings: AgentGuardSettings;
  readonly #scout = new DialScout();
  /** The request whose `createSocket` is on the stack (set around Node's synchronous call). */
  current: http.ClientRequest | undefined;

  constructor(settings: AgentGuardSettings) {
    this.settings = settings;
  }

  /**
   * Dials for Node's agent: `open` is Node's own `createConnection` (net or tls, with the agent's
   * options and, for https, its TLS session cache), run inside a guarded, bounded dial. Returns
   * nothing: the socket or the error goes to `oncreate`.
   */
  connect(agent: http.Agent, options: ConnectionOptions, oncreate: OnCreate, open: () => net.Socket, secure: boolean, defaultPort: number): void {
    const books = agent as unknown as AgentBooks;
    const name = options._agentKey ?? '';
    const req = this.current;
    let key: string;
    let byName: boolean;
    try {
      const host = options.host ?? options.hostname ?? 'localhost';
      key = hostKey(host, Number(options.port) || defaultPort);
      byName = net.isIP(host.startsWith('[') ? host.slice(1, -1) : host) === 0;
    } catch (err) {
      oncreate(err as Error);
      return;
    }
    const slot = new PendingDial();
    hold(books, name, slot);
    const { timeout, breaker, clock } = this.settings;
    const attempt = this.#scout.run(key, () =>
      dial(key, (ctx) => establish(open, secure, byName, ctx), { timeout, breaker, clock, dispose: destroySocket }),
    );
    attempt.then(
      (socket) => {
        release(books, name, slot);
        if (slot.destroyed) {
          socket.destroy();
          oncreate(agentDestroyed());
          return;
        }
        oncreate(null, socket);
      },
      (err: unknown) => {
        release(books, name, slot);
        const error = slot.destroyed ? agentDestroyed() : err instanceof Error ? err : new Error(String(err));
        oncreate(error);
        // In Node a failed connect frees its slot through removeSocket, which dials for the next
        // queued request. The stand-in never reaches removeSocket, so do the same here.
        if (!slot.destroyed) next(books, name, options, req);
      },
    );
  }
}

/** The stand-in takes a place in `sockets[name]`, as a socket would. */
function hold(books: AgentBooks, name: string, slot: PendingDial): void {
  (books.sockets[name] ??= []).push(slot);
  books.totalSocketCount++;
}

/** The stand-in leaves `sockets[name]`; an emptied list goes, as in Node's removeSocket. */
function release(books: AgentBooks, name: string, slot: PendingDial): void {
  const list = books.sockets[name];
  const at = list === undefined ? -1 : list.indexOf(slot);
  if (at < 0) return;
  list!.splice(at, 1);
  if (list!.length === 0) delete books.sockets[name];
  books.totalSocketCount--;
}

/**
 * Dials for the first request queued under `name`, as Node's removeSocket does when a socket
 * closes: on success the socket is offered with 'free' (the agent hands it to the queue); on
 * failure that request leaves the queue and fails with the error (against an open host, at once:
 * the breaker refuses without I/O).
 */
function next(books: AgentBooks, name: string, options: ConnectionOptions, failed: http.ClientRequest | undefined): void {
  const queue = books.requests[name];
  const req = queue?.find((r) => r !== failed);
  if (req === undefined) return;
  books.createSocket(req, options, (err, socket) => {
    if (err === null && socket !== undefined) {
      socket.emit('free');
      return;
    }
    const list = books.requests[name];
    const at = list === undefined ? -1 : list.indexOf(req);
    if (at >= 0) {
      list!.splice(at, 1);
      if (list!.length === 0) delete books.requests[name];
    }
    (req as unknown as { onSocket(socket: undefined, err: Error | null): void }).onSocket(undefined, err);
  });
}

function agentDestroyed(): Error {
  return Object.assign(new Error('socket hang up (the agent was destroyed while the socket was connecting)'), { code: 'ECONNRESET' });
}

function destroySocket(socket: net.Socket): void {
  socket.destroy();
}

/**
 * Opens the socket with Node's own `createConnection` and waits, watching the dial's signal, for
 * it to connect ('connect', or 'secureConnect' for TLS). Keeps `ctx.phase` current.
 */
function establish(
  open: () => net.Socket,
  secure: boolean,
  byName: boolean,
  ctx: { signal: AbortSignal; phase: string },
): Promise<net.Socket> {
  ctx.phase = byName ? 'lookup' : 'tcp';
  const socket = open();
  return new Promise<net.Socket>((resolve, reject) => {
    const cleanup = (): void => {
      socket.off('lookup', onLookup);
      socket.off('connect', onConnect);
      socket.off('secureConnect', onSecure);
      socket.off('error', onError);
      socket.off('close', onClose);
      ctx.signal.removeEventListener('abort', onAbort);
    };
    const fail = (err: unknown): void => {
      cleanup();
      socket.destroy();
      reject(err);
    };
    const onLookup = (): void => {
      if (ctx.phase === 'lookup') ctx.phase = 'tcp';
    };
    const onConnect = (): void => {
      if (secure) {
        ctx.phase = 'tls';
        return;
      }
      cleanup();
      resolve(socket);
    };
    const onSecure = (): void => {
      cleanup();
      resolve(socket);
    };
    const onError = (err: Error): void => fail(err);
    const onClose = (): void => fail(Object.assign(new Error('the socket closed before it connected'), { code: 'ECONNRESET' }));
    const onAbort = (): void => fail(ctx.signal.reason);
    socket.once('lookup', onLookup);
    socket.once('connect', onConnect);
    if (secure) socket.once('secureConnect', onSecure);
    socket.on('error', onError);
    socket.once('close', onClose);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
}

