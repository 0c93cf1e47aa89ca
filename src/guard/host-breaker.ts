/**
 * A per-host circuit breaker fed only by dial outcomes.
 *
 * ```
 * closed    --failureThreshold failed rounds over minOutage--> open
 * open      --open window elapsed, next admit-------------> half-open (that admit is the probe)
 * half-open --probe succeeded-----------------------------> closed   (count reset)
 * half-open --probe failed--------------------------------> open     (next window: longer, unless
 *                                                                     the host refused it at once
 *                                                                     early in the outage)
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
 * Failures are counted per round, not per dial (DESIGN.md rule 3): dials that overlap in time are
 * one round, whoever opened them. Each permit remembers the host's round counter when it was
 * admitted; its failure counts only if no failure was counted since then. A restart that refuses
 * a burst of 64 dials is one failed round, not 64. And a host opens only once its failed rounds
 * span `minOutage`, so a blip shorter than that (a restart, a pod rescheduled) never opens it.
 *
 * Decisions are a pure function of `clock.now()`: the breaker starts no timers.
 *
 * @module
 */
import { type Schedule, drawDelay, unitRandom } from '../core/backoff.js';
import { type Clock, checkedClock } from '../core/clock.js';
import { ConnectTimeoutError, HostUnavailableError, findError } from '../core/errors.js';
import { releaseFrames } from '../core/release-frames.js';
import { EventHub, type Unsubscribe, type Listener } from '../core/events.js';
import { checkDuration, checkFunction, checkInteger, opt, show } from '../core/validate.js';
import { refusedAtOnce } from './dial-outcome.js';
import { hostKey, reserveHostKeys } from './host-key.js';
import {
  adaptiveOpenWindow,
  type BreakerState,
  type DialPermit,
  type HostBreakerEvents,
  type HostBreakerOptions,
  type HostBreakerStats,
  type HostSnapshot,
  type Transport,
} from './host-breaker-types.js';
import { type OptionNames, checkOptionNames, optionNames } from '../core/option-names.js';

export {
  adaptiveOpenWindow,
  type BreakerState,
  type DialPermit,
  type HostBreakerEvents,
  type HostBreakerOptions,
  type HostBreakerStats,
  type HostSnapshot,
  type Transport,
};

/** What a breaker's `random` that answers outside [0, 1) or throws is taken to answer. */
const zero = (): number => 0;

/** The option names a HostBreaker takes: any other is warned about (see checkOptionNames). */
const BREAKER_EVENTS: OptionNames<HostBreakerEvents> = { opened: true, closed: true, 'probe-granted': true, 'probe-expired': true, refused: true };
const BREAKER_OPTIONS = optionNames<HostBreakerOptions>({ failureThreshold: true, minOutage: true, openDuration: true, probeTimeout: true, idleRetention: true, capacity: true, sweepInterval: true, clock: true, random: true });

interface Entry {
  // The fields a refusal and a warm admit read come first, so that they share the entry's first
  // cache line (with compressed pointers, 4 bytes a field): at thousands of hosts in rotation,
  // every line an admit touches is a miss. The list's links and the probe's come after them.
  readonly key: string;
  /** In the table: false once forgotten (a host seen again gets a new entry). */
  tracked: boolean;
  lastUsed: number;
  /**
   * Used since it was put at the fresh end of the list: its place there is stale, and the sweep
   * or an eviction that meets it moves it to the fresh end instead of forgetting it.
   */
  used: boolean;
  /** An operator's isolation: refused until then (Infinity: until released). 0: not isolated. */
  isolatedUntil: number;
  state: 'closed' | 'open';
  /** open: when a probe may run. */
  openUntil: number;
  /**
   * The transports whose dials failed since the last success (VIA_TLS | VIA_PLAIN; an admit that
   * named none counts as both; VIA_TLS: every TLS dial, named or not). While the host is open, a
   * dial by a transport not among them is let through: the host may be alive to it (see
   * {@link Transport}).
   */
  failedVia: number;
  /**
   * The TLS transports (`'tls'`, `'tls:<server name>'`) whose dials failed since the last success,
   * at most {@link MAX_TLS_NAMES}; undefined: none. A TLS dial sending another name is let
   * through while the host is open.
   */
  failedTls: string[] | undefined;
  /** The refusal thrown to every caller in the current generation (one window), made once. */
  refusal: HostUnavailableError | undefined;
  refusalGeneration: number;
  generation: number;
  /** open, after openUntil: whether a probe is out, and when it expires. */
  probing: boolean;
  probeUntil: number;
  /** Neighbours in the order of being put at the fresh end (see HostBreaker.#oldest). */
  older: Entry | undefined;
  newer: Entry | undefined;
  failures: number;
  /** Incremented each time a failure is counted; a permit's failure counts only if it still matches. */
  round: number;
  /**
   * When the dial whose failure started the current streak was admitted: the host has not
   * answered since then (for a timeout, that is a whole connect timeout before its failure).
   */
  streakStart: number;
  /** The last failed dial's error (cause of the refusals). */
  lastError: unknown;
  opens: number;
  /**
   * The schedule's `n`: as `opens`, except that a reopen after a probe the host refused at once,
   * early in the outage, does not raise it (see {@link REFUSING_HORIZON}).
   */
  level: number;
  /** The last open window drawn, for schedules that depend on it (decorrelated jitter). */
  lastOpenFor: number;
  openedAt: number;
  /**
   * While open: the transports not among the failed ones with a dial out (a trial, see
   * {@link HostBreaker.tryAdmit}), at most {@link MAX_TRIALS}; undefined: none yet.
   */
  trials: Trial[] | undefined;
  /** When the first probe the host refused at once since its last success failed (0: none yet). */
  refusingSince: number;
  /**
   * The transport class of the host's last successful dial (VIA_PLAIN or VIA_TLS; a dial that
   * named none: both; 0: none yet). The dials of the other class are a stranger's (see
   * {@link isStranger}). The last, not every one that ever did: a server moved from TLS back to
   * plain must not leave the TLS clients' hung dials taking the probe from the plain ones.
   */
  provenVia: number;
  /**
   * The TLS transport of the host's last successful dial (`'tls:<name>'`, `'tls'`) until a dial of
   * it fails; undefined: none (the last success was plain, or named none). Past
   * {@link MAX_TLS_NAMES} failing names it is still let through (see {@link TLS_FULL}).
   */
  provenTls: string | undefined;
  /**
   * The TLS transports (`'tls:<server name>'`, `'tls'`) that failed while the host was alive to
   * another TLS one (filed among the failed since a success by another name, and not succeeded
   * since), at most {@link MAX_TLS_NAMES}; undefined: none. A dial of one is a stranger's. Not
   * every name but the last to succeed: a host two right names had reached was dialled by each on
   * its own pace while it was dead, twice one name's dials (an outside review).
   */
  strangeTls: string[] | undefined;
  /** A stranger transport's spacing while the host is open, once one of its trials failed; undefined: none. */
  strangers: Strangers | undefined;
  /**
   * How long the host's dials take to establish, ms, from its successful ones (-1: none yet):
   * falls to a faster success at once, rises a quarter of the way to a slower one. A dial whose
   * own bound was shorter timed out on its caller's choice, not the host's: see {@link tooShort}.
   */
  needs: number;
}

/**
 * Whether `error` is a dial's timeout (a {@link ConnectTimeoutError}, or one on its cause chain)
 * whose bound was shorter than the host's dials take (`needs`, ms; -1: unknown). Such a dial
 * never had the time to succeed: not counted toward opening the host. Counted, one client's
 * `connectTimeout: 1` (meant as seconds) opened a live TLS host within 1.5 s for every other
 * client of the breaker, a healthy keep-alive agent's new connections refused (an outside
 * review: 9-50 refusals in 6 s, plain 0). Its cost to its own caller is its own short bound,
 * never the long wait the breaker exists to spare; and a host with no success yet (unknown) is
 * counted as before.
 */
function tooShort(error: unknown, needs: number): boolean {
  return (findError(error, ConnectTimeoutError)?.timeout ?? Number.POSITIVE_INFINITY) < needs;
}

/**
 * How often the transport that never reached an open host (while another did) may try it: its
 * own windows, drawn from the host's schedule at its own level, so its failures neither lengthen
 * the host's window nor take its probe.
 */
interface Strangers {
  /** Refused until then. */
  until: number;
  level: number;
  lastFor: number;
  /** The refusal handed meanwhile, made once a window. */
  refusal: HostUnavailableError | undefined;
}

/** One transport's dials let through while its host is open (only other transports' dials failed). */
interface Trial {
  readonly transport: string;
  /** When the first of the dials out was admitted; past probeTimeout they hold nobody back. */
  since: number;
  /** Its dials admitted since `since` and not yet settled. */
  out: number;
  /** The refusal handed to its transport's other callers meanwhile, made once. */
  refusal: HostUnavailableError | undefined;
  /** Whether one of its dials reached the host (TCP up, its handshake under way): see {@link TRIAL_PATIENCE}. */
  reached: boolean;
}

/**
 * How long a transport's trial lets more of its dials join it (250 ms, as the happy-eyeballs
 * attempt delay): a live host answers within a handshake, and refusing the callers that come
 * meanwhile refused every concurrent request of a right-name client but one (an outside review:
 * 29 of 30 per burst, where the plain client served all); past it with no answer, the host is
 * likely dead to that transport too, and the rest wait for the trial (each caller of a name a
 * blackholed host had not yet failed dialled it until that name's first dial timed out).
 */
export const TRIAL_GRACE = 250;

/**
 * How long a trial lets more of its dials join once one of them has reached the host (its TCP
 * connection is up, {@link DialPermit.progressed}), 1 000 ms: its handshake is under way, and a
 * server slow to answer it (far, busy, or a slow certificate lookup) would otherwise have its
 * right-name callers refused from {@link TRIAL_GRACE} until the trial succeeded (an outside
 * review, 400 ms handshakes: 3 of 20 refused; 1 s ones: 15 of 20). A blackholed host never gets
 * here, so it keeps the shorter bound.
 */
export const TRIAL_PATIENCE = 1_000;

/** Most dials a trial has out while it waits past {@link TRIAL_GRACE} on a reached host. */
const TRIAL_REACHED_DIALS = 16;

/**
 * Most trials an open host keeps out at once: every failing TLS name, and the plain and unnamed
 * TLS transports. A further transport is refused until one of them settles.
 */
const MAX_TRIALS = 10;

/** A permit's kind, as its settlement needs it: a plain dial, the host's probe, or a transport's trial. */
const DIAL = 0;
const PROBE = 1;
const TRIAL = 2;
type Kind = typeof DIAL | typeof PROBE | typeof TRIAL;

const VIA_TLS = 1;
const VIA_PLAIN = 2;
const VIA_ANY = VIA_TLS | VIA_PLAIN;
/**
 * In `failedVia`: more TLS names failed than {@link MAX_TLS_NAMES} keeps, so every TLS dial counts
 * as failed but the name that last reached the host (`provenTls`), until one of its own dials
 * fails. Nine clients with a wrong `servername` refused every right-name client needing a new
 * connection 45-100 % of the time, where plain clients were all served (an outside review).
 */
const TLS_FULL = 4;

/**
 * Distinct TLS server names a host keeps failures for; past it, every TLS dial counts as failed
 * but the last name to reach the host (see {@link TLS_FULL}: a stream of names cannot grow an
 * entry, and a name never proven is refused).
 */
const MAX_TLS_NAMES = 8;

/** Settles one dial of `transport`'s trial on `entry`, admitted at `admittedAt` (one of an older trial of it: nothing). */
function endTrial(entry: Entry, transport: string, admittedAt: number): void {
  const trials = entry.trials;
  if (trials === undefined) return;
  const at = trials.findIndex((t) => t.transport === transport && admittedAt >= t.since);
  if (at >= 0 && --trials[at]!.out === 0) trials.splice(at, 1);
}

/** One dial of `transport`'s trial on `entry`, admitted at `admittedAt`, reached the host (one of an older trial of it: nothing). */
function reachTrial(entry: Entry, transport: Transport | undefined, admittedAt: number): void {
  const trial = entry.trials?.find((t) => t.transport === transport && admittedAt >= t.since);
  if (trial !== undefined) trial.reached = true;
}

/** The transport class of a dial by `transport`: plain, TLS (any name), or both for one that named none. */
function viaOf(transport: Transport | undefined): number {
  return transport === 'plain' ? VIA_PLAIN : isTls(transport) ? VIA_TLS : VIA_ANY;
}

/**
 * Whether a dial by `transport` is a stranger's on `entry`: its class is not the one that last
 * reached the host (one client's TLS to a plain port, a plain client to a TLS one), or it is TLS
 * sending a server name that failed while another reached the host (see `strangeTls`). Such a
 * dial says nothing of the host's return, and one that fails on a live host (a plain server waiting for a line that a TLS
 * hello never ends, a server hanging up on a name it does not serve) held the host's probe, its
 * failure then doubling the window: a redis client with `tls` on a plain port kept the right
 * clients refused 4-11 s after a 300 ms restart, a client with a wrong `servername` ~7 s after a
 * 2 s one (outside reviews; 0.2-0.4 s without them).
 */
function isStranger(entry: Entry, transport: Transport | undefined): boolean {
  if (entry.provenVia === 0) return false;
  if ((entry.provenVia & viaOf(transport)) === 0) return true;
  return entry.strangeTls !== undefined && isTls(transport) && entry.strangeTls.includes(transport);
}

/**
 * The TLS transports that are strangers on `entry` once a dial by TLS `transport` succeeded: those
 * that were, and those whose dials failed since the last success, but `transport` itself.
 */
function strangersAfter(entry: Entry, transport: string): string[] | undefined {
  const failedTls = entry.failedTls;
  // Stryker disable next-line ConditionalExpression: dropping this shortcut answers the same (an empty list is undefined below)
  if (entry.strangeTls === undefined && failedTls === undefined) return undefined; // a healthy host's every success
  const strange = entry.strangeTls?.filter((t) => t !== transport) ?? [];
  if (failedTls !== undefined) {
    for (const failed of failedTls) {
      if (failed !== transport && !strange.includes(failed) && strange.length < MAX_TLS_NAMES) strange.push(failed);
    }
  }
  // Stryker disable next-line ConditionalExpression: an empty list holds no stranger either; undefined keeps the success path's shortcut
  return strange.length === 0 ? undefined : strange;
}

/** Whether a dial by `transport` is among those that failed since `entry`'s last success. */
function failedFor(entry: Entry, transport: Transport | undefined): boolean {
  if (transport === 'plain') return (entry.failedVia & VIA_PLAIN) !== 0;
  if (!isTls(transport)) return entry.failedVia !== 0 || entry.failedTls !== undefined;
  if ((entry.failedVia & VIA_TLS) !== 0 || (entry.failedTls !== undefined && entry.failedTls.includes(transport))) return true;
  return (entry.failedVia & TLS_FULL) !== 0 && transport !== entry.provenTls;
}

/** A TLS transport, named or not; anything else but `'plain'` (left out, or junk from JavaScript) is any transport. */
function isTls(transport: Transport | undefined): transport is 'tls' | `tls:${string}` {
  return transport === 'tls' || (typeof transport === 'string' && transport.startsWith('tls:'));
}

/** Files a failed dial by `transport` on `entry`. */
function fileFailure(entry: Entry, transport: Transport | undefined): void {
  if (transport === 'plain') entry.failedVia |= VIA_PLAIN;
  else if (!isTls(transport)) entry.failedVia = VIA_ANY;
  else {
    if (transport === entry.provenTls) entry.provenTls = undefined; // no longer let through past the cap
    if (entry.failedTls === undefined) entry.failedTls = [transport];
    else if (!entry.failedTls.includes(transport)) {
      if (entry.failedTls.length < MAX_TLS_NAMES) entry.failedTls.push(transport);
      else entry.failedVia |= TLS_FULL;
    }
  }
}

/**
 * The transport of a TLS dial that sends `servername` by SNI (`'tls:<name>'`), or `'tls'` when it
 * sends none (an IP address without a `servername`). A server that hangs up on a name it does not
 * serve (Node's `SNICallback` failing, a gateway with no matching filter chain) says nothing of
 * the names it serves: one client's wrong `servername` must not get the host refused for the
 * clients that name it right.
 */
export function tlsTransport(servername: string | undefined): Transport {
  // Lower case: DNS names are compared without case, and so are the SNI names servers match.
  return servername === undefined || servername === '' ? 'tls' : `tls:${servername.toLowerCase()}`;
}

type Outcome = 'succeeded' | 'failed' | 'abandoned';

class Permit implements DialPermit {
  #breaker: HostBreaker | undefined;
  readonly #entry: Entry;
  readonly #generation: number;
  readonly #round: number;
  readonly #admittedAt: number;
  readonly #transport: Transport | undefined;
  readonly #kind: Kind;
  /** Whether the dial reported that it reached its host (its TCP connection is up). */
  #reached = false;
  readonly host: string;
  readonly probe: boolean;

  constructor(breaker: HostBreaker, entry: Entry, host: string, kind: Kind, admittedAt: number, transport: Transport | undefined) {
    this.#breaker = breaker;
    this.#entry = entry;
    this.#generation = entry.generation;
    this.#round = entry.round;
    this.#admittedAt = admittedAt;
    this.#transport = transport;
    this.#kind = kind;
    this.host = host;
    this.probe = kind !== DIAL; // a trial is its transport's probe
  }

  get settled(): boolean {
    return this.#breaker === undefined;
  }

  succeeded(): void {
    this.#settle('succeeded');
  }

  failed(error?: unknown): void {
    // Stryker disable next-line StringLiteral: #settle tests only for 'succeeded' and 'abandoned'; any other label is a failure
    this.#settle('failed', error);
  }

  abandoned(): void {
    this.#settle('abandoned');
  }

  progressed(): void {
    // Only a trial waits differently for a dial that reached its host. Any permit may report: one
    // of another kind finds no trial of its transport admitted before it (trials are granted only
    // while the host is open, to transports none of whose dials failed, so neither a dial nor a
    // probe has one). Unsettled only: a settled dial's transport may have a newer trial.
    // Stryker disable next-line ConditionalExpression: a settled permit's #reached is never read again, and reachTrial skips trials newer than its admission
    if (this.#breaker === undefined) return;
    this.#reached = true;
    reachTrial(this.#entry, this.#transport, this.#admittedAt);
  }

  #settle(outcome: Outcome, error?: unknown): void {
    const breaker = this.#breaker;
    if (breaker === undefined) return;
    this.#breaker = undefined;
    settle(breaker, this.#entry, this.#generation, this.#round, this.#admittedAt, this.#kind, this.#transport, outcome, error, this.#reached);
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
  failed(_error?: unknown): void {
    this.settled = true;
  }
  abandoned(): void {
    this.settled = true;
  }
  progressed(): void {}
}

/**
 * How long a host's dials may go on being refused at once before a refused probe lengthens the
 * next window again: 30 s, counted from the first window opened by such a refusal (the dial that
 * opened the host, or a probe) since the host last answered. A refused probe costs a round trip,
 * and a restart (a deploy, a rescheduled pod, a host back from a blackhole whose server is still
 * starting) takes seconds; a host refusing longer than this is treated as dead, its window
 * doubling as for any other, so it still costs at most 2 dials a minute once gone a while.
 */
export const REFUSING_HORIZON = 30_000;

/**
 * The default schedule's window after a dial the host refused at once early in an outage (the
 * one that opened it, or a probe): 250 ms
 * (+25 % jitter). Four round trips a second to a closed port cost the host's kernel nothing, and
 * a restarting server is dialled again within about a quarter second of its return. A schedule
 * of the caller's own is kept as given (its level does not grow).
 */
export const RESTART_PROBE_WINDOW = 250;

/** Most idle hosts one admit forgets (or moves); the rest wait for the next admits (64: a few µs). */
const SWEEP_BATCH = 64;

/**
 * Most hosts used since they were put at the fresh end that an eviction passes over before it
 * forgets the one at the stale end anyway: the eviction is of a least recently used host while
 * fewer are in rotation, and never a walk of the table.
 */
const SECOND_CHANCES = 32;

// Module-private access to a breaker's internals for Permit, without making them public API.
let settle: (b: HostBreaker, e: Entry, generation: number, round: number, admittedAt: number, kind: Kind, transport: Transport | undefined, outcome: Outcome, error: unknown, reached: boolean) => void;

/**
 * How many spellings `breaker`'s index holds (all ports), and in how many per-port maps.
 *
 * @internal For tests: the index's bounds.
 */
export let spellingsHeld: (breaker: HostBreaker) => { spellings: number; ports: number };

/** No port looked up yet (a port argument is a number or undefined, never this). */
const NO_PORT: unique symbol = Symbol('no port');

/** A per-host circuit breaker fed only by dial outcomes. See the module docs for the states. */
export class HostBreaker {
  readonly #threshold: number;
  /** The options it was made with (see {@link HostBreaker.sibling}). */
  readonly #options: HostBreakerOptions;
  readonly #minOutage: number;
  readonly #openDuration: Schedule;
  /** Whether the default schedule is in use, whose window after a refused probe is {@link RESTART_PROBE_WINDOW}. */
  readonly #restartPace: boolean;
  readonly #probeTimeout: number;
  readonly #idleRetention: number;
  readonly #capacity: number;
  readonly #sweepInterval: number;
  readonly #clock: Clock;
  readonly #random: () => number;
  /**
   * Key to entry. Recency is a list threaded through the entries (#oldest to #newest), not the
   * Map's insertion order: re-inserting on every admit cost a delete and a set per call, and V8
   * then rehashed the whole table once per `size` admits (4 096: ~0.2 ms; 65 536: several ms, in
   * one admit). An admit of a known host now never writes to the Map, nor to the list (see
   * #touch): the list is in the order of being put at the fresh end, which a host used since is
   * given when the sweep or an eviction comes to it.
   */
  readonly #hosts = new Map<string, Entry>();
  #oldest: Entry | undefined;
  #newest: Entry | undefined;
  /**
   * The spellings callers pass, per port argument, to their entries: a warm host's admit is one
   * lookup by the caller's own string, whose hash the string already holds, with no key looked up
   * or built (two lookups, the key memo's and the table's, made the refusal at 4 096 hosts in
   * rotation cost 2.8 times what it costs at one; see bench/scale). A hit is an entry still
   * `tracked`; a forgotten one is a miss, left in place and overwritten when its spelling comes
   * back (a delete per forget made V8 rehash the index every few thousand forgets, in one admit).
   * Bounded: past 4 × capacity spellings (a host asked for as `host` with a port and as its key
   * `host:port` is two; the rest are spellings of forgotten hosts) the whole index is dropped and
   * refills from the next admits.
   */
  readonly #spellings = new Map<number | undefined, Map<string, Entry>>();
  /** The last port argument looked up and its spellings (none yet: undefined): a client's hosts share one port. */
  #spellingPort: number | undefined | typeof NO_PORT = NO_PORT;
  #spellingHosts: Map<string, Entry> | undefined;
  /** Spellings in the index, all ports. */
  #spellingCount = 0;
  readonly #events = new EventHub<HostBreakerEvents>('breaker', BREAKER_EVENTS);
  /** Who hears `refused`: asked on every refusal, so held rather than looked up each time. */
  readonly #refusedAudience = this.#events.audience('refused');
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
    spellingsHeld = (b) => ({ spellings: b.#spellingCount, ports: b.#spellings.size });
    settle = (b, e, generation, round, admittedAt, kind, transport, outcome, error, reached) => b.#settle(e, generation, round, admittedAt, kind, transport, outcome, error, reached);
  }

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: HostBreakerOptions = {}) {
    // `new HostBreaker('x')` was taken with every default, `null` a raw property read.
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    checkOptionNames('HostBreaker', options, BREAKER_OPTIONS);
    this.#options = { ...options };
    this.#threshold = checkInteger('failureThreshold', opt(options.failureThreshold, 3), 0);
    this.#minOutage = checkDuration('minOutage', opt(options.minOutage, 1_500));
    const open = opt<number | Schedule>(options.openDuration, adaptiveOpenWindow);
    if (typeof open === 'function') {
      this.#openDuration = open;
      this.#restartPace = open === adaptiveOpenWindow;
    } else {
      const ms = checkDuration('openDuration', open);
      this.#openDuration = () => ms;
      this.#restartPace = false;
    }
    this.#probeTimeout = checkDuration('probeTimeout', opt(options.probeTimeout, 10_000), 1);
    this.#idleRetention = checkDuration('idleRetention', opt(options.idleRetention, 300_000), 1, true);
    this.#capacity = checkInteger('capacity', opt(options.capacity, 4096), 1);
    reserveHostKeys(this.#capacity); // every host it tracks keeps its spelling memoised
    this.#sweepInterval = checkDuration('sweepInterval', opt(options.sweepInterval, 60_000), 0);
    this.#clock = checkedClock(options.clock, false);
    const random = options.random === undefined ? Math.random : unitRandom(checkFunction('random', options.random), zero, "a breaker's");
    this.#random = random;
    this.#lastSweep = this.#clock.now();
  }

  /**
   * @internal A new, empty breaker with this one's options: for what must be counted with the
   * same rules but apart from this breaker's hosts (a client's own resolver's lookups).
   */
  sibling(): HostBreaker {
    return new HostBreaker(this.#options);
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
   * @param transport - how the dial reaches the host: `'plain'`, `'tls'`, or `'tls:<name>'` (see
   *   {@link Transport}). Given, an open host still lets through dials by a transport none of
   *   whose dials failed (one client's wrong transport must not close the host for the others),
   *   as a trial: those that come while its first has been out less than {@link TRIAL_GRACE}
   *   (or {@link TRIAL_PATIENCE} once one reached the host) join it, later ones are refused
   *   half-open until it settles; left out, the dial counts as any.
   */
  admit(host: string, port?: number, transport?: Transport): DialPermit {
    const answer = this.tryAdmit(host, port, transport);
    if (answer instanceof HostUnavailableError) throw answer;
    return answer;
  }

  /**
   * {@link admit} with the refusal returned instead of thrown: for hot paths, since throwing
   * costs several times more than everything else a refusal does.
   */
  tryAdmit(host: string, port?: number, transport?: Transport): DialPermit | HostUnavailableError {
    if (this.#threshold === 0) return new NoopPermit(hostKey(host, port)); // keeps nothing, indexes nothing
    let entry = (port === this.#spellingPort ? this.#spellingHosts : this.#spellingsOf(port))?.get(host);
    let key: string;
    if (entry !== undefined && entry.tracked) key = entry.key;
    else {
      key = hostKey(host, port); // throws on a bad host or port, before anything is kept
      entry = undefined;
    }
    const now = this.#clock.now();
    if (now - this.#lastSweep >= this.#sweepInterval) {
      this.#sweepIdle(now);
      // Stryker disable next-line ConditionalExpression: dropping a still-tracked entry here only sends the admit to the table, which finds the same entry
      if (entry !== undefined && !entry.tracked) entry = undefined; // the sweep forgot it
    }

    if (entry === undefined) {
      entry = this.#hosts.get(key);
      if (entry === undefined) {
        if (this.#hosts.size >= this.#capacity) this.#evictOldest(now);
        entry = this.#fresh(key, now);
        this.#hosts.set(key, entry);
        this.#append(entry);
      } else {
        this.#touch(entry, now);
      }
      this.#index(host, port, entry);
    } else {
      this.#touch(entry, now);
    }

    // Stryker disable next-line ConditionalExpression,EqualityOperator: the hot path's skip; entered with 0, it clears a 0
    if (entry.isolatedUntil > 0) {
      if (now < entry.isolatedUntil) return this.#refuse(entry, entry.isolatedUntil - now, 'open');
      entry.isolatedUntil = 0; // over: the entry is as isolate() made it, fresh and closed
    }
    if (entry.state === 'closed') return new Permit(this, entry, key, DIAL, now, transport);
    // Only another transport's dials failed (one client's plain dial to a TLS port, a wrong TLS
    // server name): the host may be alive to this one, so it is tried (see #trial); its success
    // closes the host.
    if (!failedFor(entry, transport)) return this.#trial(entry, key, now, transport!);
    // A stranger's dial is tried apart, at its own pace, never as the host's probe (see
    // isStranger). Not held to the host's window either: that is drawn for the other transport's
    // failures, and a server moved to the stranger's transport fails each of that one's probes
    // (TLS-only redis resetting plain dials: windows of 2.4, 4.4, 9.8 s, and the TLS clients,
    // right now, refused in each; an outside review).
    if (isStranger(entry, transport)) {
      const strangers = entry.strangers;
      if (strangers !== undefined && now < strangers.until) return this.#refuseStranger(entry, strangers, now);
      return this.#trial(entry, key, now, transport!);
    }
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
    return new Permit(this, entry, key, PROBE, now, transport);
  }

  /**
   * An admit of `transport` to open `entry` when none of its dials failed: a trial. Dials join it
   * while its first has been out less than {@link TRIAL_GRACE} (up to {@link TRIAL_PATIENCE}, 16 out
   * at most, once one of them reached the host: a slow handshake); later ones are refused half-open
   * until its dials settle or its probeTimeout passes (each caller of a name a blackholed host
   * had not failed yet dialled it until that name's first dial timed out: 3 times the dials of
   * one refusal for all, in an outside review).
   */
  #trial(entry: Entry, key: string, now: number, transport: Transport): DialPermit | HostUnavailableError {
    const trials = (entry.trials ??= []);
    let trial = trials.find((t) => t.transport === transport);
    const stage = trial === undefined ? 'over' : this.#stage(trial, now);
    if (stage === 'holding') return this.#refuseTrial(entry, trial!, now);
    if (stage === 'young') {
      trial!.out++;
      return new Permit(this, entry, key, TRIAL, now, transport);
    }
    if (trial === undefined) {
      const spent = trials.findIndex((t) => now >= t.since + this.#probeTimeout);
      if (spent >= 0) trials.splice(spent, 1);
      else if (trials.length >= MAX_TRIALS) return this.#refuse(entry, Math.max(0, entry.openUntil - now), 'open');
      trial = { transport, since: 0, out: 0, refusal: undefined, reached: false };
      trials.push(trial);
    }
    // A new trial, or one whose dials went unreported past probeTimeout (theirs settle unheard).
    trial.since = now;
    trial.out = 1;
    trial.refusal = undefined;
    trial.reached = false;
    return new Permit(this, entry, key, TRIAL, now, transport);
  }

  /**
   * Where `trial` stands: `young` (dials join it), `holding` (out past {@link TRIAL_GRACE}, or
   * once one of its dials reached the host, past {@link TRIAL_PATIENCE} or with 16 dials out: its
   * transport's others are refused), or `over` (its dials unreported past probeTimeout).
   */
  #stage(trial: Trial, now: number): 'young' | 'holding' | 'over' {
    if (now >= trial.since + this.#probeTimeout) return 'over';
    const out = now - trial.since;
    return out < TRIAL_GRACE || (trial.reached && out < TRIAL_PATIENCE && trial.out < TRIAL_REACHED_DIALS) ? 'young' : 'holding';
  }

  /** The refusal of a stranger transport inside its own window (see isStranger). */
  #refuseStranger(entry: Entry, strangers: Strangers, now: number): HostUnavailableError {
    this.#counted(entry, 'open');
    strangers.refusal ??= this.#refusalOf(entry, strangers.until - now, 'open');
    return strangers.refusal;
  }

  /** A stranger's trial failed: its transport waits a window of its own, the next one longer. */
  #spaceStrangers(entry: Entry, now: number): void {
    const strangers = (entry.strangers ??= { until: 0, level: 0, lastFor: 0, refusal: undefined });
    strangers.level++;
    strangers.lastFor = drawDelay(this.#openDuration, strangers.level, strangers.lastFor, this.#random);
    strangers.until = now + strangers.lastFor;
    strangers.refusal = undefined;
  }

  /** The refusal of a transport whose trial is out past TRIAL_GRACE: half-open until it settles or expires. */
  #refuseTrial(entry: Entry, trial: Trial, now: number): HostUnavailableError {
    this.#counted(entry, 'half-open');
    trial.refusal ??= this.#refusalOf(entry, trial.since + this.#probeTimeout - now, 'half-open');
    return trial.refusal;
  }

  /**
   * Where `host` stands now, or `undefined` if the breaker is not tracking it (never seen,
   * forgotten, or the breaker is disabled). Reading does not touch recency. With `transport`,
   * where it stands for a dial of that transport: `closed` while only others' dials failed (such
   * a dial is admitted, see {@link admit}), `half-open` and probing while that transport's trial
   * is out.
   */
  state(host: string, port?: number, transport?: Transport): HostSnapshot | undefined {
    const entry = this.#hosts.get(hostKey(host, port));
    if (entry === undefined) return undefined;
    const now = this.#clock.now();
    let state: BreakerState = entry.state;
    let retryAfter = 0;
    let probing = false;
    const isolated = entry.isolatedUntil > now;
    const failed = failedFor(entry, transport);
    if (isolated) {
      state = 'open';
      retryAfter = entry.isolatedUntil - now;
    } else if (
      // Stryker disable next-line ConditionalExpression: a closed entry has no trial out (only an open one grants them, and closing forgets them), so it reads closed either way
      entry.state === 'open' &&
      (!failed || isStranger(entry, transport))
    ) {
      // Only another transport's dials failed, or a stranger's: a dial of this one is admitted,
      // as a trial (a stranger's inside a window of its own is refused).
      const trial = entry.trials?.find((t) => t.transport === transport);
      const strangerUntil = failed ? (entry.strangers?.until ?? 0) : 0;
      if (now < strangerUntil) retryAfter = strangerUntil - now;
      else if (trial !== undefined && this.#stage(trial, now) === 'holding') {
        state = 'half-open';
        probing = true;
        retryAfter = trial.since + this.#probeTimeout - now;
      } else state = 'closed';
    } else if (entry.state === 'open') {
      if (now < entry.openUntil) {
        retryAfter = entry.openUntil - now;
      } else {
        state = 'half-open';
        probing = entry.probing && now < entry.probeUntil;
        if (probing) retryAfter = entry.probeUntil - now;
      }
    }
    return {
      host: entry.key,
      state,
      failures: entry.failures,
      opens: entry.opens,
      probing,
      retryAfter,
      isolated,
      lastError: entry.lastError,
    };
  }

  /**
   * Refuses every dial to `host` for `ms` milliseconds (default: until released), whatever its
   * state, e.g. to drain it before maintenance. Dials already admitted settle without moving
   * anything. When the isolation ends the host starts afresh, closed with no failures: it was
   * set aside, not found dead. Calling it again replaces the isolation. While isolated, a
   * refusal's `retryAfter` counts down the isolation (`Infinity` until released).
   *
   * @param host - anything {@link hostKey} accepts: `host:port` for what `connect()` and the
   *   adapters dial (a bare name is a key of its own, refusing none of their dials).
   * @param ms - how long, default `Infinity` (until the returned function or {@link reset} ends it).
   * @returns a function that releases this isolation early (a no-op once replaced or reset).
   */
  isolate(host: string, ms = Number.POSITIVE_INFINITY): () => void {
    const duration = checkDuration('ms', ms, 0, true);
    const key = hostKey(host);
    const now = this.#clock.now();
    let entry = this.#hosts.get(key);
    if (entry !== undefined) this.#forget(entry);
    else if (this.#hosts.size >= this.#capacity) this.#evictOldest(now);
    entry = this.#fresh(key, now);
    entry.isolatedUntil = now + duration; // 0 ms: already over, and the next admit clears it
    this.#hosts.set(key, entry);
    this.#append(entry);
    const isolated = entry;
    // Nothing can change an isolated entry (every admit is refused, older permits belong to the
    // entry it replaced), so ending the isolation leaves it fresh. Once replaced or reset, the
    // entry is out of the table and the release touches nothing anyone reads.
    return () => {
      isolated.isolatedUntil = 0;
    };
  }

  /**
   * Forgets `host`: its count, its open window, any probe or isolation. The next dial is admitted
   * as for a host never seen; settlements of dials admitted before are ignored.
   *
   * @returns whether the host was tracked.
   */
  reset(host: string, port?: number): boolean {
    const entry = this.#hosts.get(hostKey(host, port));
    if (entry === undefined) return false;
    this.#forget(entry);
    return true;
  }

  /**
   * Forgets every host, as {@link reset} forgets one: for a test suite whose tests share a
   * breaker (the process-wide `sharedBreaker()` of every client given none), so a host one
   * test left open is not refused in the next (an outside review: 0 of 5 calls served after a
   * test that stopped the server; `reset` needs each key). Counters ({@link stats}) are kept.
   *
   * @returns how many hosts were tracked.
   */
  resetAll(): number {
    const n = this.#hosts.size;
    for (let entry = this.#oldest; entry !== undefined; entry = this.#oldest) this.#forget(entry);
    return n;
  }

  #fresh(key: string, now: number): Entry {
    // The same order as the interface: the literal's order is the object's layout.
    return {
      key,
      tracked: true, // every fresh entry goes into the table at once
      lastUsed: now,
      used: false,
      isolatedUntil: 0,
      state: 'closed',
      openUntil: 0,
      failedVia: 0,
      failedTls: undefined,
      refusal: undefined,
      refusalGeneration: 0, // unread until the first refusal is made
      generation: 0,
      // Stryker disable next-line BooleanLiteral: read only while open, and #open sets it false
      probing: false,
      probeUntil: 0,
      older: undefined,
      newer: undefined,
      failures: 0,
      round: 0,
      streakStart: 0,
      lastError: undefined,
      opens: 0,
      level: 0,
      lastOpenFor: 0,
      openedAt: 0,
      trials: undefined,
      refusingSince: 0,
      provenVia: 0,
      provenTls: undefined,
      strangeTls: undefined,
      strangers: undefined,
      needs: -1,
    };
  }

  /**
   * Marks `entry` used now. Its place in the list is left as it is (a second chance, as the CLOCK
   * algorithm gives): moving it to the fresh end on every admit wrote to its two neighbours and to
   * the newest entry, three cache misses a refusal at thousands of hosts in rotation (bench/scale).
   * The sweep and an eviction move it when they meet it.
   */
  #touch(entry: Entry, now: number): void {
    entry.lastUsed = now;
    entry.used = true;
  }

  /**
   * The spellings filed with `port`, or `undefined` (a lookup makes no map: a stream of ports
   * with hosts that never validate must not grow the index); made the current slot either way.
   */
  #spellingsOf(port: number | undefined): Map<string, Entry> | undefined {
    const byHost = this.#spellings.get(port);
    this.#spellingPort = port;
    this.#spellingHosts = byHost;
    return byHost;
  }

  /** Files `entry` under the spelling `host` with `port`, as an admit missed it. */
  #index(host: string, port: number | undefined, entry: Entry): void {
    if (this.#spellingCount >= 4 * this.#capacity) {
      this.#spellings.clear();
      this.#spellingCount = 0;
    }
    let byHost = this.#spellingsOf(port);
    if (byHost === undefined) {
      byHost = new Map();
      this.#spellings.set(port, byHost);
      this.#spellingHosts = byHost; // #spellingsOf made `port` the current slot
    }
    const before = byHost.size;
    byHost.set(host, entry);
    this.#spellingCount += byHost.size - before;
  }

  /** Counters since construction, and the current table size. */
  stats(): HostBreakerStats {
    return { hosts: this.#hosts.size, ...this.#stats };
  }

  /** Listens for a state change; returns the function that stops listening. */
  on<K extends keyof HostBreakerEvents>(event: K, listener: Listener<HostBreakerEvents[K]>): Unsubscribe {
    return this.#events.on(event, listener);
  }

  /** A refusal of `entry` to hand to every caller it refuses for a while: not the first caller's frames. */
  #refusalOf(entry: Entry, retryAfter: number, state: 'open' | 'half-open'): HostUnavailableError {
    const details = entry.isolatedUntil > 0 ? { isolated: true } : { failures: entry.failures, cause: entry.lastError };
    return releaseFrames(new HostUnavailableError(entry.key, retryAfter, state, this.#clock, details));
  }

  /** Counts a refusal of `entry`, and tells whoever listens. */
  #counted(entry: Entry, state: 'open' | 'half-open'): void {
    this.#stats.refused++;
    // Stryker disable next-line ConditionalExpression: spares building the payload; emit itself delivers to no one when no one listens
    if (this.#refusedAudience.heard) this.#events.emit('refused', { host: entry.key, state });
  }

  /** The refusal for `entry`'s current window: made on the first refusal, then reused. */
  #refuse(entry: Entry, retryAfter: number, state: 'open' | 'half-open'): HostUnavailableError {
    this.#counted(entry, state);
    if (entry.refusal === undefined || entry.refusalGeneration !== entry.generation) {
      entry.refusal = this.#refusalOf(entry, retryAfter, state);
      entry.refusalGeneration = entry.generation;
    }
    return entry.refusal;
  }

  #settle(entry: Entry, generation: number, round: number, admittedAt: number, kind: Kind, transport: Transport | undefined, given: Outcome, error: unknown, reached: boolean): void {
    // The entry's own flag, not a second lookup of its key: a settlement costs no map probe.
    const current = entry.tracked && entry.generation === generation;
    // A trial frees its transport's slot however it ends (a newer trial of it keeps its own).
    if (kind === TRIAL) endTrial(entry, transport!, admittedAt);
    let outcome = given;
    if (outcome === 'succeeded') {
      // Any success, current or not, says how long the host's dials take.
      const took = this.#clock.now() - admittedAt;
      const needs = entry.needs;
      entry.needs = needs < 0 || took < needs ? took : needs + (took - needs) / 4;
    } else if (outcome === 'failed' && entry.state === 'closed' && tooShort(error, entry.needs)) {
      // Timed out on its caller's bound, shorter than the host needs: not a failure to count
      // toward opening it. Once open (the host failed dials given time enough), such a probe
      // still fails it, so its caller waits out the window: abandoned, its slot freed at once,
      // the next admit probed at once, and that client dialled a dead host at its own pace.
      outcome = 'abandoned';
    }
    if (outcome === 'abandoned') {
      this.#stats.abandoned++;
      // A probe whose caller left frees its slot: the next admit may probe at once.
      if (current && kind === PROBE) {
        entry.probing = false;
        entry.generation++;
      }
      return;
    }
    if (!current) {
      this.#stats.stale++;
      // A stranger's trial failing after the host's probe was granted (which starts a generation)
      // still spaces its transport: it dialled again at once otherwise, while the probe was out.
      if (outcome === 'failed' && kind === TRIAL && entry.tracked && entry.state === 'open' && isStranger(entry, transport)) this.#spaceStrangers(entry, this.#clock.now());
      return;
    }
    const now = this.#clock.now();
    if (outcome === 'succeeded') {
      this.#stats.succeeded++;
      entry.provenVia = viaOf(transport);
      entry.provenTls = isTls(transport) ? transport : undefined;
      entry.strangeTls = isTls(transport) ? strangersAfter(entry, transport) : undefined;
      entry.strangers = undefined;
      entry.failures = 0;
      entry.failedVia = 0;
      entry.failedTls = undefined;
      entry.trials = undefined;
      entry.refusingSince = 0;
      entry.lastError = undefined;
      if (entry.state === 'open') {
        // Only the probe can be current while open: older permits were cut off by the trip.
        entry.state = 'closed';
        entry.opens = 0;
        entry.level = 0;
        entry.lastOpenFor = 0; // probing is left as is: only read while open, and #open clears it
        entry.generation++;
        this.#stats.closed++;
        this.#events.emit('closed', { host: entry.key, openedFor: now - entry.openedAt });
      }
      return;
    }
    this.#stats.failed++;
    entry.lastError = releaseFrames(error); // kept for as long as the host is: not its dial's frames
    const fresh = !failedFor(entry, transport); // this transport's first failure since the last success
    fileFailure(entry, transport);
    // The host's probe reached it (TCP up) and failed in its TLS dial: the host is back, and all
    // it said is that it refuses this name. The other names' failures are from before (the
    // outage), and they are tried now, not refused for the window this failure draws: a client
    // with a wrong servername whose dial took the probe after a restart kept the right names
    // refused ~7 s (an outside review; 0.1-0.3 s plain). A dead host is never reached: its names
    // still wait behind one probe.
    // Stryker disable next-line ConditionalExpression: a TLS failure always leaves failedTls set, and never holds a non-TLS transport
    if (kind === PROBE && reached && isTls(transport) && entry.failedTls !== undefined && entry.failedTls.includes(transport)) entry.failedTls = [transport];
    // The transport that reached the host failed too (a restart, a server changing transport):
    // the stranger's may be the right one now, and is tried at the host's pace, not its own.
    if (!isStranger(entry, transport)) entry.strangers = undefined;
    if (entry.state === 'closed') {
      // Overlapping dials are one round: count this failure only if none was counted since this
      // permit was admitted.
      if (round === entry.round) {
        // Stryker disable next-line UpdateOperator: the round is only compared for equality; any change marks it
        entry.round++;
        if (entry.failures === 0) entry.streakStart = admittedAt;
        entry.failures++;
      }
      // A transport's first failure in a streak of others' (a client with a wrong servername
      // failing all along, beside right clients on kept-alive connections): the outage, if this
      // is one, starts now. Counted from the misconfigured client's first failure, a 300 ms
      // restart opened the host within 0.1-0.4 s, and the right clients came back 0.25-0.7 s
      // after the server, where plain ones took 0.03-0.2 s (an outside review).
      // Stryker disable next-line EqualityOperator: at an equal time the assignment changes nothing
      if (fresh && admittedAt > entry.streakStart) entry.streakStart = admittedAt;
      if (entry.failures < this.#threshold || now - entry.streakStart < this.#minOutage) return;
      // Refused at once, the outage is a restart until shown otherwise (REFUSING_HORIZON) from
      // the first window on: a 2 s restart left the host refused ~0.6 s after its return,
      // while the plain clients were served within 50 ms (an outside review).
      this.#open(entry, now, false, refusedAtOnce(error));
      // A stranger's failure opened it: its transport waits a window of its own before its trials.
      if (isStranger(entry, transport)) this.#spaceStrangers(entry, now);
    } else if (kind !== TRIAL) {
      this.#open(entry, now, true, refusedAtOnce(error));
    } else if (isStranger(entry, transport)) {
      this.#spaceStrangers(entry, now);
    } else {
      // A trial of a transport none of whose dials had failed (only others' had: a client with a
      // wrong servername, for minutes): the window stood was drawn for those, and grown by them;
      // this transport's outage starts now, on the schedule's first window. Left standing, a
      // right name refused once in a 300 ms restart waited out the wrong name's window (4.6 s in
      // a test after 5 minutes of it), where plain clients were served in 0.1 s.
      entry.level = 0;
      entry.lastOpenFor = 0;
      entry.refusingSince = 0;
      this.#open(entry, now, true, refusedAtOnce(error));
    }
  }

  #open(entry: Entry, now: number, reopened: boolean, refused: boolean): void {
    entry.opens++;
    // A probe the host refused cost one round trip and nothing on the host: early in an outage (a
    // restart), the window does not grow, and the default one is short, so the host is dialled
    // again soon after its return rather than a doubled window later.
    // From the first window opened by a refusal until a success: a host whose probes are mostly refused but now
    // and then time out (a load balancer before a dead pool, a reboot loop) is not a fresh restart
    // each time, and still comes down to 2 dials a minute.
    if (refused && entry.refusingSince === 0) entry.refusingSince = now;
    const restarting = refused && now - entry.refusingSince < REFUSING_HORIZON;
    // The first window is at level 1 whatever it is (a caller's schedule is asked for n = 1).
    if (!restarting || entry.level === 0) entry.level++;
    const openFor =
      restarting && this.#restartPace
        ? RESTART_PROBE_WINDOW * (1 + 0.25 * this.#random())
        : drawDelay(this.#openDuration, entry.level, entry.lastOpenFor, this.#random); // never NaN, endless or thrown
    entry.lastOpenFor = openFor;
    entry.state = 'open';
    if (!reopened) entry.openedAt = now;
    entry.openUntil = now + openFor;
    entry.probing = false;
    entry.generation++;
    this.#stats.opened++;
    this.#events.emit('opened', { host: entry.key, failures: entry.failures, openFor, reopened, cause: entry.lastError });
  }

  /**
   * Forgets hosts idle past `idleRetention`, from the stale end of the list. A host used since it
   * was put at the fresh end is moved there now; it stops at the first fresh host in its place
   * (those after it were put there later: a host moved by a sweep while idle waits for a later
   * sweep to come round to it). An isolated host is kept (moved to the fresh end): forgetting it
   * would end the isolation. At most SWEEP_BATCH moves and forgets per call: when more are due,
   * the sweep is left due and the next admits go on with it, so no admit pays for a table gone
   * idle at once (a full scan at capacity).
   */
  #sweepIdle(now: number): void {
    let budget = SWEEP_BATCH;
    for (let entry = this.#oldest; entry !== undefined; entry = this.#oldest) {
      const fresh = now - entry.lastUsed < this.#idleRetention;
      if (fresh && !entry.used) break;
      if (budget-- === 0) return; // still due: the next admit carries on
      if (fresh) {
        this.#moveToFresh(entry);
        continue;
      }
      if (entry.isolatedUntil > now) {
        entry.lastUsed = now;
        this.#moveToFresh(entry);
        continue;
      }
      this.#forget(entry);
      this.#stats.evictedIdle++;
    }
    this.#lastSweep = now;
  }

  /**
   * Forgets the host at the stale end, passing over (moving to the fresh end) those used since
   * they were put there, at most {@link SECOND_CHANCES} of them: past that, the one at the stale
   * end goes, so that no admit walks the table.
   */
  #evictOldest(now: number): void {
    // Held past the bound by isolations (see below) that have ended since: two go for each host
    // that comes, so the table shrinks back to its capacity (it stayed at the isolations' peak
    // for good, one out for each one in; an outside review: 100 hosts at capacity 16).
    for (let rounds = this.#hosts.size > this.#capacity ? 2 : 1; rounds > 0; rounds--) {
      // An isolated host is passed over like a used one: an operator's isolate() lasts until its
      // time or its release, not until the table fills (it was evicted, and the host dialled again).
      // Stryker disable next-line OptionalChaining: only called at capacity (>= 1 host), so there is always an oldest
      for (let chances = SECOND_CHANCES; chances > 0 && (this.#oldest?.used === true || this.#oldest!.isolatedUntil > now); chances--) this.#moveToFresh(this.#oldest!);
      const oldest = this.#oldest;
      // Past its chances, an isolated host at the stale end stays: the table holds one more, for as
      // long as isolations fill more than SECOND_CHANCES of the stale end (the operator's count).
      // Stryker disable next-line ConditionalExpression: only called at capacity (>= 1 host), so there is always an oldest
      if (oldest === undefined || oldest.isolatedUntil > now) return;
      this.#forget(oldest);
      this.#stats.evictedCapacity++;
    }
  }

  #forget(entry: Entry): void {
    entry.tracked = false;
    this.#hosts.delete(entry.key);
    this.#unlink(entry);
    // Left in the spelling index (a miss there now, overwritten when its spelling comes back):
    // deleting would cost the index a rehash every few thousand forgets. What it held is let go.
    entry.refusal = undefined;
    entry.lastError = undefined;
  }

  /** Puts `entry`, in the list, at the fresh end, as if put there now. */
  #moveToFresh(entry: Entry): void {
    entry.used = false;
    this.#unlink(entry);
    this.#append(entry);
  }

  /** Puts `entry` at the fresh end of the list (unlinked). */
  #append(entry: Entry): void {
    entry.older = this.#newest;
    entry.newer = undefined;
    if (this.#newest !== undefined) this.#newest.newer = entry;
    else this.#oldest = entry;
    this.#newest = entry;
  }

  #unlink(entry: Entry): void {
    if (entry.older !== undefined) entry.older.newer = entry.newer;
    else this.#oldest = entry.newer;
    if (entry.newer !== undefined) entry.newer.older = entry.older;
    else this.#newest = entry.older;
    entry.older = undefined;
    entry.newer = undefined;
  }
}
