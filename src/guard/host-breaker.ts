/**
 * A per-host circuit breaker fed only by dial outcomes.
 *
 * ```
 * closed    --failureThreshold consecutive failed dials--> open
 * open      --open window elapsed, next admit-------------> half-open (that admit is the probe)
 * half-open --probe succeeded-----------------------------> closed   (count reset)
 * half-open --probe failed--------------------------------> open     (next window)
 * half-open --probe unreported past probeTimeout----------> half-open (a new probe may run)
 * ```
 *
 * Only dials are recorded: a response of any kind proves the host alive, so the breaker cannot
 * black-hole a healthy host on application grounds. A caller giving up is `abandoned`, never a
 * failure. Every permit remembers the generation it was admitted in; a transition starts a new
 * generation, and a permit from an older one settles without moving the state. That is what keeps
 * a dial admitted before the trip, finishing late, from extending the block or freeing the probe
 * slot (seed 002's review).
 *
 * Decisions are a pure function of `clock.now()`: the breaker starts no timers.
 *
 * @module
 */
import { type Schedule, drawDelay } from '../core/backoff.js';
import { type Clock, systemClock } from '../core/clock.js';
import { HostUnavailableError } from '../core/errors.js';
import { EventHub, type Unsubscribe, type Listener } from '../core/events.js';
import { checkDuration, checkFunction, checkInteger, opt } from '../core/validate.js';
import { hostKey } from './host-key.js';

/** Where a host stands. `half-open` means its window is over and a probe may run or is running. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Options of a {@link HostBreaker}; every one has a default. */
export interface HostBreakerOptions {
  /**
   * Consecutive failed dials that open a host. Default 3: trips within three connect timeouts
   * against a dead host, rides out a single blip (seed 000). `0` disables the breaker: every admit
   * is granted and nothing is recorded (seed 002's opt-in mode).
   */
  failureThreshold?: number;
  /**
   * How long an opened host is refused before one probe may run: milliseconds, or a
   * {@link Schedule} called with the number of consecutive opens (1 for the first trip), e.g.
   * `proportionalJitter({ base: 1_000, max: 60_000 })` as in seed 002. Default 30 000: a dead host
   * costs one dial per 30 s, and a host that recovers right after tripping waits at most 30 s
   * (short, because addresses get reused by healthy hosts; seed 000). A schedule's answer goes
   * through `safeDelay` (NaN or negative: 0; past 2^31-1 ms or Infinity: 2^31-1), and one that
   * throws is a warning and reuses its last window, so no schedule makes a host unblockable.
   */
  openDuration?: number | Schedule;
  /**
   * How long a granted probe may go unreported before another may run. Default 10 000:
   * comfortably longer than a connect timeout, so a live probe is not doubled, yet a probe whose
   * report is lost cannot wedge the host (seed 000). Keep it above your connect timeout.
   */
  probeTimeout?: number;
  /**
   * A host nobody has admitted for this long is forgotten. Default 300 000 (5 min, seed 000):
   * long past any open window, so forgetting loses nothing but memory.
   */
  idleRetention?: number;
  /**
   * Most hosts tracked at once; the least recently used goes first. Default 4096 (seed 000): a
   * hard bound on memory however many distinct hosts are named.
   */
  capacity?: number;
  /**
   * The idle sweep runs at most once per this many ms, on an admit. Default 60 000: forgetting
   * is not urgent, and the sweep never becomes per-call work.
   */
  sweepInterval?: number;
  /** Time source. Default {@link systemClock}. */
  clock?: Clock;
  /** Uniform [0, 1) source for jittered schedules. Default `Math.random`. */
  random?: () => number;
}

/** Payloads of the breaker's events (also published on `dialguard:breaker:<event>`). */
export interface HostBreakerEvents {
  /** The host was closed (or half-open) and is now refused. */
  opened: { host: string; failures: number; openFor: number; reopened: boolean };
  /** A probe succeeded; the host is dialled again. */
  closed: { host: string; openedFor: number };
  /** The window ended and this admit is the probe. */
  'probe-granted': { host: string };
  /** A probe went unreported past `probeTimeout`; a new one is granted. */
  'probe-expired': { host: string; probeTimeout: number };
  /**
   * One admit was refused. Fires per refusal (and costs nothing unless someone listens): for
   * counters only, never for logs, or a dead host becomes a log flood.
   */
  refused: { host: string; state: 'open' | 'half-open' };
}

/** A snapshot of one host, from {@link HostBreaker.state}. */
export interface HostSnapshot {
  host: string;
  state: BreakerState;
  /** Consecutive failed dials counted while closed. */
  failures: number;
  /** Consecutive trips without a close (drives an exponential open window). */
  opens: number;
  /** Whether a probe is out (half-open only). */
  probing: boolean;
  /** Milliseconds until the host may be dialled again; 0 when it may be now. */
  retryAfter: number;
}

/** Counters since the breaker was made. */
export interface HostBreakerStats {
  /** Hosts in the table. */
  hosts: number;
  /** Admits refused without dialling. */
  refused: number;
  opened: number;
  closed: number;
  probesGranted: number;
  probesExpired: number;
  /** Settlements by outcome. `stale` ones came from an older generation and moved nothing. */
  succeeded: number;
  failed: number;
  abandoned: number;
  stale: number;
  /** Hosts forgotten for being idle, and for making room at capacity. */
  evictedIdle: number;
  evictedCapacity: number;
}

/**
 * Leave to dial a host, from {@link HostBreaker.admit}. Settle it exactly once with the dial's
 * outcome; the first settlement wins and later ones are ignored.
 */
export interface DialPermit {
  /** The breaker's key for the host. */
  readonly host: string;
  /** True when this dial is the half-open probe whose outcome decides the host. */
  readonly probe: boolean;
  /** Whether the permit has been settled. */
  readonly settled: boolean;
  /** The dial (and its handshakes) completed: the host is alive. */
  succeeded(): void;
  /** The dial failed or timed out. */
  failed(): void;
  /** The caller gave up before the dial finished. Never counts against the host. */
  abandoned(): void;
}

interface Entry {
  readonly key: string;
  state: 'closed' | 'open';
  failures: number;
  opens: number;
  /** The last open window drawn, for schedules that depend on it (decorrelated jitter). */
  lastOpenFor: number;
  generation: number;
  /** open: when a probe may run. */
  openUntil: number;
  openedAt: number;
  /** open, after openUntil: whether a probe is out, and when it expires. */
  probing: boolean;
  probeUntil: number;
  lastUsed: number;
  /** The refusal thrown to every caller in the current generation (one window), made once. */
  refusal: HostUnavailableError | undefined;
  refusalGeneration: number;
}

type Outcome = 'succeeded' | 'failed' | 'abandoned';

class Permit implements DialPermit {
  #breaker: HostBreaker | undefined;
  readonly #entry: Entry | undefined;
  readonly #generation: number;
  readonly host: string;
  readonly probe: boolean;

  constructor(breaker: HostBreaker | undefined, entry: Entry | undefined, host: string, probe: boolean) {
    this.#breaker = breaker;
    this.#entry = entry;
    this.#generation = entry?.generation ?? 0;
    this.host = host;
    this.probe = probe;
  }

  get settled(): boolean {
    return this.#breaker === undefined;
  }

  succeeded(): void {
    this.#settle('succeeded');
  }

  failed(): void {
    this.#settle('failed');
  }

  abandoned(): void {
    this.#settle('abandoned');
  }

  #settle(outcome: Outcome): void {
    const breaker = this.#breaker;
    if (breaker === undefined) return;
    this.#breaker = undefined;
    if (this.#entry !== undefined) settle(breaker, this.#entry, this.#generation, this.probe, outcome);
  }
}

/** Granted by a disabled breaker: records nothing. */
class NoopPermit implements DialPermit {
  readonly probe = false;
  settled = false;
  constructor(readonly host: string) {}
  succeeded(): void {
    this.settled = true;
  }
  failed(): void {
    this.settled = true;
  }
  abandoned(): void {
    this.settled = true;
  }
}

// Module-private access to a breaker's internals for Permit, without making them public API.
let settle: (b: HostBreaker, e: Entry, generation: number, probe: boolean, outcome: Outcome) => void;

/** A per-host circuit breaker fed only by dial outcomes. See the module docs for the states. */
export class HostBreaker {
  readonly #threshold: number;
  readonly #openDuration: Schedule;
  readonly #probeTimeout: number;
  readonly #idleRetention: number;
  readonly #capacity: number;
  readonly #sweepInterval: number;
  readonly #clock: Clock;
  readonly #random: () => number;
  /** Insertion order is recency order: every admit re-inserts its host at the end. */
  readonly #hosts = new Map<string, Entry>();
  /** The entry last (re)inserted into #hosts, i.e. the most recent one while it is still there. */
  #newest: Entry | undefined;
  readonly #events = new EventHub<HostBreakerEvents>('breaker');
  #lastSweep: number;
  readonly #stats: Omit<HostBreakerStats, 'hosts'> = {
    refused: 0,
    opened: 0,
    closed: 0,
    probesGranted: 0,
    probesExpired: 0,
    succeeded: 0,
    failed: 0,
    abandoned: 0,
    stale: 0,
    evictedIdle: 0,
    evictedCapacity: 0,
  };

  static {
    settle = (b, e, generation, probe, outcome) => b.#settle(e, generation, probe, outcome);
  }

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: HostBreakerOptions = {}) {
    this.#threshold = checkInteger('failureThreshold', opt(options.failureThreshold, 3), 0);
    const open = opt<number | Schedule>(options.openDuration, 30_000);
    if (typeof open === 'function') {
      this.#openDuration = open;
    } else {
      const ms = checkDuration('openDuration', open);
      this.#openDuration = () => ms;
    }
    this.#probeTimeout = checkDuration('probeTimeout', opt(options.probeTimeout, 10_000), 1);
    this.#idleRetention = checkDuration('idleRetention', opt(options.idleRetention, 300_000), 1, true);
    this.#capacity = checkInteger('capacity', opt(options.capacity, 4096), 1);
    this.#sweepInterval = checkDuration('sweepInterval', opt(options.sweepInterval, 60_000), 0);
    this.#clock = opt(options.clock, systemClock);
    checkFunction('clock.now', this.#clock.now);
    this.#random = checkFunction('random', opt(options.random, Math.random));
    this.#lastSweep = this.#clock.now();
  }

  /** Whether the breaker records anything (`failureThreshold > 0`). */
  get enabled(): boolean {
    return this.#threshold > 0;
  }

  /**
   * Asks to dial `host`. Returns a permit to settle with the dial's outcome, or throws
   * {@link HostUnavailableError} at once, without I/O, when the host is open or its probe is out.
   *
   * @param host - anything {@link hostKey} accepts; `port` is appended when given.
   */
  admit(host: string, port?: number): DialPermit {
    const answer = this.tryAdmit(host, port);
    if (answer instanceof HostUnavailableError) throw answer;
    return answer;
  }

  /**
   * {@link admit} with the refusal returned instead of thrown: for hot paths, since throwing
   * costs several times more than everything else a refusal does.
   */
  tryAdmit(host: string, port?: number): DialPermit | HostUnavailableError {
    const key = hostKey(host, port);
    if (this.#threshold === 0) return new NoopPermit(key);
    const now = this.#clock.now();
    if (now - this.#lastSweep >= this.#sweepInterval) this.#sweepIdle(now);

    let entry = this.#hosts.get(key);
    if (entry === undefined) {
      if (this.#hosts.size >= this.#capacity) this.#evictOldest();
      entry = {
        key,
        state: 'closed',
        failures: 0,
        opens: 0,
        lastOpenFor: 0,
        generation: 0,
        openUntil: 0,
        openedAt: 0,
        probing: false,
        probeUntil: 0,
        lastUsed: now,
        refusal: undefined,
        refusalGeneration: -1,
      };
      this.#hosts.set(key, entry);
    } else {
      entry.lastUsed = now;
      // Already last in recency order: delete + set would only churn the table (a rehash every
      // few calls, the refusal's main cost when one host is asked again and again).
      if (entry !== this.#newest) {
        this.#hosts.delete(key);
        this.#hosts.set(key, entry);
      }
    }
    this.#newest = entry;

    if (entry.state === 'closed') return new Permit(this, entry, key, false);
    if (now < entry.openUntil) return this.#refuse(entry, entry.openUntil - now, 'open');
    if (entry.probing) {
      if (now < entry.probeUntil) return this.#refuse(entry, entry.probeUntil - now, 'half-open');
      this.#stats.probesExpired++;
      this.#events.emit('probe-expired', { host: key, probeTimeout: this.#probeTimeout });
    }
    entry.generation++; // a late report from an expired probe must not decide the host
    entry.probing = true;
    entry.probeUntil = now + this.#probeTimeout;
    this.#stats.probesGranted++;
    this.#events.emit('probe-granted', { host: key });
    return new Permit(this, entry, key, true);
  }

  /**
   * Where `host` stands now, or `undefined` if the breaker is not tracking it (never seen,
   * forgotten, or the breaker is disabled). Reading does not touch recency.
   */
  state(host: string, port?: number): HostSnapshot | undefined {
    const entry = this.#hosts.get(hostKey(host, port));
    if (entry === undefined) return undefined;
    const now = this.#clock.now();
    let state: BreakerState = entry.state;
    let retryAfter = 0;
    if (entry.state === 'open') {
      if (now < entry.openUntil) {
        retryAfter = entry.openUntil - now;
      } else {
        state = 'half-open';
        if (entry.probing && now < entry.probeUntil) retryAfter = entry.probeUntil - now;
      }
    }
    return {
      host: entry.key,
      state,
      failures: entry.failures,
      opens: entry.opens,
      probing: state === 'half-open' && entry.probing && now < entry.probeUntil,
      retryAfter,
    };
  }

  /** Counters since construction, and the current table size. */
  stats(): HostBreakerStats {
    return { hosts: this.#hosts.size, ...this.#stats };
  }

  /** Listens for a state change; returns the function that stops listening. */
  on<K extends keyof HostBreakerEvents>(event: K, listener: Listener<HostBreakerEvents[K]>): Unsubscribe {
    return this.#events.on(event, listener);
  }

  /** The refusal for `entry`'s current window: made on the first refusal, then reused. */
  #refuse(entry: Entry, retryAfter: number, state: 'open' | 'half-open'): HostUnavailableError {
    this.#stats.refused++;
    if (this.#events.active('refused')) this.#events.emit('refused', { host: entry.key, state });
    if (entry.refusalGeneration !== entry.generation || entry.refusal === undefined) {
      entry.refusal = new HostUnavailableError(entry.key, retryAfter, state, this.#clock);
      entry.refusalGeneration = entry.generation;
    }
    return entry.refusal;
  }

  #settle(entry: Entry, generation: number, probe: boolean, outcome: Outcome): void {
    const current = this.#hosts.get(entry.key) === entry && entry.generation === generation;
    if (outcome === 'abandoned') {
      this.#stats.abandoned++;
      // A probe whose caller left frees its slot: the next admit may probe at once.
      if (current && probe) {
        entry.probing = false;
        entry.generation++;
      }
      return;
    }
    if (!current) {
      this.#stats.stale++;
      return;
    }
    const now = this.#clock.now();
    if (outcome === 'succeeded') {
      this.#stats.succeeded++;
      entry.failures = 0;
      if (entry.state === 'open') {
        // Only the probe can be current while open: older permits were cut off by the trip.
        entry.state = 'closed';
        entry.opens = 0;
        entry.lastOpenFor = 0;
        entry.probing = false;
        entry.generation++;
        this.#stats.closed++;
        this.#events.emit('closed', { host: entry.key, openedFor: now - entry.openedAt });
      }
      return;
    }
    this.#stats.failed++;
    if (entry.state === 'closed') {
      entry.failures++;
      if (entry.failures < this.#threshold) return;
      this.#open(entry, now, false);
    } else {
      this.#open(entry, now, true);
    }
  }

  #open(entry: Entry, now: number, reopened: boolean): void {
    entry.opens++;
    const openFor = drawDelay(this.#openDuration, entry.opens, entry.lastOpenFor, this.#random); // never NaN, endless or thrown
    entry.lastOpenFor = openFor;
    entry.state = 'open';
    if (!reopened) entry.openedAt = now;
    entry.openUntil = now + openFor;
    entry.probing = false;
    entry.generation++;
    this.#stats.opened++;
    this.#events.emit('opened', { host: entry.key, failures: entry.failures, openFor, reopened });
  }

  /** Forgets hosts idle past `idleRetention`. Recency order means it stops at the first fresh one. */
  #sweepIdle(now: number): void {
    this.#lastSweep = now;
    for (const entry of this.#hosts.values()) {
      if (now - entry.lastUsed < this.#idleRetention) break;
      this.#hosts.delete(entry.key);
      this.#stats.evictedIdle++;
    }
  }

  #evictOldest(): void {
    const oldest = this.#hosts.keys().next();
    if (oldest.done !== true) {
      this.#hosts.delete(oldest.value);
      this.#stats.evictedCapacity++;
    }
  }
}
