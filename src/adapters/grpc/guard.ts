/**
 * The grpc adapter's entry point: one {@link GrpcGuard} owns a ConnectionPool of grpc-js channels
 * and hands out the channel factory that makes any grpc-js client guarded.
 *
 * ```ts
 * const guard = new GrpcGuard({ connectTimeout: 2_000 });
 * const client = new EchoClient('echo.internal:50051', grpc.credentials.createInsecure(), guard.clientOptions());
 * ```
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { type Clock, type TimerHandle, unrefTimer } from '../../core/clock.js';
import { PoolClosedError } from '../../core/errors.js';
import type { Listener, Unsubscribe } from '../../core/events.js';
import { ConnectionPool, type ConnectionPoolEvents, type PoolStats } from '../../pool/connection-pool.js';
import { MAX_DURATION, show } from '../../core/validate.js';
import { sharedRetryBudget } from '../../retry/budget.js';
import { lookupBreaker } from '../../guard/addresses.js';
import { ChannelConnector, type PooledChannel, channelTransport } from './channel-connector.js';
import { type ChannelHost, GuardedChannel } from './guarded-channel.js';
import { type GrpcGuardOptions, checkChannelOptions, grpcSettings, serviceConfigRetries } from './options.js';
import { type ChannelSpec, SpecTable, grpcHostKey, targetOfKey } from './target.js';
import { callbackFailure } from './status.js';

/** grpc-js's `channelFactoryOverride` client option. */
export type ChannelFactory = (target: string, credentials: grpc.ChannelCredentials, options: grpc.ChannelOptions) => grpc.ChannelInterface;

const noop = (): void => {};

/**
 * How often a host isolated until released is looked at again, ms, while a wait-for-ready call
 * waits for it: the breaker tells no one of a release, and a look costs no I/O.
 */
const RELEASE_POLL = 1_000;

/**
 * How long a pooled channel stays open once no client or call holds it, ms (or the guard's
 * `idleTimeout`, when shorter): a client made again with equal credentials and options meanwhile
 * rides it (a client per request keeps its connection), and past it the channel closes. grpc-js
 * frees a subchannel no channel holds on the same 10 s. Left to the idle sweep, a channel whose
 * credentials no later client shares (a `createSsl()` per client, per-user call credentials)
 * stayed open, pinging, for `idleTimeout` (10 min) and then until some call ran the sweep: 500
 * clients made and closed left 500 connections, where plain grpc-js left none (an outside review).
 */
const RELEASED_LINGER = 10_000;

/**
 * The code of the process warning (`DialguardWarning`) given once, when {@link MANY_GUARDS_AT}
 * GrpcGuards are open at once: each guard's channels are its own, so a guard made per request
 * (or per client) opens a connection per request where plain grpc-js clients share one (an
 * outside review: 4 workers, a guard per call, 2 792 server connections open after 9 s against
 * plain's 1, and 2.7x fewer calls, each paying a handshake).
 */
export const MANY_GUARDS = 'DIALGUARD_MANY_GRPC_GUARDS';
/** GrpcGuards open at once before the warning: far past one per process, or one per tenant of a few. */
const MANY_GUARDS_AT = 100;
/** GrpcGuards made and neither closed nor collected. */
let openGuards = 0;
let manyWarned = false;
/** A guard collected unclosed (all its channels closed by their linger) is open no more. */
const collected = new FinalizationRegistry<{ open: boolean }>((held) => {
  if (held.open) openGuards--;
});

/**
 * Guards grpc-js clients: bounded connects that feed a per-host breaker, one shared channel per
 * target, dead channels dropped with everything riding them released, keep-alive on, and calls
 * retried inside the caller's deadline. See the module docs of each part.
 */
export class GrpcGuard {
  readonly #specs: SpecTable;
  readonly #connector: ChannelConnector;
  readonly #pool: ConnectionPool<PooledChannel>;
  readonly #host: ChannelHost;
  readonly #clock: Clock;
  /** Reconnects waiting for their time (the reconnect backoff or the breaker), by spec key. */
  readonly #reconnects = new Map<string, TimerHandle>();
  /** Channels no client or call holds, each closed when its {@link RELEASED_LINGER} ends, by spec key. */
  readonly #lingering = new Map<string, TimerHandle>();
  readonly #linger: number;
  readonly #retryAfter: (spec: ChannelSpec) => number;
  /** Whether the guard retries statuses the server sent (`retry.retryableStatusCodes`). */
  readonly #statusRetries: boolean;
  #closing: Promise<void> | undefined;
  /**
   * Aborted by close(): a call waiting out a retry's backoff ends then, not when its wait would
   * have (an outside review: ~430 ms after close() resolved).
   */
  readonly #shutdown = new AbortController();
  /** Counted among the open guards until closed (see {@link MANY_GUARDS}). */
  readonly #counted = { open: true };

  /**
   * grpc-js's `channelFactoryOverride`: every client made with it gets a {@link GuardedChannel}.
   * Usually reached through {@link GrpcGuard.clientOptions}.
   */
  readonly channelFactory: ChannelFactory;

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: GrpcGuardOptions = {}) {
    const s = grpcSettings(options);
    openGuards++;
    collected.register(this, this.#counted);
    if (openGuards >= MANY_GUARDS_AT && !manyWarned) {
      manyWarned = true;
      process.emitWarning(
        `dialguard: ${openGuards} GrpcGuards are open: each has channels (connections) of its own, so a guard per request or per client opens a connection each where plain grpc-js shares one; make one GrpcGuard and share it`,
        { type: 'DialguardWarning', code: MANY_GUARDS },
      );
    }
    setMaxListeners(0, this.#shutdown.signal); // one listener per call waiting out a backoff, each removed with its wait
    this.#statusRetries = s.retry !== false && s.retry.statuses.size > 0;
    this.#specs = new SpecTable(s.channelOptions, (spec) => this.#released(spec.key));
    this.#linger = Math.min(RELEASED_LINGER, s.idleTimeout ?? RELEASED_LINGER);
    const hostOf = s.hostOf === undefined ? grpcHostKey : ownHostOf(s.hostOf);
    const breaker = s.breaker;
    // Names are dialled per address when there is a breaker to keep each address's entry in.
    const dialing =
      s.perAddress && breaker !== null ? { breaker, timeout: s.connectTimeout, lookup: s.lookup, attemptDelay: s.attemptDelay, hostOf } : undefined;
    this.#connector = new ChannelConnector(this.#specs, s.clock, dialing);
    this.#clock = s.clock;
    // The name's own entry (its lookups: the guard's own resolver's apart, see lookupBreaker; every
    // target guarded by name), or all its addresses open.
    const names = dialing !== undefined && s.lookup !== undefined ? lookupBreaker(breaker!, s.lookup) : breaker;
    this.#retryAfter = (spec) => Math.max(names?.state(hostOf(spec.target), undefined, channelTransport(spec))?.retryAfter ?? 0, this.#connector.addressWait(spec));
    // One budget for the retry loop and the pool's resends (see mayResend below); null: none.
    const budget = s.retry === false ? null : s.retry.budget === undefined ? sharedRetryBudget() : s.retry.budget;
    this.#pool = new ConnectionPool<PooledChannel>({
      connector: this.#connector,
      connectTimeout: s.connectTimeout,
      breaker,
      hostOf: (key) => hostOf(targetOfKey(key)),
      idleTimeout: s.idleTimeout,
      sweepInterval: s.sweepInterval,
      retiredRetries: s.retiredRetries,
      // A call its dead channel cut goes back as a resend: from the retry budget, as every retry.
      ...(budget === null ? {} : { mayResend: () => budget.tryWithdraw() }),
      closeTimeout: s.closeTimeout,
      redialPace: s.redialPace,
      clock: s.clock,
    });
    const guard = this;
    this.#host = {
      pool: this.#pool,
      ready: (key) => this.#connector.stateOf(key) === grpc.connectivityState.READY,
      mistake: (key) => this.#connector.mistake(key),
      specs: this.#specs,
      connector: this.#connector,
      clock: s.clock,
      replayBufferSize: s.replayBufferSize,
      idempotent: s.idempotent,
      idempotentUse: Object.freeze({ idempotent: true, resends: s.retry === false ? 0 : s.retry.maxAttempts - 1 }),
      retry:
        s.retry === false
          ? undefined
          : {
              maxAttempts: s.retry.maxAttempts,
              backoff: s.retry.backoff,
              budget,
              clock: s.clock,
              statuses: s.retry.statuses,
              shutdown: this.#shutdown.signal,
            },
      get closed(): boolean {
        return guard.#closing !== undefined;
      },
      warm: (spec) => this.#warm(spec),
      reconnect: (spec) => this.#reconnect(spec),
      onChange: (key, listener) => this.#wait(key, listener),
      // Open, or half-open with its probe out: a call now would be refused.
      refused: (spec) => this.#retryAfter(spec) > 0,
    };
    this.channelFactory = (target, credentials, channelOptions) => this.channel(target, credentials, channelOptions);
  }

  /**
   * A guarded channel to `target` (any grpc-js target: `host:port`, `dns:///host:port`,
   * `ipv4:addr:port`, ...). Usable as a client's `channelOverride`; closing it stops that client
   * only (the pooled channel serves the guard's other clients until it is idle).
   *
   * @throws Error once the guard is closed (as a closed grpc-js channel does), and whatever grpc-js
   *   throws for a channel it would refuse (invalid options, a target no resolver takes).
   */
  channel(target: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions): GuardedChannel {
    if (typeof target !== 'string' || target.length === 0) throw new TypeError('target must be a non-empty string');
    if (typeof credentials !== 'object' || credentials === null) throw new TypeError('credentials must be grpc ChannelCredentials');
    if (!(credentials instanceof grpc.ChannelCredentials)) throw foreignCredentials(credentials);
    if (this.#closing !== undefined) throw new Error('Channel has been shut down');
    grpcHostKey(target); // a target that names no host fails here, not on the first call
    // A reconnect backoff grpc-js would take as a redial loop, refused before anything is kept.
    if (typeof options === 'object' && options !== null) checkChannelOptions('options', options);
    const spec = this.#specs.acquire(target, credentials, options);
    if (spec.clients === 1) {
      // A new channel spec: grpc-js checks it as a raw client's constructor would (a service
      // config that does not parse, a target no resolver takes). Unchecked, each connect threw
      // before any I/O and counted as a failed dial: this client's options refused the host for
      // every other client on the breaker.
      try {
        new grpc.Channel(spec.target, spec.credentials, spec.options).close();
        if (this.#statusRetries && serviceConfigRetries(spec.options)) {
          // Both layers would retry a status, each attempt of one a whole series of the other:
          // a grpc-js retryPolicy of 3 under `retryableStatusCodes` ran a failing handler 9 times.
          throw new TypeError(
            "retry.retryableStatusCodes and a 'grpc.service_config' retryPolicy (or hedgingPolicy) would both retry a status the server sent, multiplying its attempts: keep one (set 'grpc.enable_retries': 0 to keep the guard's)",
          );
        }
      } catch (err) {
        this.#specs.release(spec);
        throw err;
      }
    }
    return new GuardedChannel(this.#host, spec);
  }

  /**
   * Client options that make a grpc-js client guarded: `options` (channel options, interceptors)
   * with the channel factory. Pass the result as a generated or generic client's third
   * constructor argument.
   */
  clientOptions(options: grpc.ClientOptions = {}): grpc.ClientOptions {
    return { ...options, channelFactoryOverride: this.channelFactory };
  }

  /** Channels open, connects in flight, calls riding channels, and counters since construction. */
  stats(): PoolStats {
    return this.#pool.stats();
  }

  /** Listens for channel events (opened, retired, gone, closed); returns the stopper. */
  on<K extends keyof ConnectionPoolEvents>(event: K, listener: Listener<ConnectionPoolEvents[K]>): Unsubscribe {
    return this.#pool.on(event, listener);
  }

  /**
   * Takes no new calls (guarded channels throw on `createCall`, as closed grpc-js channels do),
   * lets calls in flight finish for up to `closeTimeout`, then ends them and closes every channel.
   * A call waiting out a retry's backoff ends at once, UNAVAILABLE (its next attempt would find
   * the guard closed).
   * Resolves once nothing is left open, or `SETTLE_TIMEOUT` (1 s) after that at the latest
   * (ConnectionPool.close). Idempotent.
   */
  close(): Promise<void> {
    if (this.#closing === undefined) {
      if (this.#counted.open) {
        this.#counted.open = false;
        openGuards--;
      }
      this.#shutdown.abort(new PoolClosedError());
      for (const timer of this.#reconnects.values()) this.#clock.clearTimeout(timer);
      this.#reconnects.clear();
      for (const timer of this.#lingering.values()) this.#clock.clearTimeout(timer);
      this.#lingering.clear();
      this.#closing = this.#pool.close();
      this.#connector.notifyAll();
    }
    return this.#closing;
  }

  /** `await using` support: the same as {@link GrpcGuard.close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * No client or call holds the channel of `key` any more: it closes {@link RELEASED_LINGER} from
   * now (the last release counts), unless a client holds its spec again by then.
   */
  #released(key: string): void {
    if (this.#closing !== undefined) return;
    const pending = this.#lingering.get(key);
    if (pending !== undefined) this.#clock.clearTimeout(pending);
    const timer = this.#clock.setTimeout(() => {
      this.#lingering.delete(key);
      if (this.#specs.get(key) === undefined) this.#pool.retire(key);
    }, this.#linger);
    this.#lingering.set(key, unrefTimer(timer)); // a process with nothing else to do exits
  }

  /**
   * Connects `spec`'s channel as soon as a connect may start: at once, or when grpc's reconnect
   * backoff after failed connects has passed and the breaker would let a dial through (whichever
   * is later). Nothing while one is live or connecting, or once the guard is closed.
   */
  #reconnect(spec: ChannelSpec): void {
    if (this.#closing !== undefined || this.#reconnects.has(spec.key)) return;
    const state = this.#connector.stateOf(spec.key);
    if (state === grpc.connectivityState.READY || state === grpc.connectivityState.CONNECTING) return;
    const now = this.#clock.now();
    const wait = Math.max(this.#connector.retryAt(spec.key) - now, this.#retryAfter(spec));
    if (wait <= 0) {
      this.#warm(spec);
      return;
    }
    // A timer set past 2^31-1 ms fires after 1 ms: a longer wait (a huge
    // grpc.max_reconnect_backoff_ms) is waited out in steps, each looking again. A host isolated
    // until released (Infinity) is looked at every RELEASE_POLL ms: a release has no event.
    const step = Number.isFinite(wait) ? Math.min(wait, MAX_DURATION) : RELEASE_POLL;
    const timer = this.#clock.setTimeout(() => {
      this.#reconnects.delete(spec.key);
      // Its clients may all have closed meanwhile.
      if (this.#specs.get(spec.key) === spec) this.#reconnect(spec);
      this.#connector.notify(spec.key);
    }, step);
    // It keeps the process alive only while someone waits for the channel (as grpc-js's own
    // reconnect does for a waitForReady call): unref'd, a process with nothing else to do exited
    // with its waitForReady callback never called, its call never made.
    if (!this.#connector.waiting(spec.key)) unrefTimer(timer);
    this.#reconnects.set(spec.key, timer);
  }

  /**
   * Lets `listener` hear when the standing of `key` may have changed (see ChannelConnector), and
   * makes a pending reconnect keep the process alive while anyone listens; returns the stopper.
   */
  #wait(key: string, listener: () => void): () => void {
    const stop = this.#connector.onChange(key, listener);
    (this.#reconnects.get(key) as { ref?: () => void } | undefined)?.ref?.();
    return () => {
      stop();
      const pending = this.#reconnects.get(key);
      if (pending !== undefined && !this.#connector.waiting(key)) unrefTimer(pending);
    };
  }

  /** Connects `spec`'s channel without riding it (a call would connect it anyway). */
  #warm(spec: ChannelSpec): void {
    spec.calls++;
    // A failure shows in the state (TRANSIENT_FAILURE); nobody is waiting for it here.
    void this.#pool
      .use(spec.key, async () => undefined)
      .catch(noop)
      .finally(() => {
        spec.calls--;
        this.#specs.forgetIfUnused(spec);
        // A refusal by the breaker changes no standing: whoever waits for the channel looks again.
        this.#connector.notify(spec.key);
      });
  }
}

/**
 * The error for `credentials` that are not dialguard's grpc-js ChannelCredentials: most often
 * those of a second copy of @grpc/grpc-js (two versions installed side by side), whose classes are
 * not this copy's. grpc-js's own "Channel credentials must be a ChannelCredentials object" named
 * neither the cause nor the fix (an outside review).
 */
/**
 * The user's `hostOf`, its throw (or an answer that is no key) marked as the caller's own bug: the
 * call fails INTERNAL with it as `cause`, never UNAVAILABLE (see callbackFailure).
 */
function ownHostOf(hostOf: (target: string) => string): (target: string) => string {
  return (target) => {
    let key: unknown;
    try {
      key = hostOf(target);
    } catch (err) {
      throw callbackFailure(err);
    }
    if (typeof key !== 'string' || key === '') throw callbackFailure(new TypeError(`hostOf(${JSON.stringify(target)}) must return a non-empty string, got ${show(key)}`));
    return key;
  };
}

function foreignCredentials(credentials: object): TypeError {
  const looksLike = typeof (credentials as { _isSecure?: unknown })._isSecure === 'function';
  if (!looksLike) return new TypeError('credentials must be grpc ChannelCredentials');
  let where = '';
  try {
    const pkg = createRequire(import.meta.url).resolve('@grpc/grpc-js/package.json');
    where = ` (dialguard uses ${path.dirname(pkg)}, version ${(JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version?: string }).version ?? '?'})`;
  } catch {
    // its place is only a hint
  }
  return new TypeError(
    `credentials come from another copy of @grpc/grpc-js than the one dialguard uses${where}: grpc-js accepts only its own classes. ` +
      'Install one copy (see `npm ls @grpc/grpc-js`; `npm dedupe`, or align the versions your dependencies ask for).',
  );
}
