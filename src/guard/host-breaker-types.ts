/**
 * The {@link HostBreaker}'s public shapes (options, events, snapshots, counters, permits) and its
 * default open window, apart from the state machine so each file holds one idea.
 *
 * @module
 */
import type { Schedule } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';

/** Where a host stands. `half-open` means its window is over and a probe may run or is running. */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Options of a {@link HostBreaker}; every one has a default. */
export interface HostBreakerOptions {
  /**
   * Consecutive failed dial rounds that open a host (dials that overlap in time are one round).
   * Default 3: trips within three connect timeouts against a dead host, rides out a single blip
   * (seed 000). `0` disables the breaker: every admit is granted and nothing is recorded (seed
   * 002's opt-in mode).
   */
  failureThreshold?: number;
  /**
   * Shortest outage, ms, that may open a host: from the admission of the dial whose failure
   * started the streak to the failure that would open it. However many rounds fail, a host is not
   * opened before it has failed to answer for this long. Default 1 500: a process restart or a
   * pod rescheduled takes about 0.3-1 s, so such a blip never opens a host, while a dead host
   * refusing every dial still opens about 1.5 s after its first refusal, and one timing out opens
   * on its `failureThreshold`-th timeout once they add up to 1.5 s. `0`: the count alone decides,
   * as a classic breaker.
   */
  minOutage?: number;
  /**
   * How long an opened host is refused before one probe may run: milliseconds, or a
   * {@link Schedule} called with the number of consecutive opens (1 for the first trip; a reopen
   * after a probe the host refused at once, `ECONNREFUSED`, does not count until its dials have
   * been refused for 30 s, so a host restarting is probed at the pace it had), e.g.
   * `proportionalJitter({ base: 1_000, max: 60_000 })` as in seed 002. Default
   * {@link adaptiveOpenWindow}: about 1 s for the first window, doubling (with up to +25 % jitter)
   * while probes keep failing, capped at exactly 30 s, reset when a probe succeeds; while the host
   * refuses dials at once (the dial that opened it, then its probes, for the first 30 s of such
   * refusals), 250 ms (+25 %), so a restart of a few seconds is dialled again within about 300 ms
   * of its return. A host that timed out and comes back is dialled again within about a second;
   * one dead for minutes costs at most 2 dials a minute
   * (seed 000's 30 s cap). A schedule's answer goes through `safeDelay` (NaN or
   * negative: 0; past 2^31-1 ms or Infinity: 2^31-1), and one that throws is a warning and reuses
   * its last window, so no schedule makes a host unblockable.
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
   * hard bound on memory however many distinct hosts are named. A host under
   * {@link HostBreaker.isolate} is never evicted, here or as idle: its isolation lasts its time
   * (the table holds it beyond the bound; the operator's isolations are the excess).
   */
  capacity?: number;
  /**
   * The idle sweep runs at most once per this many ms, on an admit. Default 60 000: forgetting
   * is not urgent, and the sweep never becomes per-call work.
   */
  sweepInterval?: number;
  /** Time source. Default {@link systemClock}. */
  clock?: Clock;
  /**
   * Uniform [0, 1) source for jittered schedules. Default `Math.random`. An answer outside
   * [0, 1) is taken as 0, and one that throws is a process warning answered 0: the breaker draws
   * while a dial settles, where nothing can be thrown to.
   */
  random?: () => number;
}

/** Payloads of the breaker's events (also published on `dialguard:breaker:<event>`). */
export interface HostBreakerEvents {
  /** The host was closed (or half-open) and is now refused. */
  opened: { host: string; failures: number; openFor: number; reopened: boolean; cause: unknown };
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
  /** Consecutive failed dial rounds counted while closed (overlapping failed dials are one round). */
  failures: number;
  /** Consecutive trips without a close (drives an exponential open window). */
  opens: number;
  /** Whether a probe is out (half-open only). */
  probing: boolean;
  /** Milliseconds until the host may be dialled again; 0 when it may be now. */
  retryAfter: number;
  /** Whether an operator isolated it ({@link HostBreaker.isolate}); `retryAfter` then counts down the isolation. */
  isolated: boolean;
  /** The error of the last failed dial counted against it, if any since its last success. */
  lastError: unknown;
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
 * How a dial reaches its host: over TLS, or in the clear; a TLS dial may name the server name it
 * sends (`'tls:<servername>'`, see `tlsTransport()`). A dial that says which (every adapter's
 * does) keeps one client's wrong transport from closing the host for the others: a plain client
 * aimed at a TLS-only port (or a TLS client at a plain one) is hung up on without a byte, and so
 * is a TLS client naming a server the host does not serve (a gateway with no route for the
 * name), which looks like a dead host; while only dials of other transports (or other names)
 * have failed, a dial of this one is still let through (a trial: its dials in the first 250 ms
 * go, later ones are refused half-open until they settle), and its success closes the host
 * (DESIGN.md rule 1). `'tls'` is the TLS dial that sends no name; `tlsTransport()` lower-cases the
 * name, as servers match SNI names.
 */
export type Transport = 'tls' | 'plain' | `tls:${string}`;

/**
 * Leave to dial a host, from {@link HostBreaker.admit}. Settle it exactly once with the dial's
 * outcome; the first settlement wins and later ones are ignored.
 */
export interface DialPermit {
  /** The breaker's key for the host. */
  readonly host: string;
  /**
   * True when this dial is the half-open probe whose outcome decides the host, or the trial of a
   * transport none of whose dials failed while the host is open (see {@link Transport}).
   */
  readonly probe: boolean;
  /** Whether the permit has been settled. */
  readonly settled: boolean;
  /** The dial (and its handshakes) completed: the host is alive. */
  succeeded(): void;
  /**
   * The dial failed or timed out: the host did not answer. Pass the dial's error: a refusal
   * names its code and carries it as `cause`.
   */
  failed(error?: unknown): void;
  /** The caller gave up before the dial finished. Never counts against the host. */
  abandoned(): void;
  /**
   * The dial reached the host (its TCP connection is up) and its handshake is under way. It
   * settles nothing; a trial lets its transport's callers join it longer (see `TRIAL_PATIENCE`).
   * `dial()` calls it when `ctx.phase` moves past `tcp`.
   */
  progressed(): void;
}

/**
 * The default open window: `min(30 000, 1 000 * 2^(opens-1) * (1 + 0.25 * random))` ms. Short
 * first (a host back right after tripping waits about a second; while it refuses dials at once,
 * the breaker uses its 250 ms restart window instead), doubling while the host stays
 * dead, with jitter so hosts opened together are not probed together, and capped at exactly
 * 30 s (seed 000) so a host dead for minutes costs at most 2 dials a minute.
 */
export const adaptiveOpenWindow: Schedule = (n, _previous, random) =>
  Math.min(30_000, 1_000 * 2 ** Math.min(30, Math.max(0, n - 1)) * (1 + 0.25 * random()));
