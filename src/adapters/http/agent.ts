/**
 * {@link GuardedHttpAgent} and {@link GuardedHttpsAgent}: Node's `http.Agent` and `https.Agent`
 * with every dial bounded and guarded by a {@link HostBreaker}.
 *
 * They are real subclasses: keep-alive, `maxSockets`, `maxTotalSockets`, `maxFreeSockets`,
 * `scheduling`, `timeout`, the TLS session cache and every other option are Node's own code. Only
 * `createConnection` changes: Node's own connect runs inside dialguard's `dial()`, under one
 * timeout (DNS + TCP + TLS) and behind the breaker, and its socket (or error) is handed over
 * through Node's callback. While a host is unproven, concurrent dials to it wait for the first
 * one's outcome instead of dialling too.
 *
 * @module
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type stream from 'node:stream';
import type { HostBreaker } from '../../guard/host-breaker.js';
import { caughtIdentityCheck } from '../../guard/identity-check.js';
import { type AgentGuardOptions, splitOptions } from './options.js';
import { AgentGuard, type ConnectionOptions, type OnCreate, stopQueueWatch, watchQueued, yieldGivenUpDial } from './pending-dial.js';

/** Options of a {@link GuardedHttpAgent}: Node's `http.AgentOptions` and dialguard's. */
export interface GuardedHttpAgentOptions extends http.AgentOptions, AgentGuardOptions {}

/** Options of a {@link GuardedHttpsAgent}: Node's `https.AgentOptions` and dialguard's. */
export interface GuardedHttpsAgentOptions extends https.AgentOptions, AgentGuardOptions {}

type CreateSocket = (this: http.Agent, req: http.ClientRequest, options: object, cb: OnCreate) => void;
type AddRequest = (this: http.Agent, req: http.ClientRequest, options: object) => void;
type Callback = (err: Error | null, stream: stream.Duplex) => void;

/**
 * A request queued at `maxTotalSockets`, behind another origin's dial whose request gave up,
 * takes that dial's slot (see `yieldGivenUpDial`).
 */
function atTotal(agent: http.Agent, options: object): void {
  const books = agent as http.Agent & { totalSocketCount: number };
  if (Number.isFinite(agent.maxTotalSockets) && books.totalSocketCount >= agent.maxTotalSockets) {
    yieldGivenUpDial(books as never, agent.getName(options as http.ClientRequestArgs));
  }
}

/**
 * Runs Node's `createSocket` with `req` known to the guard (Node calls `createConnection`
 * synchronously from it and does not pass the request along).
 */
function createSocketFor(agent: http.Agent, guard: AgentGuard, base: CreateSocket, req: http.ClientRequest, options: object, cb: OnCreate): void {
  stopQueueWatch(req); // a request dialled for from the queue (Node's removeSocket): its dial watches it
  const outer = guard.current;
  guard.current = req;
  try {
    base.call(agent, req, options, cb);
  } finally {
    guard.current = outer;
  }
}

/**
 * A guarded `createConnection`: without a callback (a direct call, not the agent's own) there is
 * no way to hand over a socket later, so it throws rather than dial unguarded.
 */
function guardedConnection(
  agent: http.Agent,
  guard: AgentGuard,
  options: ConnectionOptions,
  callback: Callback | undefined,
  open: () => net.Socket,
  secure: boolean,
  defaultPort: number,
): undefined {
  if (typeof callback !== 'function') {
    throw new TypeError('dialguard: a guarded agent connects asynchronously; call createConnection(options, callback)');
  }
  guard.connect(agent, options, callback as OnCreate, open, secure, defaultPort);
  return undefined;
}

/**
 * Node's `http.Agent` with guarded dials. Pass it wherever an agent goes:
 *
 * ```ts
 * const httpAgent = new GuardedHttpAgent({ keepAlive: true, connectTimeout: 2_000 });
 * axios.create({ httpAgent });
 * got.extend({ agent: { http: httpAgent } });
 * http.get(url, { agent: httpAgent });
 * ```
 *
 * A request's error is the dial's: `HostUnavailableError` (the breaker refused, no I/O, in
 * microseconds), `ConnectTimeoutError` (naming the stalled phase), or the socket's own
 * (`ECONNREFUSED`...). The agent never retries: the client's own retry settings decide (see the
 * README). Unix sockets (`socketPath`) are not dialled through the guard: they go to Node as is.
 *
 * @throws TypeError/RangeError naming the option, for an invalid dialguard option.
 */
export class GuardedHttpAgent extends http.Agent {
  /** The breaker this agent's dials ask and report to, or null. */
  readonly breaker: HostBreaker | null;
  readonly #guard: AgentGuard;

  constructor(options?: GuardedHttpAgentOptions) {
    const [settings, nodeOptions] = splitOptions(options);
    super(nodeOptions);
    this.breaker = settings.breaker;
    this.#guard = new AgentGuard(settings);
  }

  /** @internal Node's hook, wrapped so the guard knows the request a dial is for. */
  createSocket(req: http.ClientRequest, options: object, cb: OnCreate): void {
    createSocketFor(this, this.#guard, (http.Agent.prototype as unknown as { createSocket: CreateSocket }).createSocket, req, options, cb);
  }

  /** @internal Node's hook, wrapped so a request that gives up while queued fails at once (see `watchQueued`). */
  addRequest(req: http.ClientRequest, options: object): void {
    (http.Agent.prototype as unknown as { addRequest: AddRequest }).addRequest.call(this, req, options);
    watchQueued(this, req);
    atTotal(this, options);
  }

  /**
   * Dials through the guard; the socket (or the error) goes to `callback`. Called by the agent
   * itself; `socketPath` connections go to Node's own, unguarded.
   */
  override createConnection(options: http.ClientRequestArgs, callback?: Callback): stream.Duplex | null | undefined {
    if (options.socketPath !== undefined) return super.createConnection(options, callback);
    return guardedConnection(this, this.#guard, options as ConnectionOptions, callback, () => super.createConnection(options) as net.Socket, false, 80);
  }
}

/**
 * Node's `https.Agent` with guarded dials: TCP connect and TLS handshake under one timeout.
 * A certificate the host presented (a wrong CA or name on the client's side) fails the request
 * with Node's own error and is the client's problem, not the host's: the breaker's rules decide.
 *
 * ```ts
 * const httpsAgent = new GuardedHttpsAgent({ keepAlive: true, ca });
 * axios.create({ httpsAgent });
 * got.extend({ agent: { https: httpsAgent } });
 * ```
 *
 * @throws TypeError/RangeError naming the option, for an invalid dialguard option.
 */
export class GuardedHttpsAgent extends https.Agent {
  /** The breaker this agent's dials ask and report to, or null. */
  readonly breaker: HostBreaker | null;
  readonly #guard: AgentGuard;

  constructor(options?: GuardedHttpsAgentOptions) {
    const [settings, nodeOptions] = splitOptions(options);
    super(nodeOptions);
    this.breaker = settings.breaker;
    this.#guard = new AgentGuard(settings);
  }

  /** @internal Node's hook, wrapped so the guard knows the request a dial is for. */
  createSocket(req: http.ClientRequest, options: object, cb: OnCreate): void {
    createSocketFor(this, this.#guard, (https.Agent.prototype as unknown as { createSocket: CreateSocket }).createSocket, req, options, cb);
  }

  /** @internal Node's hook, wrapped so a request that gives up while queued fails at once (see `watchQueued`). */
  addRequest(req: http.ClientRequest, options: object): void {
    (https.Agent.prototype as unknown as { addRequest: AddRequest }).addRequest.call(this, req, options);
    watchQueued(this, req);
    atTotal(this, options);
  }

  /**
   * Dials through the guard (TCP and TLS, with the agent's session cache); the socket (or the
   * error) goes to `callback`. `socketPath` connections go to Node's own, unguarded.
   */
  override createConnection(options: https.RequestOptions, callback?: Callback): stream.Duplex | null | undefined {
    if (options.socketPath !== undefined) return super.createConnection(options, callback);
    // A check that throws fails its own dial, not the host (see caughtIdentityCheck).
    const check = options.checkServerIdentity;
    const opts = typeof check === 'function' ? { ...options, checkServerIdentity: caughtIdentityCheck(check) } : options;
    return guardedConnection(this, this.#guard, opts as ConnectionOptions, callback, () => super.createConnection(opts) as net.Socket, true, 443);
  }
}
