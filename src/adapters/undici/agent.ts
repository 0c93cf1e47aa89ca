/**
 * {@link GuardedAgent}: an undici dispatcher with dialguard in it, in one line.
 *
 * ```ts
 * const dispatcher = new GuardedAgent({ timeout: 10_000 });
 * await fetch(url, { dispatcher });            // undici's fetch, or Node's own
 * await request(url, { dispatcher });          // undici's request
 * setGlobalDispatcher(dispatcher);             // every fetch in the process
 * ```
 *
 * It is a plain undici `Agent`, so its pool, keep-alive and pipelining stay in charge of healthy
 * connections, and what undici's own code reads from an Agent (WebSocket and EventSource limits,
 * `'connect'`/`'disconnect'`/`'drain'` events, `close()`/`destroy()`, `compose()`) is undici's.
 * A connection that fails the way `classify` calls dead (a reset, an EOF mid-response, a broken
 * parse) is destroyed by undici itself before the request fails, so the retry that follows (an
 * idempotent one) always rides a fresh connection, never the dead one. Two things change: its
 * connector is {@link guardedConnector} (bounded dials, the breaker fed with dial outcomes only),
 * and every request goes through the retrying layer of {@link guardedRetry} (safe retries inside
 * the call's time), called directly from `dispatch()` rather than through `compose()`. Both share
 * one breaker. A call that fails fails with its last attempt's own error (see `retriesOf`).
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import { Agent, type Dispatcher, errors } from 'undici';
import { type Clock, systemClock } from '../../core/clock.js';
import { PoolClosedError } from '../../core/errors.js';
import { checkFunction, opt, show } from '../../core/validate.js';
import { sharedBreaker } from '../../guard/dial.js';
import type { HostBreaker } from '../../guard/host-breaker.js';
import { SETTLE_TIMEOUT } from '../../pool/connection-pool.js';
import { CONNECTOR_OPTION_NAMES, type GuardedConnectorOptions, guardedConnector } from './connector.js';
import { type GuardedRetryOptions, type RetrySettings, UNDICI_TIMEOUT, retrySettings } from './options.js';
import { RETRY_OPTION_NAMES, dispatchGuarded } from './retry-interceptor.js';
import { undiciConnectOptions } from './undici-connect.js';
import { DialWaiters } from './dial-waiters.js';
import { type OptionNames, checkOptionNames, optionNames } from '../../core/option-names.js';

/** The option names a GuardedAgent takes, guardedRetry()'s and guardedConnector()'s (but `closing`) and `undici`: any other is warned about (see checkOptionNames). */
const AGENT_OPTIONS = optionNames<GuardedAgentOptions>({ ...RETRY_OPTION_NAMES, ...connectorNames(), undici: true });

/** guardedConnector()'s option names but `closing`, which the agent sets itself. */
function connectorNames(): OptionNames<Omit<GuardedConnectorOptions, 'closing'>> {
  const { closing: _closing, ...names } = CONNECTOR_OPTION_NAMES;
  return names;
}

/**
 * undici Agent options that pass through. `headersTimeout` and `bodyTimeout` are dialguard's:
 * each attempt's timeouts are set per request from the agent's own options and the call's
 * deadline. `connect` (an object of socket and TLS options, or a connector function),
 * `connectTimeout`, `socketPath`, `autoSelectFamily`, `autoSelectFamilyAttemptTimeout` and
 * `maxCachedSessions` are taken over by the guarded connector, which honours them (see
 * {@link GuardedAgentOptions.undici}).
 */
export type UndiciAgentOptions = Omit<Agent.Options, 'headersTimeout' | 'bodyTimeout'>;

/** Options of a {@link GuardedAgent}: the retrying layer's, the connector's, and undici's own. */
export interface GuardedAgentOptions extends GuardedRetryOptions, Omit<GuardedConnectorOptions, 'closing'> {
  /**
   * The breaker the dials report to and each call asks first. Default the process-wide
   * `sharedBreaker()`: every client in the process learns from every other's dials. `null` for
   * none (dials are still bounded).
   */
  breaker?: HostBreaker | null;
  /**
   * Options of the undici `Agent` underneath (connections, pipelining, keepAliveTimeout,
   * allowH2, webSocket, eventSource...). Default undici's own. Per-request headers and body
   * timeouts come from this agent's `headersTimeout`/`bodyTimeout` and the call's deadline.
   * undici's connect options (`connect`, `connectTimeout`, `socketPath`, `autoSelectFamily`...)
   * are honoured by the guarded connector, undici's meaning kept (`connectTimeout: 0`: no
   * limit); a dialguard option of the same name, when also given, wins.
   */
  undici?: UndiciAgentOptions;
  /** Time source for dial timeouts, the call's deadline and the waits. Default the system clock. */
  clock?: Clock;
}

const CONNECTOR_KEYS = ['connectTimeout', 'tls', 'maxCachedSessions', 'keepAliveInitialDelay', 'socketPath', 'socket', 'connector', 'allowH2', 'clock'] as const;

/**
 * undici Agent options that are not this agent's own: given at the top level (as to `new Agent()`)
 * they were silently dropped. A `connect: { lookup }` or `connect: { ca }` moved over from an
 * Agent went unused: real DNS, ENOTFOUND, and the name refused for every client on the breaker.
 */
const UNDICI_ONLY_KEYS = [
  'connect', 'connections', 'pipelining', 'keepAliveTimeout', 'keepAliveMaxTimeout', 'keepAliveTimeoutThreshold',
  'maxHeaderSize', 'maxResponseSize', 'autoSelectFamily', 'autoSelectFamilyAttemptTimeout', 'localAddress',
  'strictContentLength', 'maxRedirections', 'interceptors', 'factory', 'maxConcurrentStreams', 'maxRequestsPerClient',
  'webSocket', 'eventSource', 'maxOrigins',
] as const;

/** The undici Agent options for `super()`, checked: undici's own plus the guarded connector. */
function agentOptions(options: GuardedAgentOptions, breaker: HostBreaker | null, closing: AbortSignal, waiters: DialWaiters): Agent.Options {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
  for (const key of UNDICI_ONLY_KEYS) {
    if ((options as Record<string, unknown>)[key] !== undefined) {
      throw new TypeError(`${key} is an undici Agent option: pass it as undici: { ${key} } (at the top level it was ignored)`);
    }
  }
  // Http2Client and GrpcGuard take `retry: false | { maxAttempts, backoff, budget }`; this agent
  // takes those at the top level. Only warned about as unknown, `retry: false` left every retry
  // on and `retry: { maxAttempts: 4 }` ran with 3 (an outside review).
  const retry = (options as { retry?: unknown }).retry;
  if (retry !== undefined) {
    throw new TypeError(`retry is not a GuardedAgent option: its retry options are top-level (maxAttempts, backoff, budget, timeout...); ${retry === false ? 'maxAttempts: 1 turns retries off' : `pass ${show(retry)}'s keys at the top level`}`);
  }
  const undiciOptions = opt<UndiciAgentOptions>(options.undici, {});
  if (typeof undiciOptions !== 'object' || undiciOptions === null) throw new TypeError(`undici must be an object, got ${show(undiciOptions)}`);
  for (const key of ['headersTimeout', 'bodyTimeout'] as const) {
    if (key in undiciOptions) throw new TypeError(`undici.${key} is dialguard's: use the ${key} option instead (it is set per attempt)`);
  }
  if (undiciOptions.factory !== undefined) checkFunction('undici.factory', undiciOptions.factory);
  const { rest, connector } = undiciConnectOptions(undiciOptions);
  const connectorOptions: GuardedConnectorOptions = { ...connector, breaker, closing };
  for (const key of CONNECTOR_KEYS) if (options[key] !== undefined) (connectorOptions as Record<string, unknown>)[key] = options[key];
  const dial = guardedConnector(connectorOptions);
  // Each dial in the context of the request it serves, when dials are traced (see dial-waiters).
  const connect: typeof dial = (opts, callback) =>
    waiters.dial(opts.protocol, opts.hostname, opts.port, (ended) =>
      dial(
        opts,
        ended === undefined
          ? callback
          : (...args: Parameters<typeof callback>) => {
              ended();
              return callback(...args);
            },
      ),
    );
  return { ...rest, connect };
}

const DIALS = Symbol('dialguard.agent.dials');

/** A GuardedAgent's dials at its end: abandoned SETTLE_TIMEOUT after close() began, or at destroy(). */
class DialsClosing {
  #timer: ReturnType<Clock['setTimeout']> | undefined;
  /**
   * Aborted as close() or destroy() begins (undici's ClientClosedError, ClientDestroyedError):
   * calls waiting out a backoff end then. Kept here, not in a private field: undici's compose()
   * wraps the agent in a Proxy, through which private fields cannot be reached.
   */
  readonly shutdown = new AbortController();

  constructor(
    readonly controller: AbortController,
    readonly clock: Clock,
  ) {
    setMaxListeners(0, this.shutdown.signal); // one listener per call in retry
  }

  /** close() began (again, maybe): arms the bound once; returns `callback`, which also disarms it. */
  closing(callback: (...args: unknown[]) => void): (...args: unknown[]) => void {
    if (this.#timer === undefined && !this.controller.signal.aborted) this.#timer = this.clock.setTimeout(() => this.abandon(), SETTLE_TIMEOUT);
    return (...args) => {
      this.#disarm();
      callback(...args);
    };
  }

  /** Abandons every dial in flight, and every later one (each rejects with PoolClosedError). */
  shutDown(reason: Error): void {
    if (!this.shutdown.signal.aborted) this.shutdown.abort(reason);
  }

  abandon(): void {
    this.#disarm();
    if (!this.controller.signal.aborted) this.controller.abort(new PoolClosedError('agent'));
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    this.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * An undici `Agent` whose dials are guarded and whose requests are retried only when safe.
 * Use it wherever undici takes a dispatcher; close it (or destroy it) when done.
 *
 * It is an undici `Agent` (so `instanceof Agent`, `compose()`, `close()`, `destroy()`, the
 * `'connect'`/`'disconnect'`/`'drain'` events, `stats`, and the WebSocket and EventSource limits
 * are undici's own); `dispatch()` is dialguard's, and `close()`/`destroy()` also end the dials.
 */
export class GuardedAgent extends Agent {
  /** The breaker this agent's dials report to (and its calls ask first), or null. */
  readonly breaker: HostBreaker | null;
  readonly #settings: RetrySettings;
  readonly #inner: Dispatcher['dispatch'];
  /**
   * @internal The dials' end. Symbol-keyed, not `#private`: `compose()` hands out a Proxy of the
   * agent, whose `close()` and `destroy()` run with the Proxy as `this`.
   */
  readonly [DIALS]: DialsClosing;

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: GuardedAgentOptions = {}) {
    const breaker = typeof options === 'object' && options !== null && options.breaker !== undefined ? options.breaker : sharedBreaker();
    const closing = new AbortController();
    // Every dial in flight listens to it, and 64 callers open 64 connections at once: Node's
    // default of 10 printed a MaxListenersExceededWarning ("possible memory leak") on a healthy
    // start. Each listener goes with its dial.
    setMaxListeners(0, closing.signal);
    const waiters = new DialWaiters();
    super(agentOptions(options, breaker, closing.signal, waiters));
    checkOptionNames('GuardedAgent', options, AGENT_OPTIONS); // after agentOptions: an undici option given at the top level is its TypeError alone
    this.breaker = breaker;
    this[DIALS] = new DialsClosing(closing, opt(options.clock, systemClock));
    this.#settings = retrySettings({ ...options, breaker });
    // The Agent is made with undici's default timeouts (its own are refused above); this agent's
    // own options are each request's default, set per attempt when they differ.
    this.#settings.dispatcherTimeouts = { headers: UNDICI_TIMEOUT, body: UNDICI_TIMEOUT };
    this.#settings.headersTimeout ??= UNDICI_TIMEOUT;
    this.#settings.bodyTimeout ??= UNDICI_TIMEOUT;
    this.#settings.shutdown = this[DIALS].shutdown.signal;
    this.#settings.dialWaiters = waiters;
    const servername = (options.tls as { servername?: unknown } | undefined)?.servername;
    if (typeof servername === 'string' && servername !== '') this.#settings.servername = servername;
    // A unix socket is its own host (see guardedConnector): an early refusal asks by its path.
    // By the origin, a socket agent was refused for as long as that TCP host:port was open.
    const socketPath = options.socketPath ?? undiciConnectOptions(opt<UndiciAgentOptions>(options.undici, {})).connector.socketPath;
    if (typeof socketPath === 'string' && socketPath !== '') this.#settings.socketPath = socketPath;
    // Each attempt enters undici's own Agent dispatch (its checks, its pools).
    const base = Agent.prototype.dispatch;
    this.#inner = (opts, handler) => base.call(this, opts, handler);
  }

  /**
   * Closes the agent as undici's `close()` does (no new requests; those queued and in flight
   * finish first), bounded as `ConnectionPool.close()` is: a dial still out {@link SETTLE_TIMEOUT}
   * after close() began is abandoned (its requests fail with {@link PoolClosedError}, a socket it
   * delivers later is destroyed), so a connector that never calls back (with `connectTimeout: 0`,
   * no dial timeout) cannot hold it forever. Requests on live connections are undici's to finish
   * (`destroy()` ends them).
   */
  override close(): Promise<void>;
  override close(callback: () => void): void;
  override close(callback?: () => void): Promise<void> | void {
    // undici's promise form calls close(callback), which lands here; a non-function is undici's to refuse.
    if (typeof callback !== 'function') return callback === undefined ? super.close() : super.close(callback);
    this[DIALS].shutDown(new errors.ClientClosedError());
    return super.close(this[DIALS].closing(callback));
  }

  /**
   * Destroys the agent as undici's `destroy()` does, and abandons every dial in flight at once:
   * a connector that never calls back leaves no dial, and no dial timer, behind.
   */
  override destroy(): Promise<void>;
  override destroy(err: Error | null): Promise<void>;
  override destroy(callback: () => void): void;
  override destroy(err: Error | null, callback: () => void): void;
  override destroy(...args: unknown[]): Promise<void> | void {
    this[DIALS].shutDown(new errors.ClientDestroyedError());
    this[DIALS].abandon();
    return Reflect.apply(super.destroy, this, args) as Promise<void> | void;
  }

  /** `await using` support: closes the agent as `close()` does (requests in flight finish first). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Dispatches one request through the retrying layer (see `Dispatcher.dispatch`). As undici's:
   * throws `InvalidArgumentError` without a handler; a request undici refuses at once (bad
   * options, agent closed) fails synchronously through the handler's `onError` alone (no
   * `onConnect` first); returns false when the origin's connections are saturated, and the agent
   * emits `'drain'` once they are not.
   */
  override dispatch(options: Agent.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (typeof handler !== 'object' || handler === null) throw new errors.InvalidArgumentError('handler must be an object');
    return dispatchGuarded(this.#settings, this.#inner, options, handler);
  }
}
