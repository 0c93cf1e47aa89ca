/**
 * A set of interchangeable servers (seed 004's client and its Nomad servers; Finagle's and
 * Envoy's load balancing), each gated by a {@link HostBreaker}.
 *
 * - `pick()` prefers the front of the list and returns a server whose breaker would admit it now,
 *   so an open host is never picked while a healthy one exists. The choice reads the breaker
 *   without side effects: the dial that follows asks the breaker itself.
 * - `failed(server)` moves a server to the back (seed 004's NotifyFailedServer): the next call
 *   goes elsewhere, and the list stays ordered from least to most recently failed.
 * - When every server is refused, `pick()` fails fast with {@link NoServerAvailableError}
 *   (`retryAfter`: when the earliest may be tried), or, with `panic: true`, returns the least
 *   recently failed anyway (Envoy's and Finagle's panic mode: better a likely failure than none).
 * - `run(fn, options)` is {@link retry} across the set: each attempt goes to the next server, and a
 *   server refused by a breaker is skipped within the attempt instead of spending it.
 *
 * @module
 */
import { fullJitter } from '../core/backoff.js';
import { type Classification, type FailureKind, classify, leftHostRefusing } from '../core/classify.js';
import type { Clock } from '../core/clock.js';
import { DeadlineExceededError, HostUnavailableError, NoServerAvailableError, findError } from '../core/errors.js';
import { checkFunction, opt, show } from '../core/validate.js';
import { dialFailureOutcome } from '../guard/dial-outcome.js';
import { type DialPermit, HostBreaker } from '../guard/host-breaker.js';
import { hostKey } from '../guard/host-key.js';
import { type RetryAttempt, type RetryOptions, retryWith } from './retry.js';

/**
 * {@link ServerSet.run}'s default backoff: full jitter from 100 ms, doubling to 10 s. A retry goes
 * to the next server, so the short wait of a failover, not one spanning the failed server's restart.
 */
export const FAILOVER_BACKOFF = fullJitter({ base: 100, max: 10_000 });

/** Options of a {@link ServerSet}; every one has a default. */
export interface ServerSetOptions<S> {
  /**
   * The breaker key of a server (anything `hostKey` accepts). Default: the server itself when it
   * is a string (`host:port`), `host` and `port` when it has them; otherwise this is required.
   */
  key?: (server: S) => string;
  /**
   * The breaker that gates the servers. Default: a private `HostBreaker` with default options on
   * this set's clock. Pass the one your dial layer uses (e.g. `sharedBreaker()`) so the set sees
   * what every dial learned.
   */
  breaker?: HostBreaker;
  /**
   * Whether `run` reports each attempt's dial outcome to the breaker itself. Default: true for the
   * private breaker (nobody else feeds it), false for a breaker you pass (your dial layer reports
   * to it; admitting twice would let the set hold the half-open probe slot the dial needs).
   */
  recordOutcomes?: boolean;
  /**
   * When every server is refused, try the least recently failed anyway. Default false: fail fast,
   * as a refusal means the breaker expects that dial to fail.
   */
  panic?: boolean;
  /** Time source for the private breaker. Default the breaker's (system clock). */
  clock?: Clock;
}

/** What `run`'s `fn` gets on each attempt: the retry attempt, plus the server chosen for it. */
export interface ServerAttempt<S> extends RetryAttempt {
  readonly server: S;
  /**
   * True when every breaker refused and this server was picked anyway (panic mode). A dial layer
   * with its own breaker will refuse it too unless told to dial without one (`breaker: null`).
   */
  readonly panic: boolean;
}

interface Entry<S> {
  readonly server: S;
  readonly key: string;
  /** Sequence number of the last failure; 0 for never. */
  failedAt: number;
}

/** Kinds after which the server is moved to the back: it, or the way to it, misbehaved. */
const ROTATE: ReadonlySet<FailureKind> = new Set(['dial', 'connection', 'timeout', 'stream']);

function defaultKey(server: unknown): string {
  if (typeof server === 'string') return server;
  if (typeof server === 'object' && server !== null) {
    const { host, port } = server as { host?: unknown; port?: unknown };
    if (typeof host === 'string' && (typeof port === 'number' || typeof port === 'string')) return hostKey(host, port);
  }
  throw new TypeError(`ServerSet: cannot derive a breaker key from ${show(server)}; pass options.key`);
}

/** `key(server)` as a breaker key; a bad one is reported as the `key` option's fault. */
function keyOf<S>(key: (server: S) => string, server: S): string {
  const k = key(server);
  if (typeof k !== 'string') throw new TypeError(`key(server) must return a host string, got ${show(k)} for ${show(server)}`);
  try {
    return hostKey(k);
  } catch (err) {
    throw new TypeError(`key(server) returned ${show(k)}, which is not a host: ${(err as Error).message}`);
  }
}

/** A list of interchangeable servers, each gated by a breaker. See the module docs. */
export class ServerSet<S> {
  readonly #order: Array<Entry<S>> = [];
  readonly #breaker: HostBreaker;
  readonly #record: boolean;
  readonly #panic: boolean;
  #sequence = 0;

  /** @throws TypeError for an invalid option, an underivable or malformed key, or a duplicate server. */
  constructor(servers: Iterable<S>, options: ServerSetOptions<S> = {}) {
    // A string is iterable: `new ServerSet('redis')` tried the servers 'r', 'e', 'd', 'i', 's'.
    if (typeof servers === 'string' || servers === null || typeof (servers as Partial<Iterable<S>> | undefined)?.[Symbol.iterator] !== 'function') {
      throw new TypeError(`servers must be an iterable of servers (an array), got ${show(servers)}`);
    }
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    const key = checkFunction<(server: S) => string>('key', opt<(server: S) => string>(options.key, defaultKey));
    if (options.breaker !== undefined && !(options.breaker instanceof HostBreaker)) {
      throw new TypeError(`breaker must be a HostBreaker, got ${show(options.breaker)}`);
    }
    const own = options.breaker === undefined;
    // The private breaker has a fixed open window (the default), so it needs no random source.
    this.#breaker = options.breaker ?? new HostBreaker(options.clock === undefined ? {} : { clock: options.clock });
    this.#record = opt(options.recordOutcomes, own);
    this.#panic = opt(options.panic, false);
    for (const [name, value] of [['recordOutcomes', this.#record], ['panic', this.#panic]] as const) {
      if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${show(value)}`);
    }
    const seen = new Set<string>();
    for (const server of servers) {
      const k = keyOf(key, server);
      if (seen.has(k)) throw new TypeError(`ServerSet: ${k} is listed twice`);
      seen.add(k);
      this.#order.push({ server, key: k, failedAt: 0 });
    }
  }

  /** How many servers the set holds. */
  get size(): number {
    return this.#order.length;
  }

  /** The breaker gating the servers. */
  get breaker(): HostBreaker {
    return this.#breaker;
  }

  /** The servers, in the order `pick` prefers them (least recently failed first). */
  servers(): S[] {
    return this.#order.map((e) => e.server);
  }

  /**
   * The first server whose breaker would admit a dial now. Reads the breaker only.
   *
   * @throws NoServerAvailableError when every server is refused (unless `panic`).
   */
  pick(): S {
    return this.#choose(new Map()).entry.server;
  }

  /**
   * Records that `server` failed: it moves to the back of the list. Returns false if the set does
   * not hold it.
   */
  failed(server: S): boolean {
    const i = this.#order.findIndex((e) => e.server === server);
    if (i < 0) return false;
    const [entry] = this.#order.splice(i, 1);
    entry!.failedAt = ++this.#sequence;
    this.#order.push(entry!);
    return true;
  }

  /**
   * Runs `fn` with {@link retry} across the set: each attempt on the server `pick` chooses (a
   * failed one has moved to the back, so a retry goes to the next; so has one whose attempt was
   * still out when the call's deadline ended it, settled or not). A server refused by a breaker
   * (here, or by the dial layer inside `fn`), or whose dial inside `fn` failed, sending nothing,
   * and left it refused, is skipped without spending the attempt (one refused inside `fn` also
   * moves to the back, as a failed one does: this set's breaker does not know what the client's
   * knows); when every server is refused
   * the call fails with {@link NoServerAvailableError}, which ends the loop. A client inside `fn`
   * that retries itself (GuardedAgent, Http2Client, GrpcGuard) tries each server that many
   * times before the set moves on: give it `maxAttempts: 1` (retry at one layer).
   * Its default `backoff` is {@link FAILOVER_BACKOFF}, not retry()'s restart-spanning one: a retry
   * goes to another server, which need not wait for the failed one to come back. With more
   * than one server, a retry after an attempt that was never sent spends no retry budget: no
   * server got the call, and the next attempt goes to another.
   */
  run<T>(fn: (server: S, attempt: ServerAttempt<S>) => T | PromiseLike<T>, options: RetryOptions = {}): Promise<T> {
    try {
      checkFunction('fn', fn);
    } catch (err) {
      return Promise.reject(err); // like retry(): a bad argument rejects, never throws
    }
    // The server whose attempt is in flight: one that outlives the call's deadline (a hung
    // server, a client that does not heed the signal) never settles here, and stayed first, so
    // every later call went to it and failed while the others idled (an outside review: 0 of 80
    // calls served). (One that heeds the signal may move twice; it is the last to fail either way.)
    let inFlight: Entry<S> | undefined;
    return retryWith(async (attempt) => {
      // retry() has checked the options by the time an attempt runs.
      const classifyOptions = options.signal === undefined ? options.classify : { ...options.classify, signal: options.signal };
      const refused = new Map<string, Skipped>();
      for (;;) {
        const { entry, panic } = this.#choose(refused);
        let permit: DialPermit | undefined;
        if (this.#record && !panic) {
          try {
            permit = this.#breaker.admit(entry.key);
          } catch (err) {
            if (!(err instanceof HostUnavailableError)) throw err;
            refused.set(entry.key, { retryAfter: err.retryAfter, cause: err }); // lost a race for the probe slot: try the next server
            continue;
          }
        }
        let value: T;
        inFlight = entry;
        try {
          value = await fn(entry.server, new OnServer(attempt, entry.server, panic));
        } catch (err) {
          const c = classify(err, classifyOptions);
          if (permit !== undefined) settle(permit, c, err);
          // The refusal may arrive wrapped (fetch: TypeError('fetch failed', { cause })). Not one
          // that ends a call sent to this server before (its client's retries refused): another
          // server would run it a second time.
          const refusal = c.kind === 'refused' && c.notSent ? findError(err, HostUnavailableError) : undefined;
          // A dial that failed, sending nothing, and left its server refused (its failure opened
          // the client's breaker): that server is refused now, and is skipped as one. Was the end
          // of the call (retry()'s rule for a host left refusing, which assumes the next attempt
          // goes to the same host): a first call through a ServerSet whose first server had just
          // died failed in 6 of 12 runs, the healthy second server never tried (plain undici in
          // the same set: 12 of 12 served; an outside review, r143).
          const leftRefusing = refusal === undefined && c.kind === 'dial' && c.notSent && leftHostRefusing(err);
          if (refusal !== undefined || leftRefusing) {
            // To the back, as a failed server goes: the client's own breaker refuses it, which
            // this set's breaker does not know, and it stayed first, each call asking it first
            // (an outside review, r145: a ServerSet over Http2Client, 17 of 20 calls).
            this.failed(entry.server);
            refused.set(entry.key, refusal === undefined ? { retryAfter: this.#breaker.state(entry.key)?.retryAfter ?? 0, cause: err } : { retryAfter: refusal.retryAfter, cause: refusal });
            // The call may have ended (the caller's abort, its deadline) while this server was
            // tried: retry() has answered the caller already, and nothing more may be sent.
            // (Read here only: the attempt's signal is made on first read.)
            if (attempt.signal.aborted) throw attempt.signal.reason;
            continue;
          }
          if (ROTATE.has(c.kind)) this.failed(entry.server);
          throw err;
        } finally {
          inFlight = undefined;
        }
        permit?.succeeded();
        return value;
      }
    }, options, FAILOVER_BACKOFF, this.#order.length > 1).catch((err: unknown) => {
      // The deadline ended the call with an attempt still out: its server took all that was left.
      if (err instanceof DeadlineExceededError && inFlight !== undefined) this.failed(inFlight.server);
      throw err;
    });
  }

  /** The server to use, skipping `refused` ones; panic or NoServerAvailableError when none is admitted. */
  #choose(refused: ReadonlyMap<string, Skipped>): { entry: Entry<S>; panic: boolean } {
    let retryAfter = Number.POSITIVE_INFINITY;
    let lastRefusal: unknown;
    for (const entry of this.#order) {
      const skipped = refused.get(entry.key);
      if (skipped !== undefined) {
        retryAfter = Math.min(retryAfter, skipped.retryAfter);
        lastRefusal = skipped.cause;
        continue;
      }
      const snap = this.#breaker.state(entry.key);
      if (snap === undefined || snap.state === 'closed' || (snap.state === 'half-open' && !snap.probing)) return { entry, panic: false };
      retryAfter = Math.min(retryAfter, snap.retryAfter);
    }
    if (this.#panic) {
      let best: Entry<S> | undefined;
      for (const entry of this.#order) {
        if (!refused.has(entry.key) && (best === undefined || entry.failedAt < best.failedAt)) best = entry;
      }
      if (best !== undefined) return { entry: best, panic: true };
    }
    throw new NoServerAvailableError(this.#order.length, Number.isFinite(retryAfter) ? retryAfter : 0, lastRefusal === undefined ? undefined : { cause: lastRefusal });
  }
}

/** A server skipped within one attempt: refused by a breaker (the refusal), or left refusing by its failed dial (that failure). */
interface Skipped {
  /** When it may be admitted again, ms (0: unknown). */
  readonly retryAfter: number;
  /** The refusal or the dial failure: the cause of a NoServerAvailableError when every server is skipped. */
  readonly cause: unknown;
}

/** Reports an attempt to the breaker: only a dial failure counts against a host (rule 1). */
function settle(permit: DialPermit, c: Classification, err: unknown): void {
  if (c.kind === 'dial') {
    // Only the host's failures count: a certificate or alert it sent proves it alive (rule 1).
    const outcome = dialFailureOutcome(err);
    if (outcome === 'failed') permit.failed(err);
    else if (outcome === 'succeeded') permit.succeeded();
    else permit.abandoned();
  } else if (c.kind === 'application' || c.kind === 'stream') permit.succeeded(); // it answered: alive
  else permit.abandoned(); // says nothing about the dial
}

/**
 * The attempt `fn` is given. Its `signal` and `remaining` are read through: retry() makes an
 * attempt's signal on first read (an AbortController costs microseconds), and copying it made one
 * for every call (~6 µs of CPU a call; an outside review measured ServerSet.run at 17-20 µs where
 * retry() took 3). A class, not an object literal with getters, which V8 builds slowly.
 */
class OnServer<S> implements ServerAttempt<S> {
  readonly #attempt: RetryAttempt;
  readonly number: number;
  readonly deadline: number;
  constructor(
    attempt: RetryAttempt,
    readonly server: S,
    readonly panic: boolean,
  ) {
    this.#attempt = attempt;
    this.number = attempt.number;
    this.deadline = attempt.deadline;
  }
  get signal(): AbortSignal {
    return this.#attempt.signal;
  }
  get remaining(): number {
    return this.#attempt.remaining;
  }
}

