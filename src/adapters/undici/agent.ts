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
 * Underneath is a plain undici `Agent`, so its pool, keep-alive and pipelining stay in charge of
 * healthy connections. A connection that fails the way `classify` calls dead (a reset, an EOF
 * mid-response, a broken parse) is destroyed by undici itself before the request fails, so the
 * retry that follows (an idempotent one) always rides a fresh connection, never the dead one. Two things change: its connector is {@link guardedConnector} (bounded
 * dials, the breaker fed with dial outcomes only), and every request goes through the retrying
 * layer of {@link guardedRetry} (safe retries inside the call's time), called directly rather
 * than through `compose()`. Both share one breaker.
 *
 * @module
 */
import { Agent, Dispatcher } from 'undici';
import type { Clock } from '../../core/clock.js';
import { checkFunction, opt, show } from '../../core/validate.js';
import { sharedBreaker } from '../../guard/dial.js';
import type { HostBreaker } from '../../guard/host-breaker.js';
import { type GuardedConnectorOptions, guardedConnector } from './connector.js';
import { type GuardedRetryOptions, type RetrySettings, UNDICI_TIMEOUT, retrySettings } from './options.js';
import { dispatchGuarded } from './retry-interceptor.js';

/**
 * undici Agent options that pass through. `connect`, `connectTimeout`, `headersTimeout` and
 * `bodyTimeout` are dialguard's: the connector dials, and each attempt's timeouts are set per
 * request from the agent's own options and the call's deadline.
 */
export type UndiciAgentOptions = Omit<Agent.Options, 'connect' | 'connectTimeout' | 'headersTimeout' | 'bodyTimeout'>;

/** Options of a {@link GuardedAgent}: the retrying layer's, the connector's, and undici's own. */
export interface GuardedAgentOptions extends GuardedRetryOptions, GuardedConnectorOptions {
  /**
   * The breaker the dials report to and each call asks first. Default the process-wide
   * `sharedBreaker()`: every client in the process learns from every other's dials. `null` for
   * none (dials are still bounded).
   */
  breaker?: HostBreaker | null;
  /**
   * Options of the undici `Agent` underneath (connections, pipelining, keepAliveTimeout,
   * allowH2, ...). Default undici's own. Per-request headers and body timeouts come from this
   * agent's `headersTimeout`/`bodyTimeout` and the call's deadline.
   */
  undici?: UndiciAgentOptions;
  /** Time source for dial timeouts, the call's deadline and the waits. Default the system clock. */
  clock?: Clock;
}

const CONNECTOR_KEYS = ['connectTimeout', 'tls', 'maxCachedSessions', 'keepAliveInitialDelay', 'clock'] as const;

/**
 * An undici `Dispatcher` whose dials are guarded and whose requests are retried only when safe.
 * Use it wherever undici takes a dispatcher; close it (or destroy it) when done.
 */
export class GuardedAgent extends Dispatcher {
  /** The breaker this agent's dials report to (and its calls ask first), or null. */
  readonly breaker: HostBreaker | null;
  readonly #agent: Agent;
  readonly #settings: RetrySettings;
  readonly #inner: Dispatcher.Dispatch;

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: GuardedAgentOptions = {}) {
    super();
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    const undiciOptions = opt<UndiciAgentOptions>(options.undici, {});
    if (typeof undiciOptions !== 'object' || undiciOptions === null) throw new TypeError(`undici must be an object, got ${show(undiciOptions)}`);
    for (const key of ['connect', 'connectTimeout'] as const) {
      if (key in undiciOptions) throw new TypeError(`undici.${key} is dialguard's: use the connectTimeout and tls options instead`);
    }
    for (const key of ['headersTimeout', 'bodyTimeout'] as const) {
      if (key in undiciOptions) throw new TypeError(`undici.${key} is dialguard's: use the ${key} option instead (it is set per attempt)`);
    }
    if (undiciOptions.factory !== undefined) checkFunction('undici.factory', undiciOptions.factory);
    this.breaker = options.breaker === undefined ? sharedBreaker() : options.breaker;
    const connectorOptions: GuardedConnectorOptions = { breaker: this.breaker };
    for (const key of CONNECTOR_KEYS) if (options[key] !== undefined) (connectorOptions as Record<string, unknown>)[key] = options[key];
    this.#settings = retrySettings({ ...options, breaker: this.breaker });
    // The Agent below is made with undici's default timeouts (its own are refused above).
    this.#settings.dispatcherTimeouts = { headers: UNDICI_TIMEOUT, body: UNDICI_TIMEOUT };
    this.#agent = new Agent({ ...undiciOptions, connect: guardedConnector(connectorOptions) });
    this.#inner = this.#agent.dispatch.bind(this.#agent);
    for (const event of ['connect', 'disconnect', 'connectionError', 'drain'] as const) {
      this.#agent.on(event as 'connect', (...args: unknown[]) => (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args));
    }
  }

  /** Dispatches one request through the retrying layer (see `Dispatcher.dispatch`). */
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return dispatchGuarded(this.#settings, this.#inner, options, handler);
  }

  /** True once `close()` or `destroy()` was called. */
  get closed(): boolean {
    return this.#agent.closed;
  }

  /** True once the agent is destroyed, or closed and drained. */
  get destroyed(): boolean {
    return this.#agent.destroyed;
  }

  /** undici's per-origin connection stats of the agent underneath. */
  get stats(): Agent['stats'] {
    return this.#agent.stats;
  }

  /** Takes no new requests, lets those in flight finish, then closes every connection. */
  override close(): Promise<void>;
  override close(callback: () => void): void;
  override close(callback?: () => void): Promise<void> | void {
    const done = this.#agent.close();
    if (callback === undefined) return done;
    done.then(callback, callback);
  }

  /** Fails every request in flight (with `err`, if given) and closes every connection now. */
  override destroy(err: Error | null, callback: () => void): void;
  override destroy(callback: () => void): void;
  override destroy(err: Error | null): Promise<void>;
  override destroy(): Promise<void>;
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | void {
    const callback = typeof a === 'function' ? a : b;
    const err = typeof a === 'function' ? null : (a ?? null);
    const done = this.#agent.destroy(err);
    if (callback === undefined) return done;
    done.then(callback, callback);
  }
}
