/**
 * One shared connection per target, safe to share.
 *
 * - **Single flight**: one connect attempt per target, shared by every waiter, running on its own.
 *   A waiter that aborts leaves at once; the attempt still settles, is recorded in the breaker
 *   once (one dial, one outcome), and is kept (success) or dropped (failure). A failed attempt is
 *   never handed to a later caller.
 * - **Identity**: each connection has an id. Eviction removes the cache entry only if it is still
 *   the connection the failing request used, so a late failure on an old connection never evicts
 *   its replacement (seed 003, review P2). Every evicted connection is closed.
 * - **Retired vs gone**: retired takes no new requests and closes when its last request ends;
 *   gone (a dead transport) releases every request riding it at once (seed 003, review P1).
 *   A stream-level error, a request timeout or an application status retires nothing.
 * - **Going back**: a request whose connection was retired or found dead meanwhile goes back for a
 *   fresh connection, a bounded number of times, only when its failure provably carries no answer
 *   from the server (certainly not sent; or, for an idempotent request, released because the
 *   connection died): a status the server chose is final.
 * - **User code never escapes**: every call into the connector, `hostOf` and `classify` is
 *   guarded, so a throw becomes the caller's rejection or is contained, never an unhandled one.
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import { classify as defaultClassify, failedEstablishing, leftHostRefusing, toldAsSentEarlier } from '../core/classify.js';
import { type Clock, checkedClock } from '../core/clock.js';
import { ConnectionGoneError, PoolClosedError } from '../core/errors.js';
import { EventHub, type Listener, type Unsubscribe } from '../core/events.js';
import { checkBoolean, checkDuration, checkFunction, checkInteger, checkSignal, opt } from '../core/validate.js';
import { DEFAULT_CONNECT_TIMEOUT, type DialContext, dial } from '../guard/dial.js';
import { dialFailureOutcome, localFailure } from '../guard/dial-outcome.js';
import type { HostBreaker, Transport } from '../guard/host-breaker.js';
import { hostKey } from '../guard/host-key.js';
import { type Lease, PooledConnection, type RetireReason } from './pooled-connection.js';
import { IdleSweep } from './idle-sweep.js';
import { Trip } from './trip.js';
import { askSafely, classifySafely, closeSafely, unwatchSafely } from './user-code.js';
import { unguarded } from './unguarded.js';
import type { ConnectionPoolEvents, ConnectionPoolOptions, Connector, PoolClassification, PoolStats, UseOptions } from './pool-types.js';
import { onCallerAbort } from '../core/shared-signal.js';
import { type OptionNames, checkOptionNames, optionNames } from '../core/option-names.js';
import { callerContext } from '../observe/tracing.js';

export type { ConnectionPoolEvents, ConnectionPoolOptions, ConnectionWatch, Connector, PoolClassification, PoolStats, UseOptions } from './pool-types.js';

/** The option names a ConnectionPool takes: any other is warned about (see checkOptionNames). */
const POOL_EVENTS: OptionNames<ConnectionPoolEvents> = { opened: true, retired: true, gone: true, closed: true, resent: true };
const POOL_OPTIONS = optionNames<ConnectionPoolOptions<unknown>>({ connector: true, connectTimeout: true, breaker: true, hostOf: true, idleTimeout: true, sweepInterval: true, retiredRetries: true, mayResend: true, closeTimeout: true, classify: true, clock: true, redialPace: true });

interface Slot<C> {
  /** The breaker key of the slot's target, from `hostOf` (computed before the slot exists). */
  readonly host: string;
  current: PooledConnection<C> | undefined;
  attempt: Promise<PooledConnection<C>> | undefined;
}

/** A failing target's pacing: failed attempts in a row, and when the next may start. */
interface Redial {
  fails: number;
  at: number;
}

/** The first wait after a failed connect attempt, ms; it doubles per failure up to `redialPace`. */
const FIRST_REDIAL_WAIT = 10;
/** Failing targets whose pacing a pool remembers (the oldest forgotten first): bounded memory. */
const REDIAL_TARGETS = 1_024;

const noop = (): void => {};

/** A caller whose connection was retired before it could ride looks again at most this often. */
const STALE_PASSES = 4;

/**
 * How long `close()` waits, once requests are released, for the connects it aborted and the
 * connections it closed to settle, ms (1 000: a connector that honours its abort, and a close on
 * a live socket, settle in milliseconds; one that ignores them must not hold a shutdown forever).
 * A connection delivered later is closed as it arrives.
 */
export const SETTLE_TIMEOUT = 1_000;

/** One shared connection per target. See the module docs. */
export class ConnectionPool<C> {
  readonly #connector: Connector<C>;
  readonly #connectTimeout: number;
  /** `undefined`: dial's default, the shared breaker (one per process, never replaced). */
  readonly #breaker: HostBreaker | null | undefined;
  readonly #hostOf: (target: string) => string;
  readonly #retiredRetries: number;
  readonly #mayResend: (() => boolean) | undefined;
  readonly #closeTimeout: number;
  readonly #classify: (err: unknown) => PoolClassification;
  readonly #clock: Clock;
  readonly #redialPace: number;
  /** Targets whose last connect attempt failed, and when the next may start. */
  readonly #redials = new Map<string, Redial>();
  readonly #slots = new Map<string, Slot<C>>();
  /** Every connection opened and not yet closed. */
  readonly #live = new Map<PooledConnection<C>, (() => void) | undefined>();
  readonly #closingSignal = new AbortController();
  readonly #events = new EventHub<ConnectionPoolEvents>('pool', POOL_EVENTS);
  readonly #closes = new Set<Promise<void>>();
  readonly #inFlight = new Set<Promise<unknown>>();
  #closed: Promise<void> | undefined;
  #nextId = 0;
  /** Closes idle connections, a few targets per call. */
  readonly #sweep: IdleSweep<C>;
  #attempts = 0;
  #leases = 0;
  readonly #counts = { opened: 0, closed: 0, gone: 0, turns: 0 };

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: ConnectionPoolOptions<C>) {
    checkOptionNames('ConnectionPool', options, POOL_OPTIONS);
    const connector = options?.connector;
    if (connector === null || typeof connector !== 'object') {
      throw new TypeError('connector must be an object with connect() and close()');
    }
    checkFunction('connector.connect', connector.connect);
    checkFunction('connector.close', connector.close);
    if (connector.watch !== undefined) checkFunction('connector.watch', connector.watch);
    this.#connector = connector;
    this.#connectTimeout = checkDuration('connectTimeout', opt(options.connectTimeout, DEFAULT_CONNECT_TIMEOUT), 1);
    this.#breaker = options.breaker;
    this.#hostOf = checkFunction('hostOf', opt(options.hostOf, (t: string) => hostKey(t)));
    const idleTimeout = checkDuration('idleTimeout', opt(options.idleTimeout, 600_000), 1, true);
    const sweepInterval = checkDuration('sweepInterval', opt(options.sweepInterval, 60_000));
    this.#retiredRetries = checkInteger('retiredRetries', opt(options.retiredRetries, 3), 0, 100);
    this.#mayResend = options.mayResend === undefined ? undefined : checkFunction<() => boolean>('mayResend', options.mayResend);
    this.#closeTimeout = checkDuration('closeTimeout', opt(options.closeTimeout, 5_000));
    this.#classify = checkFunction('classify', opt(options.classify, defaultClassify));
    this.#clock = checkedClock(options.clock);
    this.#redialPace = checkDuration('redialPace', opt(options.redialPace, 250));
    this.#sweep = new IdleSweep<C>(idleTimeout, sweepInterval, this.#clock.now(), this.#slots, (conn) => this.#retire(conn, 'idle'));
    setMaxListeners(0, this.#closingSignal.signal); // one listener per connect attempt in flight
  }

  /**
   * Runs `fn` on the shared connection to `target`, opening it if needed.
   *
   * Rejects with: `fn`'s error; a dial's error (`HostUnavailableError`, `ConnectTimeoutError`, a
   * socket error); {@link ConnectionGoneError} when the connection died under the request (its
   * `cause` says how); {@link PoolClosedError} when the pool is closed, or closed under the
   * request (`close()` released it after `closeTimeout`); or the caller's `signal.reason`.
   */
  use<T>(target: string, fn: (lease: Lease<C>) => Promise<T>, options: UseOptions = {}): Promise<T> {
    let signal: AbortSignal | undefined;
    let resends: number;
    try {
      checkFunction('fn', fn); // before anything is allocated: no connection opened for a call that cannot run
      resends = this.#resendsOf(options);
      signal = checkSignal('signal', options.signal);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<T>((resolve, reject) => this.#board(target, fn, false, signal, resends, resolve as (value: unknown) => void, resends === 0 ? reject : (reason, resent, sentBefore) => reject(toldAsSentEarlier(reason, undefined, sentBefore === true || (resent ?? 0) > 0))));
  }

  /**
   * {@link ConnectionPool.use} for a caller whose work reports its own end: `board` starts the
   * work on the lease and returns; the work calls `trip.end(ok, value)` once it is over (the
   * first end wins, as with `fn`'s promise). The call's outcome goes to `resolve` or `reject`,
   * exactly as `use()` would settle its promise with it, and with the same rules (a ride released
   * by a dead connection or the caller's abort, a sibling's retired connection sending it back).
   * No promise is made on the warm path: for an adapter whose transport already calls back
   * (grpc-js's listener), a ride through `use()` cost three promises and eleven closures more.
   * Neither settler may throw. `reject`'s second argument is how many times the pool sent the
   * request again after its connection died under it (see {@link UseOptions.resends}), so that a
   * retry loop above spends those sends from its own attempts; its third, whether a send before
   * the failure may have reached the server (a resend counted there, or one whose dial failed):
   * the error is the attempt's own, unmarked (`use()` hands a copy that is not "not sent", see
   * toldAsSentEarlier), for the adapter to tell its caller.
   *
   * @internal For dialguard's adapters.
   */
  ride(target: string, board: (trip: Trip<C>) => void, options: UseOptions, resolve: (value: unknown) => void, reject: (reason: unknown, resent?: number, sentBefore?: boolean) => void): void {
    try {
      this.#board(target, board as (lease: Lease<C>) => unknown, true, checkSignal('signal', options.signal), this.#resendsOf(options), resolve, reject);
    } catch (err) {
      reject(err); // a signal that cannot be listened to, as use() rejects with it
    }
  }

  /** How many times a call with `options` may be sent again after its connection died under it: 0 unless idempotent. */
  #resendsOf(options: UseOptions): number {
    const resends = options.resends;
    // The adapters' per-client value, on every call: checked in full only when it is not plainly
    // good, and whatever the call (a typo went unheard until the call was made idempotent; an
    // outside review).
    if (resends !== undefined && !(Number.isInteger(resends) && resends >= 0 && resends <= 100)) checkInteger('resends', resends, 0, 100);
    if (!checkBoolean('idempotent', options.idempotent, false)) return 0;
    return resends ?? this.#retiredRetries;
  }

  /**
   * The start of a call (`use()`'s or `ride()`'s; `ends`: the work reports its own end). The hot
   * path: a usable connection is there (`slot.current` always is), nothing is closing and the
   * caller is still here. No async frame and no promise chain: the ride is settled from its own
   * end (see #land). `#closed` is set before close() retires anything, so a listener of close()
   * itself finds the pool closed here (test/pool/close-reentry).
   */
  #board(
    target: string,
    fn: (lease: Lease<C>) => unknown,
    ends: boolean,
    signal: AbortSignal | undefined,
    resends: number,
    resolve: (value: unknown) => void,
    reject: (reason: unknown, resent?: number, sentBefore?: boolean) => void,
  ): void {
    const now = this.#clock.now();
    this.#sweep.ifDue(now);
    if (this.#closed === undefined && signal?.aborted !== true) {
      const conn = this.#slots.get(target)?.current;
      if (conn !== undefined) {
        this.#embark(conn, fn, ends, signal, resends, 0, 1, 0, resolve, reject);
        return;
      }
    }
    void this.#useSlow(target, fn, ends, signal, resends, 0, 0, 1, 0, resolve, reject);
  }

  /**
   * The call without a connection at hand: waits for the shared attempt (or finds the pool closed
   * or the caller gone), then rides. Also each turn that goes back after a sibling retired the
   * connection under it. `stale` counts the connections found retired before they could be ridden.
   * `again` is 1 when this turn resends a request that may have been sent: counted in `resent`
   * only once it boards a connection. A resend whose dial failed sent nothing, and counted, it
   * spent one of the caller's attempts: an idempotent gRPC call cut by a 0.5 s restart gave up
   * after 2 of its 3, just before the server was back (an outside review).
   * Never rejects: the call's failure goes to `reject`.
   */
  async #useSlow(
    target: string,
    fn: (lease: Lease<C>) => unknown,
    ends: boolean,
    signal: AbortSignal | undefined,
    resends: number,
    resent: number,
    again: number,
    turn: number,
    stale: number,
    resolve: (value: unknown) => void,
    reject: (reason: unknown, resent?: number, sentBefore?: boolean) => void,
  ): Promise<void> {
    try {
      // A turn going back may start inside the release of its connection (markGone releasing each
      // ride, after the connection was evicted): let that release finish first.
      // Stryker disable next-line ConditionalExpression,EqualityOperator: on the first turn the wait only costs a tick (the attempt would start one tick later); no test can see it.
      if (turn > 1) await undefined;
      for (;;) {
        const acquired = this.#acquire(target, signal);
        const conn = acquired instanceof PooledConnection ? acquired : await acquired;
        if (conn.usable) {
          // Aborted after the attempt settled but before this ride boards (a caller sharing the
          // attempt aborted it, in a microtask between): it leaves, never rides. Listening to an
          // aborted signal hears nothing, so boarding would have ridden and resolved.
          if (signal?.aborted === true) throw signal.reason;
          this.#embark(conn, fn, ends, signal, resends, resent + again, turn, stale, resolve, reject);
          return;
        }
        // Retired (or found dead) in the microtasks between the attempt handing it over and this
        // ride: never put a request on it. Look again, as if it had never been handed over.
        if (++stale >= STALE_PASSES) throw new ConnectionGoneError(target, conn.id);
      }
    } catch (err) {
      // `again`: this turn resent a request that may have been sent, and its dial failed.
      reject(err, resent, resent + again > 0);
    }
  }

  /**
   * Retires `target`'s connection, as the idle sweep does (a `'retired'` event, reason `'idle'`):
   * the next call to the target gets a fresh one, calls riding it finish first, and it closes
   * once they have (at once when none do). For an owner that knows no caller can reach the
   * connection any more (a gRPC channel whose every client closed).
   *
   * @returns whether the target had a connection to retire.
   */
  retire(target: string): boolean {
    const conn = this.#slots.get(target)?.current;
    if (conn === undefined) return false;
    this.#retire(conn, 'idle');
    return true;
  }

  /** Counters and gauges. */
  stats(): PoolStats {
    return { targets: this.#slots.size, connections: this.#live.size, attempts: this.#attempts, leases: this.#leases, ...this.#counts };
  }

  /** Listens for a connection event; returns the function that stops listening. */
  on<K extends keyof ConnectionPoolEvents>(event: K, listener: Listener<ConnectionPoolEvents[K]>): Unsubscribe {
    return this.#events.on(event, listener);
  }

  /**
   * Stops taking requests (new ones reject with {@link PoolClosedError}), aborts connect
   * attempts in flight (the connector's `ctx.signal`), lets requests in flight finish for up to
   * `closeTimeout`, then releases them (they reject with {@link PoolClosedError}) and closes every
   * connection. Resolves once nothing is left open, or {@link SETTLE_TIMEOUT} after the release
   * at the latest: a connector that ignores its abort (or a close that never ends) cannot hold it
   * forever, and a connection it delivers later is closed as it arrives. Idempotent.
   */
  close(): Promise<void> {
    if (this.#closed !== undefined) return this.#closed;
    // Closed before the shutdown's first, synchronous part runs: a listener it calls (a 'retired'
    // event, the connector's close) and that calls use() gets PoolClosedError, not a ride.
    let started!: (shutdown: Promise<void>) => void;
    this.#closed = new Promise<void>((resolve) => (started = resolve));
    started(this.#shutdown());
    return this.#closed;
  }

  /** `await using` support: the same as {@link ConnectionPool.close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #shutdown(): Promise<void> {
    this.#closingSignal.abort(new PoolClosedError());
    for (const [target, slot] of this.#slots) {
      if (slot.current !== undefined) this.#retire(slot.current, 'closing');
      this.#slots.delete(target);
    }
    if (this.#leases > 0) {
      let timer: ReturnType<Clock['setTimeout']> | undefined;
      await new Promise<void>((resolve) => {
        this.#onDrained = resolve;
        timer = this.#clock.setTimeout(resolve, this.#closeTimeout);
      });
      this.#clock.clearTimeout(timer!);
      this.#onDrained = undefined;
    }
    // Whatever still rides a connection now is released (with PoolClosedError as the cause).
    // That is a shutdown, not a dead connection: no 'gone' event, no gone count.
    for (const conn of [...this.#live.keys()]) {
      conn.markGone(new PoolClosedError());
      this.#evict(conn);
      this.#closeConnection(conn);
    }
    // Attempts were abandoned above; wait for them, and for the closes, to settle (a late
    // connection is disposed), for at most SETTLE_TIMEOUT: a connector that ignores its abort, or
    // a close that never ends, must not hold close() forever. What settles later is still closed.
    // Armed only when something is left: a clock whose setTimeout throws then fails close() with
    // its error, never an unhandled rejection of a deadline nobody awaited (an outside review).
    if (this.#inFlight.size === 0 && this.#closes.size === 0) return;
    let expired = false;
    let timer: ReturnType<Clock['setTimeout']> | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = this.#clock.setTimeout(() => {
        expired = true;
        resolve();
      }, SETTLE_TIMEOUT);
    });
    try {
      while (!expired && (this.#inFlight.size > 0 || this.#closes.size > 0)) await Promise.race([Promise.all([...this.#inFlight, ...this.#closes]), deadline]);
    } finally {
      if (timer !== undefined) this.#clock.clearTimeout(timer);
    }
  }

  #onDrained: (() => void) | undefined;

  /**
   * The usable connection to `target`: at once when there is one (no promise on the hot path),
   * otherwise after the shared attempt. `slot.current` is always usable: retiring evicts.
   */
  #acquire(target: string, signal: AbortSignal | undefined): PooledConnection<C> | Promise<PooledConnection<C>> {
    if (this.#closed !== undefined) throw new PoolClosedError();
    if (signal?.aborted) throw signal.reason;
    return this.#slots.get(target)?.current ?? this.#acquireSlow(target, signal);
  }

  async #acquireSlow(target: string, signal: AbortSignal | undefined): Promise<PooledConnection<C>> {
    // Bounded: each pass either returns, or found the fresh connection already retired under it.
    let last: PooledConnection<C> | undefined;
    for (let pass = 0; pass < 4; pass++) {
      // Stryker disable next-line ConditionalExpression: defence in depth; after close() the dial below is refused by the aborted closing signal, with the same PoolClosedError
      if (this.#closed !== undefined) throw new PoolClosedError(); // closing may have begun while we waited
      let slot = this.#slots.get(target);
      if (slot === undefined) {
        // hostOf first: a target it rejects leaves nothing behind (no slot, no attempt).
        const host = this.#hostOf(target);
        // Stryker disable next-line ObjectLiteral: {} is the same slot at run time; the fields are for the type.
        slot = { host, current: undefined, attempt: undefined };
        this.#slots.set(target, slot);
      }
      // Stryker disable next-line ConditionalExpression: a race guard (another waiter's attempt landed while ours was retired); without it the pass would dial a second connection, which no test can time.
      if (slot.current !== undefined) return slot.current;
      const conn = await untilAborted(slot.attempt ?? this.#connect(target, slot), signal);
      // Stryker disable next-line ConditionalExpression: #useSlow checks `usable` again before boarding (a retired connection is never ridden either way), and a usable one is the slot's current, which the next pass returns
      if (conn.usable) return conn;
      last = conn;
    }
    throw new ConnectionGoneError(target, last!.id);
  }

  /** Starts the one attempt for `slot`, which runs on its own whoever waits for it. */
  #connect(target: string, slot: Slot<C>): Promise<PooledConnection<C>> {
    this.#attempts++;
    const establish = (ctx: DialContext): Promise<C> => {
      let raw: Promise<C>;
      try {
        raw = Promise.resolve(this.#connector.connect(target, ctx));
      } catch (err) {
        // Thrown before any I/O could start: this process's failure (a connector bug), not the
        // host's. Counted as the host's, 16 such throws opened a healthy host for every client.
        raw = Promise.reject(localFailure(err));
      }
      // close() waits for the connector itself, not only for the dial (which rejects at once when
      // aborted): a connection that lands after the abort is disposed before close() resolves.
      this.#track(raw);
      return raw;
    };
    // A connector that guards and bounds this target itself (per address) gets an unguarded dial.
    let own = false;
    let transport: Transport | undefined;
    try {
      // Stryker disable next-line OptionalChaining: without `?.` a connector lacking the method throws a TypeError, caught below with the same outcome (guarded by the pool).
      own = this.#connector.guardsItself?.(target) === true;
    } catch {
      // a connector that cannot say is guarded by the pool, as one without the method
    }
    try {
      // Stryker disable next-line OptionalChaining: without `?.` a connector lacking the method throws a TypeError, caught below with the same outcome (any transport).
      const said = own ? undefined : this.#connector.transport?.(target);
      // Stryker disable next-line ConditionalExpression: taken unchecked, another answer only reaches the breaker, which reads any value but 'plain', 'tls' and 'tls:<name>' as any transport (the check keeps a junk value out of the dial's options).
      if (said === 'tls' || said === 'plain' || (typeof said === 'string' && said.startsWith('tls:'))) transport = said;
    } catch {
      // a connector that cannot say dials as any transport, as one without the method
    }
    // A connection delivered after close() gave up on it is closed as it arrives.
    const dispose = (c: C): void => this.#track(closeSafely(this.#connector, c, new PoolClosedError()));
    const start = (): Promise<C> =>
      own
        ? unguarded(establish, this.#closingSignal.signal, dispose)
        : dial(slot.host, establish, {
            timeout: this.#connectTimeout,
            breaker: this.#breaker,
            clock: this.#clock,
            signal: this.#closingSignal.signal,
            dispose,
            transport,
          });
    // The target's last attempt failed: this one starts when its pace allows (see redialPace).
    const redial = this.#redials.get(target);
    const wait = redial === undefined ? 0 : redial.at - this.#clock.now();
    const attempt = (wait > 0 ? this.#paced(wait).then(start) : start()).then(
      (connection) => {
        this.#attempts--;
        // Stryker disable next-line ConditionalExpression: deleting a key the map lacks changes nothing; the check only spares the lookup
        if (redial !== undefined) this.#redials.delete(target);
        const conn = new PooledConnection(++this.#nextId, target, connection, this.#clock.now());
        this.#live.set(conn, undefined);
        this.#counts.opened++;
        this.#events.emit('opened', { target, id: conn.id });
        // Publish and clear the attempt in one step: no window with neither. (An attempt is only
        // started when the slot has none, so the slot's attempt is this one.)
        slot.attempt = undefined;
        // Stryker disable next-line ConditionalExpression,LogicalOperator: the `#closed` half is implied by the slot check (close() deletes every slot at once), so its mutants change nothing; the branch itself is tested (close() from an 'opened' listener, test/pool/close-bounded).
        if (this.#closed !== undefined || this.#slots.get(target) !== slot) {
          this.#retire(conn, 'closing');
          return conn;
        }
        slot.current = conn;
        let unwatch: void | (() => void);
        try {
          unwatch = this.#connector.watch?.(
            connection,
            { gone: (cause) => this.#gone(conn, cause), retire: (reason) => this.#retireWatched(conn, reason) },
            target,
          );
        } catch (err) {
          // A connection whose fate the pool cannot learn is not kept: closed, and its waiters
          // get the watcher's error.
          this.#gone(conn, err);
          throw err;
        }
        // Stryker disable next-line ConditionalExpression: a non-function result would be kept or called through unwatchSafely, which contains its throw: the same outcome.
        if (typeof unwatch === 'function') {
          // A watcher may report the connection retired or gone before it even returns.
          if (conn.closing === undefined) this.#live.set(conn, unwatch);
          else unwatchSafely(this.#connector, unwatch);
        }
        return conn;
      },
      (err: unknown) => {
        this.#attempts--;
        slot.attempt = undefined;
        // A dial the host failed (refused, reset, silent) paces the next. Not a breaker's refusal
        // (it dialled nothing), nor an answer the client itself rejects (a TLS version, ALPN or
        // certificate mismatch, a name the server does not know: the host is up, and every call
        // fails the same way at once, as a plain client's does; paced, Http2Client took up to
        // 250 ms a call to fail where node:http2 failed in ms; an outside review), nor a close().
        // Stryker disable next-line ConditionalExpression,EqualityOperator: with redialPace 0 a record's wait is 0 (no pacing); the check only keeps the map empty
        const outcome = dialFailureOutcome(err);
        // A failure that left the host refused (it opened it, or it was the probe): the breaker
        // paces now, and a caller meanwhile is refused at once by it. Paced too, each caller of a
        // host long dead waited up to 250 ms a window for the next probe's failure (an outside
        // review: 504 of ~1 300 calls held ~250 ms where every other adapter refused in ms).
        if (leftHostRefusing(err)) this.#redials.delete(target);
        else if (this.#redialPace > 0 && !(err instanceof PoolClosedError) && outcome === 'failed') this.#failedAttempt(target);
        // No request went on it: an error no rule knows is a failed dial to its callers (see
        // failedEstablishing), not an unknown failure that may have been sent. Not this process's
        // own failure (a connector bug, a local limit): that is no dial of the host's.
        if (outcome !== 'abandoned') failedEstablishing(err);
        // The slot holds no connection (an attempt is only started for a slot without one, and
        // sets one only on success), so it goes, if it is still the target's.
        // Stryker disable next-line ConditionalExpression: only close() removes a slot whose attempt is in flight, and no new slot is made after it; the identity check guards that invariant.
        if (this.#slots.get(target) === slot) this.#slots.delete(target);
        throw err;
      },
    );
    slot.attempt = attempt;
    this.#track(attempt); // settles even when every waiter has left
    return attempt;
  }

  /** Records a failed connect attempt to `target`: the next waits 10 ms, doubling per failure in a row up to `redialPace`. */
  #failedAttempt(target: string): void {
    const at = this.#clock.now();
    let redial = this.#redials.get(target);
    if (redial === undefined) {
      if (this.#redials.size >= REDIAL_TARGETS) this.#redials.delete(this.#redials.keys().next().value!);
      redial = { fails: 0, at };
      this.#redials.set(target, redial);
    } else if (at - redial.at > this.#redialPace) {
      redial.fails = 0; // no failure for longer than the pace: a new outage starts at the first wait
    }
    redial.fails++;
    redial.at = at + Math.min(this.#redialPace, FIRST_REDIAL_WAIT * 2 ** Math.min(redial.fails - 1, 30));
  }

  /** Resolves after `wait` ms on the pool's clock; rejects with the close's reason if the pool closes first. */
  #paced(wait: number): Promise<void> {
    const closing = this.#closingSignal.signal;
    return new Promise<void>((resolve, reject) => {
      // Stryker disable next-line ConditionalExpression: defence in depth; no attempt starts after close() (#acquireSlow checks first)
      if (closing.aborted) return reject(closing.reason);
      const onClose = (): void => {
        this.#clock.clearTimeout(timer);
        reject(closing.reason);
      };
      const timer = this.#clock.setTimeout(() => {
        // Stryker disable next-line StringLiteral: left on, the listener only holds memory until close(), where it clears a fired timer and rejects a settled promise: nothing a test can see
        closing.removeEventListener('abort', onClose);
        resolve();
      }, wait);
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: a signal aborts once; `once` only drops the listener sooner
      closing.addEventListener('abort', onClose, { once: true });
    });
  }

  /** Makes close() wait for `work` to settle; never lets its rejection go unhandled. */
  #track(work: Promise<unknown>): void {
    const settled = work.then(noop, noop);
    this.#inFlight.add(settled);
    void settled.then(() => this.#inFlight.delete(settled));
  }

  /**
   * Runs `fn` on `conn`. The call is settled by {@link ConnectionPool.#land} when `fn`'s promise
   * settles (`ends`: when the work calls `trip.end`), or earlier, with the reason, if the
   * connection dies or the caller aborts.
   */
  #embark(
    conn: PooledConnection<C>,
    fn: (lease: Lease<C>) => unknown,
    ends: boolean,
    signal: AbortSignal | undefined,
    resends: number,
    resent: number,
    turn: number,
    stale: number,
    resolve: (value: unknown) => void,
    reject: (reason: unknown, resent?: number, sentBefore?: boolean) => void,
  ): void {
    // When dials are traced, a ride keeps its caller's context: a call that goes back learns so
    // from the connection's events, in the context of the call that opened it, and its redial
    // started there was traced into that other call's trace (an outside review).
    const inCaller = callerContext();
    const trip = new Trip(conn, turn, signal, fn, ends, resends, resent, stale, this.#land, resolve, reject, inCaller);
    // First: a signal that cannot be listened to rejects the call before it boards.
    if (signal !== undefined) onCallerAbort(signal, trip);
    conn.addRide(trip);
    this.#leases++;
    let work: Promise<unknown>;
    try {
      const started = fn(trip);
      if (ends) return;
      work = Promise.resolve(started);
    } catch (err) {
      this.#land(trip, false, err);
      return;
    }
    // Whichever comes first wins (#land runs once); a request released early settles later, unheard.
    work.then(
      (value) => trip.land(trip, true, value),
      (error: unknown) => trip.land(trip, false, error),
    );
  }

  /**
   * The end of a ride, once (the first of `fn` settling and its release): takes it off its
   * connection, then settles the call, or sends it back for a fresh connection when its failure
   * provably carries no answer from the server and a sibling retired the connection under it.
   */
  readonly #land = (trip: Trip<C>, ok: boolean, value: unknown): void => {
    if (trip.landed) return;
    trip.landed = true;
    const { conn, caller } = trip;
    if (caller !== undefined) caller.removeEventListener('abort', trip);
    conn.removeRide(trip);
    this.#leases--;
    if (conn.leases === 0) {
      // Idle from now. Read only here: a connection something rides is never idle, so a busy
      // connection's rides cost no clock read at their end (about 0.07 µs each: performance.now).
      conn.lastUsed = this.#clock.now();
      if (!conn.usable) this.#closeConnection(conn);
    }
    if (this.#leases === 0) this.#onDrained?.();
    if (ok) {
      conn.proven = true;
      trip.resolve(value);
      return;
    }
    const err = value;
    // The caller's own abort says nothing about the connection, whatever `classify` thinks.
    // Stryker disable next-line ConditionalExpression: an abort releases the ride at once, with the reason, so a failure landing after it is always that reason; the comparison keeps the rule explicit.
    if (caller?.aborted === true && err === caller.reason) return trip.reject(err, trip.resent);
    // Released by close(): a shutdown stops the call at once (PoolClosedError is 'cancelled',
    // so no retry loop spends budget or a backoff on it).
    if (err instanceof ConnectionGoneError && err.connectionId === conn.id && err.cause instanceof PoolClosedError) return trip.reject(err.cause, trip.resent);
    // Was it already retired or gone before this failure reached us? Then a sibling (or the
    // transport watcher) got there first, and this failure is most likely theirs.
    const retiredUnderUs = !conn.usable;
    const releasedBySibling = err instanceof ConnectionGoneError && err.connectionId === conn.id;
    let notSent = false;
    let transportDied = releasedBySibling;
    if (!releasedBySibling) {
      const c = classifySafely(this.#classify, err);
      notSent = c.notSent;
      // Found dead already, its rides' release deferred (see #gone): a failure of its own now is
      // that death's, whatever it says.
      transportDied = c.connectionDead || conn.goneReason !== undefined;
      if (conn.goneReason !== undefined && !notSent) conn.cutAfterGone++;
      if (c.connectionDead && this.#connector.oneTransport?.(conn.target) !== false) this.#gone(conn, err);
    }
    // Going back resends. Only a failure that provably carries no answer from the server may go
    // back: certainly not sent (any request), or the transport died under it (idempotent only),
    // and then only a connection that had worked: one that dies under its first requests may have
    // died of them (a server that drops every connection a request reaches), and sending them
    // again at once, with no backoff and no budget, is a storm: a retry layer above decides
    // (Go's transport keeps the same rule: a request cut on a fresh connection is not retried).
    // A status, a reset, a timeout or anything unrecognised is final, and so is any failure of a
    // call whose answer has begun (committed).
    // A request that may have been sent goes again only within its own count of resends (the
    // caller's attempts: with `retry: false` or `maxAttempts: 1` never; was bounded only by
    // retiredRetries, and a handler ran twice with retries off; an outside review).
    const safe = !trip.committed && (notSent || (trip.resends > 0 && transportDied && conn.proven));
    if (!(retiredUnderUs && safe && trip.turn <= this.#retiredRetries) || this.#closed !== undefined) return trip.reject(err, trip.resent);
    // A request that may have been sent goes again only if the caller's budget allows a resend.
    if (!notSent && this.#mayResend !== undefined && !askSafely(this.#mayResend)) return trip.reject(err, trip.resent);
    this.#counts.turns++;
    if (this.#events.active('resent')) {
      const { kind, code } = defaultClassify(err); // never throws
      this.#events.emit('resent', { target: conn.target, id: conn.id, notSent, kind, code });
    }
    const again = notSent ? 0 : 1;
    const goBack = (): void => void this.#useSlow(conn.target, trip.fn, trip.ends, caller, trip.resends - again, trip.resent, again, trip.turn + 1, trip.stale, trip.resolve, trip.reject);
    if (trip.inCaller === undefined) goBack();
    else trip.inCaller(goBack);
  };

  /**
   * A watcher retires `conn`: with a reason the pool knows (else a GOAWAY, the reason a transport
   * gives), and not once it reported it gone (evicted and closed then: 'retired' after 'gone'
   * told a listener a dead connection was draining; an outside review).
   */
  #retireWatched(conn: PooledConnection<C>, reason: unknown): void {
    if (conn.goneReason === undefined) this.#retire(conn, retireReason(reason));
  }

  /** No new requests on `conn`; closed once its last request ends. */
  #retire(conn: PooledConnection<C>, reason: RetireReason): void {
    // Evicted before anyone hears: a 'retired' listener that calls use() gets a fresh connection.
    this.#evict(conn);
    if (conn.retire(reason)) this.#events.emit('retired', { target: conn.target, id: conn.id, reason });
    if (conn.leases === 0) this.#closeConnection(conn);
  }

  /**
   * `conn`'s transport is dead: evict it, release everything riding it, close it now. Evicted
   * first: a ride's settler (ride() calls them synchronously) or a 'gone' listener that starts a
   * call at once must find no connection, never board the dead one.
   */
  #gone(conn: PooledConnection<C>, cause: unknown): void {
    // Closed by the pool itself (idle, retired, shutting down: nothing rides it): its transport
    // ending now is that close, not a death (a connector whose 'close' event calls watch.gone).
    // Stryker disable next-line ConditionalExpression: a connection is closing with rides still on it only once #gone or close() marked it gone and released them, so going on finds it gone already and does nothing more
    if (conn.closing !== undefined && conn.leases === 0) return;
    this.#evict(conn);
    // Retired first (the peer's GOAWAY), with rides left: each ride's own failure says what the
    // peer did with it (a stream the GOAWAY excluded was never processed, and may go again
    // whatever its method). Those failures arrive in this same turn: the connection is gone now,
    // but its rides are released on the next turn, so that theirs land first.
    // Stryker disable next-line ConditionalExpression,EqualityOperator: already gone, markGone reports no first death, so `later` decides nothing; retired with no ride, it was closed at its retirement and returned above
    const later = conn.retired !== undefined && conn.goneReason === undefined && conn.leases > 0;
    const leases = conn.leases;
    // The rides are released after 'gone' is heard: their resends come after the death that
    // caused them (a listener keyed on connection ids heard `resent` first; an outside review).
    const first = conn.markGone(cause, false);
    if (first && later) {
      setImmediate(() => {
        // The death cut the rides still riding, and those whose own failure came first with
        // anything but "not sent". When there are none (every stream in flight was one the
        // GOAWAY excluded: a graceful drain, the peer closing its end as it said it would) that
        // is a retirement, not a death: no 'gone', nothing counted (every nginx reload was
        // logged as a dead connection).
        const cut = conn.leases + conn.cutAfterGone;
        if (cut > 0) this.#reportGone(conn, cut);
        conn.releaseRides();
        this.#closeConnection(conn);
      });
      return;
    }
    if (first) {
      this.#reportGone(conn, leases);
      conn.releaseRides();
    }
    this.#closeConnection(conn);
  }

  /** Counts `conn` gone and tells the listeners, with the rides it released. */
  #reportGone(conn: PooledConnection<C>, leases: number): void {
    this.#counts.gone++;
    this.#events.emit('gone', { target: conn.target, id: conn.id, leases });
  }

  /** Removes `conn` from its slot, only if the slot still holds this very connection. */
  #evict(conn: PooledConnection<C>): void {
    const slot = this.#slots.get(conn.target);
    if (slot?.current !== conn) return;
    slot.current = undefined;
    // A slot never has an attempt while it holds a connection (an attempt starts only for a slot
    // without one, and sets one as it ends), so the slot goes with its connection.
    this.#slots.delete(conn.target);
  }

  #closeConnection(conn: PooledConnection<C>): void {
    if (conn.closing !== undefined) return;
    // Set before the connector runs: a close that reports the connection gone from inside itself
    // (its own 'close' event reaching watch.gone) must find it closing already, not close it again.
    conn.closing = CLOSING;
    const unwatch = this.#live.get(conn);
    // Stryker disable next-line ConditionalExpression: unwatchSafely contains the TypeError of calling undefined; the check only spares a throw.
    if (unwatch !== undefined) unwatchSafely(this.#connector, unwatch);
    const closing = closeSafely(this.#connector, conn.connection, conn.goneReason ?? conn.retired).then(() => {
      this.#live.delete(conn);
      this.#closes.delete(closing);
      this.#counts.closed++;
      this.#events.emit('closed', { target: conn.target, id: conn.id });
    });
    conn.closing = closing;
    this.#closes.add(closing);
  }
}

const RETIRE_REASONS: ReadonlySet<unknown> = new Set<RetireReason>(['goaway', 'idle', 'closing', 'refusing']);

/** A watcher's retirement reason: one the pool knows, else a GOAWAY (the reason a transport gives). */
function retireReason(reason: unknown): RetireReason {
  return RETIRE_REASONS.has(reason) ? (reason as RetireReason) : 'goaway';
}

/** What a connection's `closing` holds while the connector's close is being called. */
const CLOSING: Promise<void> = Promise.resolve();

/** `promise`, or the caller's `signal.reason` as soon as it aborts (the promise carries on). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    onCallerAbort(signal, onAbort);
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
