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
 * The dial belongs to no request. A request that gives up (`req.destroy()`, an abort signal,
 * axios's or got's timeout) fails at once with its own error, as with Node's agent, but does not
 * cancel the dial: it runs to its own bounded end in its slot, so the breaker learns the host's
 * fate (rule 7) and `maxSockets` still counts it; a socket it then brings goes to the next
 * request queued for the origin, else is closed.
 *
 * @module
 */
import type http from 'node:http';
import dns from 'node:dns';
import net from 'node:net';
import { heardOnLiveConnection } from '../../core/classify.js';
import { type Clock, type TimerHandle, unrefTimer } from '../../core/clock.js';
import { MAX_DURATION, asError } from '../../core/validate.js';
import { presentedCertificate } from '../../guard/connect.js';
import { type DialContext, dial, watchAddress } from '../../guard/dial.js';
import { localFailure, noAddressOfOwnChoice } from '../../guard/dial-outcome.js';
import { isolationOf, lookupBreaker } from '../../guard/addresses.js';
import { type Transport, tlsTransport } from '../../guard/host-breaker.js';
import { hostKey } from '../../guard/host-key.js';
import { DialScout } from '../undici/dial-scout.js';
import type { AgentGuardSettings } from './options.js';
import { announceConnected } from './connect-events.js';

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
  /** The agent's `timeout`, else the request's (Node merges them so): armed before the socket connects, where the request has none of its own. */
  timeout?: number;
  family?: number;
  hints?: number;
}

/**
 * Stands in the agent's `sockets` list while its dial is in flight, so Node counts it against
 * `maxSockets`. `agent.destroy()` calls its `destroy()`, which gives the dial up (abandoned: it
 * says nothing of the host) and fails its request at once with `ECONNRESET`, as Node destroys a
 * connecting socket and fails its request. Before, the request waited for the dial to end on its
 * own, up to the whole connect timeout, and the dial's socket and timer held the process.
 */
export class PendingDial {
  /** Marks the stand-in for code that walks `agent.sockets`. */
  readonly pending = true;
  destroyed = false;
  /** What the dial holds of the event loop (see {@link LoopHold}). */
  readonly hold = new LoopHold();
  /** What `destroy()` does beyond marking it (set by the dial it stands for). */
  onDestroy: (() => void) | undefined;
  /** Whether its request still waits on it (false once the request gave up). */
  wanted = true;
  /**
   * Asks the dial, after a request that waited on it gave up, whether anyone still does: if not,
   * it stops holding the process again (set by the dial it stands for).
   */
  idle: (() => void) | undefined;
  /**
   * Gives the dial up (abandoned) once its request has, so that its slot goes to a request of
   * another origin queued under `maxTotalSockets` (set by the dial it stands for; see
   * {@link yieldGivenUpDial}).
   */
  yieldSlot: (() => void) | undefined;

  /** Called by `agent.destroy()`. */
  destroy(): this {
    this.destroyed = true;
    const act = this.onDestroy;
    this.onDestroy = undefined;
    act?.();
    return this;
  }
}

/**
 * What a dial holds of the event loop: its timeout and its socket. A dial whose request gave up
 * runs on to its bound so the breaker learns the host's state, but with nobody left waiting on it
 * it no longer keeps the process alive (raw Node destroys the socket with the request: a script
 * that aborted a request to a hung host exited at once, and with a guarded agent 2.4 s later).
 * Whoever comes to depend on it again (a request queued behind it, another dial of its host)
 * attaches it.
 */
export class LoopHold {
  timer: TimerHandle | undefined;
  socket: net.Socket | undefined;
  #detached = false;
  /** The dials of its origin in flight, while it is one of them: counts it while it is detached. */
  #origin: OriginDials | undefined;

  /** Lets the process exit while the dial runs. */
  detach(): void {
    if (this.#detached) return;
    this.#detached = true;
    if (this.#origin !== undefined) this.#origin.detached++;
    if (this.timer !== undefined) unrefTimer(this.timer);
    this.socket?.unref();
  }

  /** Holds the process again until the dial ends. */
  attach(): void {
    if (!this.#detached) return;
    this.#detached = false;
    if (this.#origin !== undefined) this.#origin.detached--;
    (this.timer as { ref?: () => void } | undefined)?.ref?.();
    this.socket?.ref();
  }

  /** Counted among `origin`'s dials from now (undefined: no longer). */
  joinOrigin(origin: OriginDials | undefined): void {
    if (this.#detached) {
      if (this.#origin !== undefined) this.#origin.detached--;
      if (origin !== undefined) origin.detached++;
    }
    this.#origin = origin;
  }
}

/**
 * The dials of one origin key in flight, and how many of them hold the process no longer: a new
 * dial attaches them only when some are, where it walked every one (O(n^2) no-op calls over a
 * burst of new connections: ~8 million for 4 000 at once).
 */
export class OriginDials extends Set<PendingDial> {
  detached = 0;
}

/**
 * Per dial key, whether a dial in flight has its TCP connection up, for the requests whose dials
 * wait (behind a scout, or before their own connect): a `req.setTimeout()` runs from then, as on
 * Node's socket, which would be connected by then too.
 */
class ConnectedHosts {
  /** Dials in flight past their TCP connect, per key. */
  readonly #up = new Map<string, number>();
  /** Who hears of the next one, per key. */
  readonly #waiting = new Map<string, Set<() => void>>();

  /** `hear` runs once a dial of `key` is past TCP (at once if one is); returns the unlisten. */
  listen(key: string, hear: () => void): () => void {
    if ((this.#up.get(key) ?? 0) > 0) {
      hear();
      return () => {};
    }
    let set = this.#waiting.get(key);
    if (set === undefined) this.#waiting.set(key, (set = new Set()));
    set.add(hear);
    return () => {
      set.delete(hear);
      if (set.size === 0 && this.#waiting.get(key) === set) this.#waiting.delete(key);
    };
  }

  /** A dial of `key` connected TCP: everyone waiting hears; returns what to call when that dial ends. */
  up(key: string): () => void {
    this.#up.set(key, (this.#up.get(key) ?? 0) + 1);
    const set = this.#waiting.get(key);
    this.#waiting.delete(key);
    if (set !== undefined) for (const hear of set) hear();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const n = (this.#up.get(key) ?? 1) - 1;
      if (n > 0) this.#up.set(key, n);
      else this.#up.delete(key);
    };
  }
}

/** Per-agent state of the guard. */
export class AgentGuard {
  readonly settings: AgentGuardSettings;
  readonly #scout = new DialScout();
  readonly #connected = new ConnectedHosts();
  /** The dials in flight (or waiting on a scout) per host:port: who may depend on whose dial. */
  readonly #dialing = new Map<string, OriginDials>();
  /** The TLS options (agent key) of the dial scouting each unproven host:port, over TLS. */
  readonly #scoutNames = new Map<string, { readonly name: string }>();
  /** The request whose `createSocket` is on the stack (set around Node's synchronous call). */
  current: http.ClientRequest | undefined;
  /** A connected socket to hand to the `createSocket` now on the stack, instead of dialling (see #handOver). */
  #handing: net.Socket | undefined;

  constructor(settings: AgentGuardSettings) {
    this.settings = settings;
  }

  /**
   * Dials for Node's agent: `open` is Node's own `createConnection` (net or tls, with the agent's
   * options and, for https, its TLS session cache), run inside a guarded, bounded dial. Returns
   * nothing: the socket or the error goes to `oncreate`.
   */
  connect(agent: http.Agent, options: ConnectionOptions, created: OnCreate, open: () => net.Socket, secure: boolean, defaultPort: number): void {
    // Every socket handed to Node, connected, tells its first request's listeners so (see connect-events.ts).
    const oncreate: OnCreate = (err, socket) => {
      if (err === null && socket !== undefined) announceConnected(socket, secure);
      created(err, socket);
    };
    const handing = this.#handing;
    if (handing !== undefined) {
      this.#handing = undefined;
      oncreate(null, handing);
      return;
    }
    const books = agent as unknown as AgentBooks;
    const name = options._agentKey ?? '';
    const req = this.current;
    let key: string;
    let byName: boolean;
    let transport: Transport;
    try {
      const host = options.host ?? options.hostname ?? 'localhost';
      key = hostKey(host, Number(options.port) || defaultPort);
      byName = net.isIP(host.startsWith('[') ? host.slice(1, -1) : host) === 0;
      // A TLS dial names the server name it sends (Node's https agent sets it; else the host, when a name).
      transport = secure ? tlsTransport((options as { servername?: string }).servername ?? (byName ? host : undefined)) : 'plain';
    } catch (err) {
      oncreate(err as Error);
      return;
    }
    // A dial for a request that waits in the queue (Node's removeSocket, or next() here) ends
    // with the request maybe served already: Node's 'free' handler hands a queued request any
    // socket that frees meanwhile. Raw Node never has that moment (its socket is handed over at
    // once); here its dial's failure must not reach a request that a socket took from the queue.
    const queuedAtStart = req !== undefined && isQueued(books.requests, name, req);
    if (queuedAtStart && req!.destroyed) {
      // Node's removeSocket dials for the first queued request, given up or not: it ends with its
      // own error at once (Node's agent hands it the socket, which it destroys), and the slot
      // goes to the next one waiting (next() takes every given-up request out first).
      next(books, name, options, req);
      return;
    }
    /**
     * Fails the request this dial is for. One that waited in the queue leaves it and fails as
     * Node fails a queued request, once: Node's removeSocket, on a failed dial, emits the error
     * and leaves the request queued (with a real socket that never happens: it is handed over at
     * once), so the next socket to close dialled for it again and a second failure was a second
     * 'error', unhandled by got or a `once('error')` (an outside review: a process crashed).
     */
    const fail = (err: Error): void => {
      if (!queuedAtStart) {
        oncreate(err);
        return;
      }
      leaveQueue(books.requests, req!);
      failQueued(req!, err);
    };
    const slot = new PendingDial();
    hold(books, name, slot);
    // The request this dial watches (its destroy, its timeouts, a socket serving it elsewhere):
    // none when another dial out watches it already. Node's removeSocket dials for the first
    // queued request whenever a socket closes, whether a dial is out for it or not (as Node's own
    // agent does: the socket then goes to whoever is first); each such dial watching it too added
    // its listeners and timers to one request (11 'socket' listeners: Node warned of a leak).
    const watched = req !== undefined && !dialledFor.has(req) ? req : undefined;
    if (watched !== undefined) dialledFor.add(watched);
    // Another dial of this host:port may be the one this waits on (a scout): it holds the process again.
    let dialing = this.#dialing.get(key);
    if (dialing === undefined) this.#dialing.set(key, (dialing = new OriginDials()));
    if (dialing.detached > 0) for (const other of dialing) other.hold.attach();
    dialing.add(slot);
    slot.hold.joinOrigin(dialing);
    const loop = slot.hold;
    // Requests already queued under this origin now wait behind a dial that holds its slot to
    // its bound: a destroy must reach them at once (see watchQueued).
    for (const queued of books.requests[name] ?? []) if (queued !== req) watchQueuedRequest(books, queued);
    const { timeout, clock } = this.settings;
    // A name resolved by a lookup of the request's own is filed apart for that resolver (as
    // connect() files its lookups): what it answers says nothing of the name as others resolve
    // it. Filed under the name, one client's lookup answering ENOTFOUND opened the live name for
    // every client of the shared breaker, undici's too (an outside review: 5 of 5 refused).
    const given = byName ? (options as { lookup?: unknown }).lookup : undefined;
    const resolver = typeof given === 'function' && given !== dns.lookup && this.settings.breaker !== null ? (given as net.LookupFunction) : undefined;
    const breaker = resolver === undefined ? this.settings.breaker : lookupBreaker(this.settings.breaker!, resolver);
    const stop = new AbortController(); // agent.destroy(): the dial is given up
    // `req.setTimeout(ms)` during the dial runs as Node runs it on a connecting socket: from its
    // TCP connect (the TLS handshake counts), never before. Armed at the call, a 300 ms one fired
    // during a 600 ms dial that raw Node's would not, and again once the socket came; got's
    // `timeout.socket` then failed requests raw Node served.
    // A dial held behind a scout has no connection of its own yet: the scout's counts, as a
    // socket of its own would have connected by then. Its own dial, once it runs, counts alone:
    // heard from every dial of the origin, another request's connect armed it during its own.
    let tcpUp = false;
    let asked: unknown;
    // The request's own `timeout` wins over the agent's, as Node's setRequestSocket sets it on the
    // connecting socket where it differs: the options Node merged for createConnection hold the
    // agent's (its values win there), and a request asking 10 s timed out at an agent-wide 1 s
    // during a 1.5 s handshake Node served (an outside review).
    const waitFor = (req as { timeout?: unknown } | undefined)?.timeout ?? options.timeout;
    const onTcp = (): void => {
      if (tcpUp) return;
      tcpUp = true;
      if (asked !== undefined) arm(asked);
    };
    let unlisten: (() => void) | undefined;
    // With other TLS options than the scout's, held only until the scout's TCP connect proves the
    // host reachable, while the breaker admits freely (closed): the scout's handshake says nothing
    // of this one's (a slow SNI name held a good one's request 300 ms; raw Node served it at once).
    // A half-open breaker's one probe is the scout's: then this one waits for its outcome.
    let goEarly: (() => void) | undefined;
    const early = secure ? new Promise<void>((resolve) => (goEarly = resolve)) : undefined;
    let own = false;
    let ownTcp = false;
    let down: (() => void) | undefined;
    // Requests with the same agent key share a scout only when their own dial options (which the
    // key leaves out) are the same too: see ownDialOptions.
    const scoutKey = key + ownDialOptions(options, byName, secure);
    const attempt = this.#scout.run(
      scoutKey,
      () => {
        own = true;
        if (unlisten !== undefined) {
          // Held behind the scout until now: its connect was the scout's, this dial's is ahead.
          // Its `timeout` option starts again, as Node's runs from the request's own socket's
          // creation (a dial made now): run from the request, it spanned the scout's dial and
          // its own, and fired where Node's agent served (3 requests, 250 ms lookups, timeout
          // 400: two timed out at 401 ms; an outside review). A `req.setTimeout` armed from the
          // scout's connect is disarmed with it, and armed again at this one's.
          unlisten();
          arm(waitFor);
          tcpUp = false;
        }
        // The dial's timer and socket, kept so an abandoned dial can stop holding the process.
        const tracked: Clock = {
          now: () => clock.now(),
          setTimeout: (callback, ms) => (loop.timer = clock.setTimeout(callback, ms)),
          clearTimeout: (handle) => clock.clearTimeout(handle),
        };
        // An operator's isolation of the name holds whoever resolves it.
        const isolation = resolver === undefined ? undefined : isolationOf(this.settings.breaker!, key);
        if (isolation !== undefined) return Promise.reject(isolation);
        const dialling = dial(
          key,
          (ctx) =>
            establish(() => (loop.socket = open()), secure, byName, options, ctx, () => {
              ownTcp = true;
              onTcp();
              down = this.#connected.up(scoutKey);
            }),
          { timeout, breaker, clock: tracked, dispose: destroySocket, signal: stop.signal, transport },
        );
        // Dialling late, after a scout, for a request that gave up meanwhile: nobody may wait on it.
        if (unlisten !== undefined && gaveUp) background();
        // A handshake these TLS options failed (an SNI name the server hangs up on) says nothing
        // of another request's: the dials held behind it with other options dial.
        return secure ? dialling.catch((err: unknown) => ownTls(err, name, ownTcp)) : dialling;
      },
      // One scout per host:port, so a half-open breaker's one probe speaks for every request (was
      // one per TLS options: a second name asked a breaker whose probe was out, and was refused).
      secure ? (err) => sharedTls(err, name) : undefined,
      early,
    );
    // This dial scouts (or the host is proven, and nobody is held): the latest such dial's name.
    const scouting = own && secure ? { name } : undefined;
    if (scouting !== undefined) this.#scoutNames.set(scoutKey, scouting);
    if (!own) {
      unlisten = this.#connected.listen(scoutKey, () => {
        onTcp();
        if (secure && this.#scoutNames.get(scoutKey)?.name !== name && (breaker === null || (breaker.state(key, undefined, transport)?.state ?? 'closed') === 'closed')) goEarly!();
      });
    }
    const settle = (): void => {
      dialing.delete(slot);
      loop.joinOrigin(undefined);
      if (dialing.size === 0 && this.#dialing.get(key) === dialing) this.#dialing.delete(key);
      loop.attach(); // its socket may go on to serve a request
      if (scouting !== undefined && this.#scoutNames.get(scoutKey) === scouting) this.#scoutNames.delete(scoutKey);
      unlisten?.();
      down?.();
      if (watched !== undefined) {
        watched.off('socket', servedElsewhere);
        dialledFor.delete(watched);
      }
    };
    // Node arms a request's own `timeout` before its socket connects ('timeout' on the request,
    // for the caller to act on). The socket is Node's only once the dial is over: armed here.
    let timer: TimerHandle | undefined;
    const arm = (wait: unknown): void => {
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
      if (watched !== undefined && typeof wait === 'number' && wait > 0 && Number.isFinite(wait)) {
        // Node holds a longer timeout at 2^31-1 ms; a timer given more fires after 1 ms.
        timer = unrefTimer(clock.setTimeout(() => void watched.emit('timeout'), Math.min(wait, MAX_DURATION)));
      }
    };
    arm(waitFor);
    // A request destroyed while its dial is in flight fails now, with its own error (Node's
    // agent hands a request its connecting socket at once, so destroying the request destroys
    // the socket and fails it there). Was: it waited for the dial, up to the whole connect
    // timeout, and then failed with the dial's error instead of its own.
    let gaveUp = false;
    /**
     * The request gave up: with no other dial of this host and nobody queued on the agent, the
     * dial stops holding the process. Any queue counts, not only this key's: with
     * `maxTotalSockets` a request of another key (another `servername`, another origin) waits for
     * this dial's slot, and the process exited with it pending.
     */
    const background = (): void => {
      for (const other of dialing) if (other !== slot && other.wanted) return;
      for (const key in books.requests) if (books.requests[key]?.some((r) => r !== req && !r.destroyed) === true) return;
      loop.detach();
    };
    // Asked again whenever a request that came to wait on this dial gives up too: the dial was
    // attached for it, and held the process to its bound (5 s) with nobody left waiting.
    slot.idle = () => {
      if (gaveUp && own) background();
    };
    const yieldSlot = (): void => {
      if (gaveUp) stop.abort(localFailure(new Error('dial given up: its slot went to a request of another origin queued under maxTotalSockets')));
    };
    slot.yieldSlot = yieldSlot;
    const giveUp = (reason: Error): void => {
      if (gaveUp) return;
      gaveUp = true;
      slot.wanted = false;
      unwatch?.();
      arm(undefined);
      fail(reason);
      // Nobody of this origin waits for it, and another origin's request waits for a slot under
      // maxTotalSockets: the slot is that request's now, as Node's agent frees it when a request
      // destroys its connecting socket (see yieldGivenUpDial).
      if (!hasLiveQueued(books, name, req) && otherQueued(books, name)) yieldSlot();
      else if (own) background();
      // The scout it waited on, and every other dial of this host that stayed attached while
      // this one was wanted: ten requests with their own options, aborted together, left nine
      // dials holding the process to their 5 s bound (an outside review).
      for (const other of dialing) if (other !== slot) other.idle?.();
    };
    const setTimeoutCalled = (ms: unknown): void => {
      asked = ms;
      if (tcpUp) arm(ms);
    };
    const unwatch = watched === undefined ? undefined : watchRequest(watched, setTimeoutCalled, (reason) => giveUp(reason ?? socketHangUp()));
    // Served meanwhile by a socket that freed (a request dialled for from the queue): its
    // timeout is that socket's now, as Node arms it there. Was: this dial's timer still fired
    // 'timeout' on it, after its response.
    const servedElsewhere = (): void => {
      unwatch?.();
      arm(undefined);
    };
    watched?.once('socket', servedElsewhere);
    slot.onDestroy = () => {
      giveUp(agentDestroyed());
      // This agent's own doing: abandoned, so a request dialled next (one queued behind) is
      // not handed it as the host's failure by the scout.
      stop.abort(localFailure(agentDestroyed()));
    };
    attempt.then(
      (socket) => {
        settle();
        slot.onDestroy = undefined;
        unwatch?.();
        if (timer !== undefined) clock.clearTimeout(timer);
        release(books, name, slot);
        if (gaveUp) {
          if (!this.#handOver(books, name, socket, req)) {
            socket.destroy();
            next(books, name, options, req);
          }
          return;
        }
        if (slot.destroyed) {
          socket.destroy();
          fail(agentDestroyed());
          next(books, name, options, req); // as Node's removeSocket: a request queued behind it gets a dial
          return;
        }
        oncreate(null, socket);
      },
      (err: unknown) => {
        settle();
        slot.onDestroy = undefined;
        unwatch?.();
        if (timer !== undefined) clock.clearTimeout(timer);
        release(books, name, slot);
        if (gaveUp) {
          next(books, name, options, req);
          return;
        }
        const error = slot.destroyed ? agentDestroyed() : asError(err);
        if (queuedAtStart && !isQueued(books.requests, name, req!)) {
          // Taken from the queue by a socket that freed while this dial ran (or by its own
          // destroy): it is that socket's now. Failing it here reported a request the server
          // had answered as failed, and got then sent the POST again.
          next(books, name, options, req);
          return;
        }
        fail(error);
        // In Node a failed connect frees its slot through removeSocket, which dials for the next
        // queued request. The stand-in never reaches removeSocket, so do the same here.
        next(books, name, options, req);
      },
    );
  }

  /**
   * The socket a dial brought after its request gave up, handed to the first live request queued
   * for the same origin (the same TLS options), as Node's agent would hand it a freed socket:
   * booked through Node's own `createSocket` (its listeners, `maxSockets`), then offered with
   * 'free'. Was: destroyed, and a fresh dial made for that request, a whole handshake more (B
   * served at 1 030 ms against raw Node's 617 ms behind a 500 ms handshake). Whether it was.
   */
  #handOver(books: AgentBooks, name: string, socket: net.Socket, gaveUp: http.ClientRequest | undefined): boolean {
    const queued = books.requests[name]?.find((r) => r !== gaveUp && !r.destroyed);
    const own = queued === undefined ? undefined : requestOptionsOf(queued);
    if (queued === undefined || own === undefined || socket.destroyed) return false;
    stopQueueWatch(queued);
    this.#handing = socket;
    let taken = false;
    try {
      books.createSocket(queued, own, (err, s) => {
        if (err === null && s !== undefined) s.emit('free');
      });
    } finally {
      // Not taken (Node's createSocket did not reach createConnection): the caller closes it.
      taken = this.#handing === undefined;
      this.#handing = undefined;
    }
    return taken;
  }
}

/**
 * Watches `req` while its dial is in flight, before it has a socket: `gaveUp` hears the reason
 * once when it is destroyed (`destroy()`, which an abort signal, `abort()` and the clients'
 * timeouts all end in), `timeout` the value of each `setTimeout()`. Node's ClientRequest says
 * nothing of either until a socket arrives (it arms `setTimeout` on the socket), so both methods
 * are wrapped on this one request; the returned function stops watching.
 */
function watchRequest(req: http.ClientRequest, timeout: (ms: unknown) => void, gaveUp: (reason: Error | undefined) => void): () => void {
  const own = { destroy: Object.getOwnPropertyDescriptor(req, 'destroy'), setTimeout: Object.getOwnPropertyDescriptor(req, 'setTimeout') };
  const { destroy, setTimeout } = req;
  let watching = true;
  const stop = (): void => {
    if (!watching) return;
    watching = false;
    // Last added first: V8 takes a deletion of the newest property back to the request's
    // hidden class; deleting `destroy` first sent every request that waited on a dial to
    // dictionary mode, each of Node's later reads of it slower (an outside review, r144).
    for (const k of ['setTimeout', 'destroy'] as const) {
      if (own[k] === undefined) delete (req as unknown as Record<string, unknown>)[k];
      else Object.defineProperty(req, k, own[k]);
    }
  };
  req.destroy = function (this: http.ClientRequest, reason?: Error) {
    const first = watching && !this.destroyed && this.socket == null;
    const result = destroy.call(this, reason);
    if (first) {
      stop();
      gaveUp(reason);
    }
    return result;
  };
  req.setTimeout = function (this: http.ClientRequest, ms: number, callback?: () => void) {
    const result = setTimeout.call(this, ms, callback);
    if (watching && this.socket == null) timeout(ms);
    return result;
  };
  return stop;
}

/** How to stop watching each request waiting in an agent's queue (see {@link watchQueued}). */
const queueWatches = new WeakMap<http.ClientRequest, () => void>();

/**
 * Called after Node's `addRequest`: if `req` waits in the agent's queue (every slot taken, dials
 * in flight among them), a `destroy()` (an abort signal, got's timeouts) takes it out at once and
 * Node fails it with its own error. Node's agent fails a queued request only when a slot frees
 * and hands it a socket; its slots free at once (a destroyed request destroys its connecting
 * socket), while a guarded dial holds its slot to its bounded end (rule 7). So without this, a
 * request aborted at 100 ms behind a dial to a blackhole failed seconds later, with a dial's error
 * instead of its own, and was dialled for. The watch ends when Node hands the request a socket or
 * a queued dial takes it (see {@link next}).
 */
export function watchQueued(books: unknown, req: http.ClientRequest): void {
  const { requests, sockets } = books as AgentBooks;
  // Node pushes a request it queues: it is the last of its origin's queue (no queue: not queued).
  // Watched only behind a dial in flight: behind sockets alone, a slot frees as with Node's agent.
  for (const name in requests) {
    const list = requests[name];
    if (list !== undefined && list[list.length - 1] === req) {
      const dials = sockets[name]?.filter((s): s is PendingDial => s instanceof PendingDial);
      if (dials !== undefined && dials.length > 0) watchQueuedRequest(books as AgentBooks, req);
      // It waits on the agent's dials in flight now, any key's (with `maxTotalSockets` a slot
      // another key's dial holds is its too): they hold the process, as Node's agent's would.
      for (const key in sockets) for (const d of sockets[key] ?? []) if (d instanceof PendingDial) d.hold.attach();
      return;
    }
  }
}

/**
 * Watches `req`, waiting in the agent's queue, for a destroy (see {@link watchQueued}); once. Once
 * it has left, the dials it held the process for are asked whether anyone still waits on them.
 */
function watchQueuedRequest(books: AgentBooks, req: http.ClientRequest): void {
  if (queueWatches.has(req)) return;
  const { requests, sockets } = books;
  const unwatch = watchRequest(
    req,
    () => {}, // Node arms a queued request's timeout when it gets its socket, as it does here
    () => {
      stopQueueWatch(req);
      if (!leaveQueue(requests, req)) return;
      failQueued(req);
      for (const key in sockets) for (const d of sockets[key] ?? []) if (d instanceof PendingDial) d.idle?.();
    },
  );
  queueWatches.set(req, unwatch);
  req.once('socket', () => stopQueueWatch(req));
}

/** Stops watching `req` in the queue: a dial is being made for it, which watches it from then on. */
export function stopQueueWatch(req: http.ClientRequest): void {
  const unwatch = queueWatches.get(req);
  if (unwatch === undefined) return;
  queueWatches.delete(req);
  unwatch();
}

/** Takes `req` out of whichever queue holds it; whether one did. */
function leaveQueue(requests: AgentBooks['requests'], req: http.ClientRequest): boolean {
  for (const name in requests) {
    const list = requests[name];
    const at = list === undefined ? -1 : list.indexOf(req);
    if (at < 0) continue;
    list!.splice(at, 1);
    if (list!.length === 0) delete requests[name];
    return true;
  }
  return false;
}

/**
 * Takes every destroyed request out of the agent's queues, each ended with its own error (its
 * destroy reason, or "socket hang up") unless it ended already, as Node's agent ends one when a
 * freed slot reaches it. One destroyed while nothing watched it (it waited behind live sockets
 * only: see watchQueued) was taken out as if it had failed, and never heard of again: no
 * 'error', no 'close' (an outside review); the one before it in the queue was dialled for anyway
 * and failed with that dial's error instead of its own.
 */
function dropGivenUp(requests: AgentBooks['requests']): void {
  const gone: http.ClientRequest[] = [];
  for (const name in requests) for (const r of requests[name] ?? []) if (r.destroyed) gone.push(r);
  for (const r of gone) {
    stopQueueWatch(r);
    leaveQueue(requests, r);
    if ((r as { _closed?: boolean })._closed !== true) failQueued(r);
  }
}

/** Ends a request that left the queue: Node emits its own error (its destroy reason, or "socket hang up"). */
function failQueued(req: http.ClientRequest, err: Error | null = null): void {
  if (failed.has(req)) return; // once, whichever way it came to fail
  failed.add(req);
  (req as unknown as { onSocket(socket: undefined, err: Error | null): void }).onSocket(undefined, err);
}

/** The requests {@link failQueued} failed. */
const failed = new WeakSet<http.ClientRequest>();

/** The `_agentKey` (TLS options) of the dial whose TLS handshake failed with each error. */
const tlsFailures = new WeakMap<object, string>();

/** Rethrows `err`, remembered as a TLS failure of `name`'s options if the dial got past TCP. */
function ownTls(err: unknown, name: string, pastTcp: boolean): never {
  if (pastTcp && typeof err === 'object' && err !== null) tlsFailures.set(err, name);
  throw err;
}

/** Whether a dial with TLS options `name` takes a scout's failure `err` as its own. */
function sharedTls(err: unknown, name: string): boolean {
  const failed = typeof err === 'object' && err !== null ? tlsFailures.get(err) : undefined;
  return failed === undefined || failed === name;
}

/**
 * A request's own options that shape its dial and that Node's `_agentKey` leaves out: where its
 * name resolves (`lookup`, `hints`), the port it binds (`localPort`), and whether it accepts the
 * certificate (`checkServerIdentity`). Requests that differ in any of them must not take each
 * other's dial outcome: request A with a `lookup` that failed, or a `localPort` in use, or a
 * pin its `checkServerIdentity` refused, failed request B sent with it, which had none of these
 * and which Node's own agent serves (an outside review, 3 of 3 rounds for each).
 */
const OWN_DIAL_OPTIONS = ['lookup', 'hints', 'localPort', 'checkServerIdentity'] as const;

/** A number per function or object given as a dial option, so options compare by identity. */
const optionIds = new WeakMap<object, number>();
let lastOptionId = 0;

/**
 * What `options` sets of {@link OWN_DIAL_OPTIONS} that can shape this dial, as a suffix for the
 * scout's key: '' when none (the usual case, and an agent-wide one, which every request carries
 * alike, is the same for all). Functions compare by identity. A lookup is not asked for an
 * address (`byName` false), nor a certificate checked without TLS: those are left out, so
 * requests differing only there still share (a client may wrap a user's `lookup` in a new
 * function per request, as older axios versions did).
 */
function ownDialOptions(options: ConnectionOptions, byName: boolean, secure: boolean): string {
  let tag = '';
  for (const name of OWN_DIAL_OPTIONS) {
    if ((!byName && (name === 'lookup' || name === 'hints')) || (!secure && name === 'checkServerIdentity')) continue;
    const value = (options as Record<string, unknown>)[name];
    if (value === undefined || value === null) continue;
    let shown: string;
    if (typeof value === 'object' || typeof value === 'function') {
      let id = optionIds.get(value);
      if (id === undefined) optionIds.set(value, (id = ++lastOptionId));
      shown = `#${id}`;
    } else {
      shown = String(value);
    }
    tag += `\0${name}=${shown}`;
  }
  return tag;
}

/** Node's error for a request destroyed without a reason before it had a response. */
function socketHangUp(): Error {
  return Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
}

/** Whether a request other than `except` waits in `name`'s queue. */
function hasLiveQueued(books: AgentBooks, name: string, except?: http.ClientRequest): boolean {
  return books.requests[name]?.some((r) => r !== except && !r.destroyed) === true;
}

/** Whether a request of an origin other than `name` waits in the agent's queue. */
function otherQueued(books: AgentBooks, name: string): boolean {
  for (const key in books.requests) if (key !== name && hasLiveQueued(books, key)) return true;
  return false;
}

/**
 * A request of origin `name` was queued (the agent at `maxTotalSockets`): a dial of another
 * origin whose request gave up, and for which nobody of its own origin waits, gives its slot up.
 * Kept running to its bound, such dials held every slot, and requests to live origins waited
 * behind a dead one's dials until `connectTimeout` (an outside review: 0 of 6 served where
 * Node's agent, which destroys a connecting socket with its request, served 6 in 13-30 ms).
 *
 * @internal
 */
export function yieldGivenUpDial(books: AgentBooks, name: string): void {
  if (!hasLiveQueued(books, name)) return;
  for (const key in books.sockets) {
    if (key === name || hasLiveQueued(books, key)) continue;
    for (const s of books.sockets[key] ?? []) {
      if (s instanceof PendingDial && !s.wanted && !s.destroyed && s.yieldSlot !== undefined) {
        s.yieldSlot();
        return;
      }
    }
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
  // A request destroyed and still queued is not dialled for: it leaves the queue (any origin's:
  // the freed slot may go to another's), and ends with its own error unless it has (a failed dial
  // of its own, see failQueued).
  dropGivenUp(books.requests);
  // The first queued request with no dial out: picked whether or not it had one, a request
  // behind 10 failing dials carried 10 dials and 10 'socket' listeners at once (Node warned of a
  // leak on every refused request). Every queued one has its dial: nobody needs this slot's.
  let req = books.requests[name]?.find((r) => r !== failed && !dialledFor.has(r));
  // Its own options, as Node's removeSocket dials it: the failed request's would give it their
  // `timeout` (armed on its dial), `lookup`, `localPort` and `checkServerIdentity`.
  let reqOptions: object = (req === undefined ? undefined : requestOptionsOf(req)) ?? options;
  if (req === undefined) {
    // None for this origin: as Node, the freed slot (under `maxTotalSockets`) goes to the first
    // other origin with requests queued and no socket of its own, dialled with its own options.
    for (const [other, queue] of Object.entries(books.requests)) {
      if ((books.sockets[other]?.length ?? 0) > 0) break;
      const first = queue?.[0];
      if (first !== undefined && dialledFor.has(first)) break;
      const own = first === undefined ? undefined : requestOptionsOf(first);
      if (own === undefined) break;
      req = first;
      reqOptions = own;
      break;
    }
    if (req === undefined) return;
  }
  const queued = req;
  stopQueueWatch(queued); // its dial watches it from here
  books.createSocket(queued, reqOptions, (err, socket) => {
    if (err === null && socket !== undefined) {
      socket.emit('free');
      return;
    }
    // Only a request still queued: one a freed socket took meanwhile is that socket's (see connect).
    if (leaveQueue(books.requests, queued)) failQueued(queued, err);
  });
}

/** The requests a dial out watches (see {@link AgentGuard.connect} and {@link next}). */
const dialledFor = new WeakSet<http.ClientRequest>();

/** Whether `req` waits in the agent's queue for `name`. */
function isQueued(requests: AgentBooks['requests'], name: string, req: http.ClientRequest): boolean {
  return requests[name]?.includes(req) === true;
}

/** The options Node's agent keeps on a queued request (its `kRequestOptions` symbol), if found. */
function requestOptionsOf(req: http.ClientRequest): object | undefined {
  const symbol = Object.getOwnPropertySymbols(req).find((s) => s.description === 'requestOptions');
  const options = symbol === undefined ? undefined : (req as unknown as Record<symbol, unknown>)[symbol];
  return typeof options === 'object' && options !== null ? options : undefined;
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
  options: Pick<ConnectionOptions, 'family' | 'hints'>,
  ctx: DialContext,
  onTcp: () => void,
): Promise<net.Socket> {
  ctx.phase = byName ? 'lookup' : 'tcp';
  const socket = open();
  watchAddress(ctx, socket); // dialled by name: learns the address it connects to
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
      // A certificate the host presented, refused by this request's own check: it is alive.
      if (ctx.phase === 'tls' && presentedCertificate(socket)) ctx.answered = true;
      cleanup();
      socket.destroy();
      reject(byName ? noAddressOfOwnChoice(err, options.family, options.hints) : err);
    };
    const onLookup = (): void => {
      if (ctx.phase === 'lookup') ctx.phase = 'tcp';
    };
    const up = (): void => {
      cleanup();
      // From here its errors are a live connection's, whatever their code (an SSL record error
      // ends a session with a code a handshake also fails with): never "not sent" to classify.
      socket.once('error', heardOnLiveConnection);
      resolve(socket);
    };
    const onConnect = (): void => {
      if (!secure) return up();
      ctx.phase = 'tls';
      onTcp();
    };
    const onSecure = up;
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

