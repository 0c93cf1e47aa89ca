/**
 * Per-address guarding for a name that resolves to several addresses.
 *
 * The breaker's key for a dial is the address it went to (`address:port`), not the name: one dead
 * pod behind a headless service, one dead node of a list behind one DNS name, or a dead AAAA
 * record must neither cost every request a timeout nor open the name for its live siblings.
 *
 * - The name is resolved with the caller's `lookup` (or `dns.lookup`), `all: true`. The lookup is
 *   a dial of its own against the name's entry: a resolver that fails or stalls opens the name
 *   (there is no address to blame), one that answers proves nothing about the addresses.
 * - Addresses are tried in the resolver's order, families interleaved (RFC 8305). One whose entry
 *   is open is skipped without I/O. A dial that has not connected after `attemptDelay` gets
 *   company from the next address (after `HANDSHAKE_PATIENCE` (4) of them once its TCP is up to
 *   an address that has served: its handshake is under way); the first to connect wins, and the
 *   others run to their own end in the background so that their outcome is recorded (a late
 *   socket is closed; a TCP connect still pending holds the event loop, unref or not, so a
 *   process with nothing else to do exits when they end, at most the timeout later). A probe (an
 *   address whose window ended) or a suspect (closed, but its last dial failed) is dialled beside
 *   the next address at once (one dial to a suspect at a time, whoever the caller), so no caller
 *   waits on it; its failure hands nothing over while a dial is out inside its attempt delay
 *   (that dial goes on alone), and at most one probe per connect is out at a time. A dead address thus costs callers nothing once its first dial has failed, opens
 *   after the breaker's rounds, and is dialled once per open window after that.
 * - The name is refused, without a lookup, only when every address it last resolved to is open:
 *   the refusal ({@link HostUnavailableError}) carries each address's own refusal. One caller at a
 *   time looks a refused name up again, {@link REFUSED_RECHECK} after its last lookup: a deploy
 *   may have moved it to addresses that serve.
 *
 * Address entries live in the breaker's own table, so its capacity and idle eviction cover them.
 * The whole connect (lookup and dials) is bounded by one timeout: an address dialled later gets
 * what is left of it. The lookup runs under the name's breaker entry, but it is not a dial: it is
 * reported as a lookup (`dialguard:lookup:settled`, and the `dialguard:dial` trace with `kind:
 * 'lookup'`), never on `dialguard:dial:settled`, so dial metrics count only the addresses' dials.
 *
 * @module
 */
import { leftHostRefusing, markLeftRefusing } from '../core/classify.js';
import dns from 'node:dns';
import net from 'node:net';
import type tls from 'node:tls';
import { type Clock, systemClock } from '../core/clock.js';
import { ConnectTimeoutError, HostUnavailableError } from '../core/errors.js';
import { type DialContext, dialWith, refusing, whenReached } from './dial.js';
import { localFailure, noAddressOfOwnChoice } from './dial-outcome.js';
import type { HostBreaker, Transport } from './host-breaker.js';
import { hostKey } from './host-key.js';
import { onCallerAbort } from '../core/shared-signal.js';

/**
 * Default delay before the next address is dialled alongside one that has not connected yet,
 * 250 ms: Node's `autoSelectFamilyAttemptTimeout` and RFC 8305's recommendation. A live address
 * on a LAN connects well within it; a dead one costs a request at most this much, and only until
 * its entry opens.
 */
export const DEFAULT_ATTEMPT_DELAY = 250;

/**
 * How long, ms, the addresses a name last resolved to are kept as its answer at all: 1 000. Past
 * it the next caller looks the name up whatever the addresses' windows say, and a gRPC target
 * named so waits no longer than this before it reconnects. Also how long a lookup out of a
 * refused name holds back the next one (see {@link REFUSED_RECHECK}, which re-resolves a refused
 * name sooner): one that never answers starts at most one lookup a second, not one a call.
 */
export const ADDRESS_RECHECK = 1_000;

/**
 * @internal How long, ms, after its lookup a name refused from memory is looked up again by one of its
 * callers: 100. A deploy moves a name to new addresses while its old ones are open: refused until
 * {@link ADDRESS_RECHECK}, guarded clients were served again up to a second after plain ones (an
 * outside review: 20-290 ms in its runs, 135 failed calls against plain's 121). One lookup at a
 * time per name (the others keep refusing from memory meanwhile), so a slow resolver gets no pile
 * of them; one that fails or never answers holds the next back until ADDRESS_RECHECK.
 */
export const REFUSED_RECHECK = 100;

/**
 * How long, in attempt delays from its start, a dial whose TCP has connected keeps the next
 * address waiting: 4 (1 s by default). Its handshake (TLS, a protocol's) is under way: the
 * address is reachable, and a handshake slower than one attempt delay is a far or a busy peer,
 * which a second dial only loads with a second handshake (every call dialled both addresses of a
 * name whose TLS took 400 ms, an outside review; plain `tls.connect` dials one). A peer that
 * accepts and never answers still gets company, at this bound instead of the attempt delay.
 */
const HANDSHAKE_PATIENCE = 4;

/** Most addresses of one name that are dialled and remembered; the rest are ignored. */
const MAX_ADDRESSES = 64;
/** Most names whose addresses are remembered per breaker; the least recently used goes first. */
const MEMO_CAPACITY = 1_024;

/** One resolved address. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/**
 * The refusal of a name every address of which is refused: a {@link HostUnavailableError} for the
 * name whose `addresses` holds each address's own refusal; `retryAfter` is the earliest of theirs.
 */
function nameRefusal(name: string, addresses: readonly HostUnavailableError[], clock: Pick<Clock, 'now'>): HostUnavailableError {
  return new HostUnavailableError(
    name,
    Math.min(...addresses.map((a) => a.retryAfter)),
    addresses.every((a) => a.state === 'half-open') ? 'half-open' : 'open',
    clock,
    {
      failures: Math.min(...addresses.map((a) => a.failures)),
      cause: addresses[0]!.cause, // never empty: a refusal is made from at least one address's
      isolated: addresses.every((a) => a.isolated),
      addresses,
    },
  );
}

/** What {@link connectAddresses} needs from `connect`'s options. */
export interface AddressDialOptions {
  timeout: number;
  signal: AbortSignal | undefined;
  breaker: HostBreaker;
  clock: Clock | undefined;
  attemptDelay: number;
  /** How the dials reach their addresses (see {@link Transport}); the name's lookup is any. */
  transport?: Transport;
  lookup: net.LookupFunction | undefined;
  family: number | undefined;
  hints: number | undefined;
}

/**
 * The names a breaker remembers addresses for: name key (and, for a resolver of the caller's own,
 * see {@link memoKey}) -> addresses.
 */
interface Memo {
  readonly names: Map<string, Remembered>;
  /**
   * Suspect addresses with a dial out. One at a time is enough: dials that overlap are one
   * round for the breaker, so more would only add SYNs to a likely dead address.
   */
  readonly suspectsOut: Set<string>;
  /**
   * Addresses with dials out (any caller's). See `race()`: one out longer than a dial of it is
   * waited on alone goes after the others.
   */
  readonly out: Map<string, DialsOut>;
}

/** The dials out to one address, any caller's. */
interface DialsOut {
  /**
   * Since when the oldest has been out with none of them connected (a dial that connects restarts
   * it: under steady load a live address always has a dial out).
   */
  since: number;
  count: number;
  /** Whether one of them has connected TCP: it is reachable, its handshake is what takes time. */
  reached: boolean;
}

interface Remembered {
  /** The address keys (`address:port`), in resolver order. */
  keys: readonly string[];
  /** When they were resolved (or a refresh started). */
  at: number;
  /**
   * A caller refused from them went to look the name up again (see REFUSED_RECHECK): the others
   * refuse from them until its answer replaces them, or ADDRESS_RECHECK after they were resolved
   * (a lookup that failed, or never answered).
   */
  refreshing: boolean;
  /** The last refusal made from them, reused while each address's refusal is the same object. */
  refusal: HostUnavailableError | undefined;
  /**
   * Those a dial of which connected (TCP and handshake), kept across lookups while the name still
   * resolves to them: live, so a slow handshake of theirs is waited on (see HANDSHAKE_PATIENCE).
   */
  readonly proven: Set<string>;
}

const memos = new WeakMap<HostBreaker, Memo>();

/** Per breaker, the breaker each resolver of a client's own counts its lookups in (see {@link lookupBreaker}). */
const lookupBreakers = new WeakMap<HostBreaker, WeakMap<net.LookupFunction, HostBreaker>>();

/**
 * @internal The breaker a client's own `lookup` counts its lookups in (a name it cannot resolve,
 * a lookup that hangs): a sibling of `breaker` (same options), one per function. Counted under the
 * name in `breaker` itself, one client's resolver answering ENOTFOUND got the name refused for
 * every client of the breaker, though the others resolved it (an outside review). `dns.lookup`'s
 * lookups stay in `breaker`: every client that uses it shares them. The addresses' dials are
 * always `breaker`'s.
 */
export function lookupBreaker(breaker: HostBreaker, lookup: net.LookupFunction): HostBreaker {
  let own = lookupBreakers.get(breaker);
  if (own === undefined) lookupBreakers.set(breaker, (own = new WeakMap()));
  let found = own.get(lookup);
  if (found === undefined) own.set(lookup, (found = breaker.sibling()));
  return found;
}

/** How a caller resolves a name: what makes two callers' answers for it comparable. */
export type Resolution = Partial<Pick<AddressDialOptions, 'lookup' | 'family' | 'hints'>>;

/** A number per lookup function seen, for {@link memoKey}: the function itself is not kept. */
const lookupIds = new WeakMap<net.LookupFunction, number>();
let lastLookupId = 0;

/**
 * Where a name's addresses are remembered for a caller resolving it `how`: the name key itself
 * for `dns.lookup` with any family (what most callers do: one entry, no string built per call),
 * else the key qualified by the lookup function, family and hints. Two clients of one breaker
 * that resolve a name differently (one with `family: 4`, one with a lookup of its own) see
 * different addresses: one's answer must not refuse the other's live address (an outside
 * review: 49 of 77 calls refused, every one of which the other address would have served).
 */
function memoKey(name: string, how: Resolution): string {
  const { lookup } = how;
  const family = how.family ?? 0;
  const hints = how.hints ?? 0;
  // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator: the shortcut only spares building a string per call; either key is the same for every caller resolving alike
  if (lookup === undefined && family === 0 && hints === 0) return name;
  let id = 0;
  if (lookup !== undefined) {
    id = lookupIds.get(lookup) ?? 0;
    // Stryker disable next-line UpdateOperator: ids are only compared for equality; counting down keeps them distinct
    if (id === 0) lookupIds.set(lookup, (id = ++lastLookupId));
  }
  return `${name} lookup=${id} family=${family} hints=${hints}`;
}

function memoOf(breaker: HostBreaker): Memo {
  let memo = memos.get(breaker);
  if (memo === undefined) {
    memo = { names: new Map(), suspectsOut: new Set(), out: new Map() };
    memos.set(breaker, memo);
  }
  return memo;
}

/**
 * @internal The refusal for `name` when the addresses it last resolved to (within {@link ADDRESS_RECHECK})
 * are all open; otherwise undefined. `how`: the caller's resolver (its lookup, family, hints),
 * whose answers alone are read. A stale memo is marked fresh by the caller that goes on to
 * re-resolve, so concurrent callers keep refusing from memory meanwhile instead of all looking up;
 * so is a refused one {@link REFUSED_RECHECK} after its lookup, one lookup out at a time.
 */
export function refuseFromMemory(breaker: HostBreaker, name: string, clock: Clock, transport: Transport | undefined, how: Resolution): HostUnavailableError | undefined {
  const seen = memos.get(breaker)?.names.get(memoKey(name, how));
  if (seen === undefined) return undefined;
  const now = clock.now();
  if (now - seen.at >= ADDRESS_RECHECK) {
    seen.at = now; // this caller re-resolves; the others keep refusing from memory meanwhile
    return undefined;
  }
  const { keys } = seen;
  if (!seen.refreshing && now - seen.at >= REFUSED_RECHECK && keys.every((key) => refusing(breaker, key, transport))) {
    // Refused on an answer a deploy may have changed: this caller looks the name up again (and
    // dials a new address at once), the others keep refusing from memory until its answer is in.
    seen.refreshing = true;
    return undefined;
  }
  const last = seen.refusal;
  const lastParts = last?.addresses;
  let parts: HostUnavailableError[] | undefined;
  if (last === undefined) {
    // Not refused from memory yet: look before admitting, so that an address that may be dialled
    // is not admitted (and abandoned) here. Once refused, admit at once (the hot path): an admit
    // granted there is abandoned below, which happens once per window at most.
    for (const key of keys) if (!refusing(breaker, key, transport)) return undefined;
  }
  // Each admit counts its refusal; while they are the same objects, so is the name's.
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    let answer: ReturnType<HostBreaker['tryAdmit']>;
    if (seen.refreshing && lastParts !== undefined && !refusing(breaker, key, transport)) {
      // Its window ended, and the caller let through to look the name up dials it when its answer
      // comes: refused as it last was until then. Admitted and abandoned by every caller, each
      // went on to a lookup of its own, and a slow resolver's piled up (an outside review: 20
      // callers, 60 lookups out at once).
      answer = lastParts[i]!;
    } else {
      answer = breaker.tryAdmit(key, undefined, transport);
      if (!(answer instanceof HostUnavailableError)) {
        answer.abandoned(); // its window ended this instant (or it was reset, or only another transport failed): dial after all
        seen.refreshing = true; // this caller looks the name up and dials; the others wait for its answer
        return undefined;
      }
    }
    if (parts === undefined && lastParts !== undefined && lastParts[i] === answer) continue;
    parts ??= lastParts === undefined ? [] : lastParts.slice(0, i);
    parts.push(answer);
  }
  if (parts === undefined) return last; // every address's refusal is the one `last` was made of
  seen.refusal = nameRefusal(name, parts, clock);
  return seen.refusal;
}

/**
 * @internal How long, ms, until `name` may be dialled again when every address it last resolved
 * to (within {@link ADDRESS_RECHECK}) is refused now: the earliest of their `retryAfter`. 0 when
 * one of them may be dialled, or when nothing fresh is remembered (a connect would resolve). Reads
 * only: nothing is admitted, counted or touched.
 */
export function addressesRetryAfter(breaker: HostBreaker, name: string, clock: Pick<Clock, 'now'>, transport: Transport | undefined, how: Resolution): number {
  const seen = memos.get(breaker)?.names.get(memoKey(name, how));
  if (seen === undefined || clock.now() - seen.at >= ADDRESS_RECHECK) return 0;
  let wait = Infinity;
  for (const key of seen.keys) {
    const s = breaker.state(key, undefined, transport);
    if (s === undefined || !(s.state === 'open' || s.probing)) return 0;
    wait = Math.min(wait, s.retryAfter);
  }
  return Math.max(0, wait); // Infinity: every address isolated until released
}

function remember(breaker: HostBreaker, name: string, keys: readonly string[], now: number): Remembered {
  const names = memoOf(breaker).names;
  const before = names.get(name)?.proven;
  names.delete(name);
  if (names.size >= MEMO_CAPACITY) names.delete(names.keys().next().value!);
  // One set per name, shared by the races of every lookup (a race adds to it when it connects),
  // forgetting addresses the name no longer resolves to.
  const proven = before ?? new Set<string>();
  for (const key of proven) if (!keys.includes(key)) proven.delete(key);
  const remembered: Remembered = { keys, at: now, refreshing: false, refusal: undefined, proven }; // never empty: resolve() fails on no address
  names.set(name, remembered);
  return remembered;
}

/**
 * Resolves `host` (a name) and connects to one of its addresses, guarding each address apart.
 * `open` opens the socket to one address inside its dial. The caller checks
 * {@link refuseFromMemory} first.
 *
 * `dispose` closes a connection that lands after the winner (default: a socket's `destroy()`).
 *
 * @internal used by `connect` and the gRPC adapter's channel connector (its connections are channels).
 */
export function connectAddresses<C = net.Socket>(
  host: string,
  port: number,
  name: string,
  open: (address: string, ctx: DialContext) => Promise<C>,
  options: AddressDialOptions,
  dispose: (connection: C) => void = destroy as (connection: C) => void,
): Promise<C> {
  const clock = options.clock ?? systemClock;
  const { breaker } = options;
  const started = clock.now();
  const lookup = options.lookup ?? (dns.lookup as unknown as net.LookupFunction);
  const lookups = options.lookup === undefined ? breaker : lookupBreaker(breaker, options.lookup);
  if (lookups !== breaker) {
    // The name's lookups are counted apart, but an operator's isolation of the name is the
    // breaker's: with a lookup of the client's own, `isolate(name)` refused nothing (an outside
    // review: 4 of 4 calls connected; dns.lookup's were refused).
    const isolation = isolationOf(breaker, name);
    if (isolation !== undefined) return Promise.reject(isolation);
  }
  const memo = memoKey(name, options);
  const keysOf = (resolved: readonly ResolvedAddress[]): string[] => resolved.map((a) => hostKey(a.address, port));
  const late = (resolved: ResolvedAddress[]): void => {
    const keys = keysOf(resolved);
    const seen = memoOf(breaker).names.get(memo);
    if (seen !== undefined && keys.length === seen.keys.length && keys.every((key) => seen.keys.includes(key))) {
      // The same addresses: fresh again, no lookup out, and the refusal kept, so that the next
      // caller to find an address's window over goes on alone (remembered anew, every caller of a
      // half-open address went on to a lookup of its own: r119, 50 callers, 52 lookups out).
      seen.at = clock.now();
      seen.refreshing = false;
      return;
    }
    remember(breaker, memo, keys, clock.now());
  };
  return dialWith(name, (ctx) => resolve(lookup, host, options, ctx, late), { timeout: options.timeout, signal: options.signal, breaker: lookups, clock }, undefined, true).then(
    (resolved) => {
      const keys = keysOf(resolved);
      const { proven } = remember(breaker, memo, keys, clock.now());
      const remaining = Math.max(1, options.timeout - (clock.now() - started));
      return race(name, resolved, keys, proven, open, { ...options, timeout: remaining }, clock, dispose, options.timeout);
    },
  );
}

/** The refusal of `name` while `breaker` isolates it (see {@link HostBreaker.isolate}); otherwise undefined. */
export function isolationOf(breaker: HostBreaker, name: string): HostUnavailableError | undefined {
  if (breaker.state(name)?.isolated !== true) return undefined;
  const answer = breaker.tryAdmit(name);
  if (answer instanceof HostUnavailableError) return answer;
  answer.abandoned(); // the isolation ended this instant
  return undefined;
}

/**
 * The lookup, `all: true`, as one establishment: phase `lookup`, stopped by `ctx.signal`. An
 * answer that comes after the caller left (its timeout, its abort) goes to `late`: it is still
 * the name's answer.
 */
function resolve(lookup: net.LookupFunction, host: string, options: AddressDialOptions, ctx: DialContext, late: (answer: ResolvedAddress[]) => void): Promise<ResolvedAddress[]> {
  ctx.phase = 'lookup';
  return new Promise<ResolvedAddress[]>((done, fail) => {
    const onAbort = (): void => fail(ctx.signal.reason);
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    const lookupOptions: dns.LookupAllOptions = { all: true, family: options.family ?? 0, ...(options.hints === undefined ? {} : { hints: options.hints }) };
    // No address of the family (or kind) this caller asked for says nothing of the name: it must
    // not get the name refused for callers without that restriction.
    const noAddress = (err: Error): unknown => noAddressOfOwnChoice(err, options.family, options.hints);
    const answered = (err: Error | null, answer: unknown, family?: number): void => {
      ctx.signal.removeEventListener('abort', onAbort);
      if (err) return fail(noAddress(err));
      // A user lookup may ignore `all` and answer with one address.
      const list: ResolvedAddress[] = Array.isArray(answer)
        ? (answer as ResolvedAddress[])
        : typeof answer === 'string'
          ? [{ address: answer, family: family ?? net.isIP(answer) }]
          : [];
      // Each address once, as Node's own connect takes them: a resolver repeating a record (merged
      // sources, /etc/hosts and DNS) cost a dial and an attempt delay per copy, and with a short
      // timeout the live address after three copies of a dead one was never dialled.
      const usable: ResolvedAddress[] = [];
      const seen = new Set<string>();
      for (const a of list) {
        if (usable.length === MAX_ADDRESSES) break;
        if (typeof a?.address !== 'string' || net.isIP(a.address) === 0 || seen.has(a.address)) continue;
        seen.add(a.address);
        usable.push(a);
      }
      if (usable.length === 0) return fail(noAddress(Object.assign(new Error(`${host} resolved to no address`), { code: 'ENOTFOUND', hostname: host })));
      // Dropped when its caller had left, the answer was lost to the callers refused from memory
      // meanwhile: the name stayed refused on its old answer for a second after a deploy, on a
      // live address, whenever a caller with a short timeout was the one to look it up (r118).
      if (ctx.signal.aborted) late(interleave(usable));
      else done(interleave(usable));
    };
    try {
      (lookup as (h: string, o: dns.LookupAllOptions, cb: typeof answered) => void)(host, lookupOptions, answered);
    } catch (err) {
      // A lookup that throws instead of calling back is this caller's own bug (a lookup calls
      // back, even with an error): it says nothing of the name, so it must not get the name
      // refused for callers on the system resolver.
      ctx.signal.removeEventListener('abort', onAbort);
      fail(localFailure(err));
    }
  });
}

/** RFC 8305 §4: alternate families, starting with the resolver's first. */
function interleave(list: ResolvedAddress[]): ResolvedAddress[] {
  const firstFamily = net.isIP(list[0]!.address);
  const a = list.filter((x) => net.isIP(x.address) === firstFamily);
  const b = list.filter((x) => net.isIP(x.address) !== firstFamily);
  if (b.length === 0) return list;
  const out: ResolvedAddress[] = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (i < a.length) out.push(a[i]!);
    if (i < b.length) out.push(b[i]!);
  }
  return out;
}

/**
 * Dials the addresses, staggered by `attemptDelay`, skipping those whose entry is open; the first
 * socket wins. `options.timeout` is what is left of the caller's `bound` after the lookup. Attempts still running when it does go on to their own end (recorded, and a late
 * socket closed).
 */
function race<C>(
  name: string,
  resolved: readonly ResolvedAddress[],
  keys: readonly string[],
  proven: Set<string>,
  open: (address: string, ctx: DialContext) => Promise<C>,
  options: AddressDialOptions,
  clock: Clock,
  dispose: (connection: C) => void,
  bound: number,
): Promise<C> {
  const { breaker, signal } = options;
  const { suspectsOut, out } = memoOf(breaker);
  const deadline = clock.now() + options.timeout;
  const order = resolved.map((_, i) => i);
  /** Addresses already put after the others for being slow: each is moved once, then dialled in its new turn. */
  let moved: Set<number> | undefined;
  /** Suspects passed over because another caller's dial to them is out: dialled only as a last resort. */
  const deferred: number[] = [];
  let lastResort = false;

  return new Promise<C>((resolveCall, rejectCall) => {
    const controller = new AbortController(); // the caller's signal, until the call settles
    const errors: unknown[] = [];
    const refusals: HostUnavailableError[] = [];
    let inflight = 0;
    let probeOut = false;
    let done = false;
    let timer: ReturnType<Clock['setTimeout']> | undefined;
    /** The dial `timer` paces: the next address joins it when the timer fires. */
    let pacer: Attempt | undefined;

    const finish = (): void => {
      done = true;
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      if (done) return;
      finish();
      controller.abort(signal!.reason);
      rejectCall(signal!.reason);
    };
    const settleIfOver = (): void => {
      if (done || inflight > 0 || order.length > 0) return;
      if (deferred.length > 0) {
        lastResort = true; // nothing else is left: dial them after all, if time is left (next() checks)
        order.push(...deferred.splice(0));
        next();
        return;
      }
      finish();
      // No time left to dial (the lookup took it): the caller's whole bound was exceeded, not what was left of it.
      if (errors.length === 0 && refusals.length === 0) rejectCall(new ConnectTimeoutError(name, bound, 'lookup'));
      else if (errors.length === 0) rejectCall(nameRefusal(name, refusals, clock));
      else if (errors.length === 1) rejectCall(errors[0]);
      else rejectCall(eachFailed(name, errors));
    };
    const next = (): void => {
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
      while (!done && order.length > 0) {
        // A probe goes to one address at a time: while one is out, a half-open address waits.
        let at = 0;
        if (probeOut) {
          at = order.findIndex((i) => breaker.state(keys[i]!, undefined, options.transport)?.state !== 'half-open');
          if (at < 0) break;
        }
        const i = order.splice(at, 1)[0]!;
        const key = keys[i]!;
        const snapshot = breaker.state(key, undefined, options.transport);
        if (snapshot !== undefined && (snapshot.state === 'open' || snapshot.probing)) {
          const refused = breaker.tryAdmit(key, undefined, options.transport);
          if (refused instanceof HostUnavailableError) {
            refusals.push(refused);
            continue; // skipped without I/O
          }
          refused.abandoned(); // its window ended this instant: dial it below
        }
        const probe = snapshot?.state === 'half-open';
        // Its last dial failed (still closed): likely dead, not yet proven so.
        const suspect = snapshot !== undefined && snapshot.state === 'closed' && snapshot.failures > 0;
        if (suspect && !lastResort && suspectsOut.has(key)) {
          deferred.push(i);
          continue;
        }
        // Another caller's dial to it has been out longer than one is waited on alone (an attempt
        // delay, HANDSHAKE_PATIENCE of them once its TCP connected): it connects slowly, if at
        // all (a blackhole while its first dial runs cost every call an attempt delay and a SYN
        // until that dial timed out). It goes after the others, still staggered: put last with no
        // turn of its own, a live address whose handshake outlasts the delay was never dialled
        // beside an accept-and-hold sibling, and calls failed (a regression review).
        const slow = out.get(key);
        if (slow !== undefined && order.length > 0 && !(moved ??= new Set()).has(i) && clock.now() - slow.since >= alone(key, slow.reached)) {
          moved.add(i);
          order.push(i);
          continue;
        }
        const remaining = deadline - clock.now();
        if (remaining < 1) {
          order.length = 0;
          break;
        }
        const attempt = launch(resolved[i]!.address, key, probe, suspect, remaining);
        // A probe or a suspect runs beside the next address, not ahead of it: no caller waits on
        // it, yet it is dialled, so a dead address opens (and is then skipped) and one that is
        // back serves again.
        if (probe || suspect) continue;
        if (order.length > 0) pace(attempt);
        return;
      }
      settleIfOver();
    };
    /**
     * How long a dial to `key` is waited on alone: an attempt delay, or HANDSHAKE_PATIENCE of them
     * once its TCP connected if the address is proven live (one never connected that accepts and
     * holds is left after an attempt delay, as before).
     */
    const alone = (key: string, reached: boolean): number => (reached && proven.has(key) ? options.attemptDelay * HANDSHAKE_PATIENCE : options.attemptDelay);
    /** The next address joins `attempt` when it has been waited on alone for long enough. */
    const pace = (attempt: Attempt): void => {
      if (timer !== undefined) clock.clearTimeout(timer);
      pacer = attempt;
      timer = clock.setTimeout(next, Math.max(0, attempt.started + alone(attempt.key, attempt.connected) - clock.now()));
    };
    const launch = (address: string, key: string, probe: boolean, suspect: boolean, timeout: number): Attempt => {
      const attempt: Attempt = { key, started: clock.now(), connected: false };
      let going = out.get(key);
      if (going === undefined) out.set(key, (going = { since: clock.now(), count: 0, reached: false }));
      going.count++;
      const connected = (): void => {
        if (attempt.connected) return;
        attempt.connected = true;
        going.reached = true;
        // The dial the next address is waiting on: its handshake is under way, so it waits longer.
        // Stryker disable next-line ConditionalExpression: with the timer already fired, pacing again only runs next() on an empty order, a no-op
        if (pacer === attempt && timer !== undefined) pace(attempt);
      };
      inflight++;
      if (probe) probeOut = true;
      const tracked = suspect && !suspectsOut.has(key);
      if (tracked) suspectsOut.add(key);
      const ended = (): void => {
        inflight--;
        if (probe) probeOut = false;
        if (tracked) suspectsOut.delete(key);
        if (--going.count === 0) out.delete(key);
      };
      const establish = (ctx: DialContext): Promise<C> => {
        whenReached(ctx, connected);
        return open(address, ctx);
      };
      dialWith(key, establish, { timeout, signal: controller.signal, breaker, clock, transport: options.transport }, dispose).then(
        (socket) => {
          going.since = clock.now(); // it answers: the dials still out to it are not a sign of it slow
          proven.add(key);
          ended();
          if (done) {
            dispose(socket); // a loser that connected after the winner: recorded, then closed
            return;
          }
          finish();
          resolveCall(socket);
        },
        (err: unknown) => {
          ended();
          if (done) return;
          if (err instanceof HostUnavailableError) refusals.push(err);
          else errors.push(err);
          // A side dial (a probe or a suspect) failing while a dial is out inside its attempt
          // delay hands nothing over: that dial goes on, and the next address joins when the
          // delay ends. (Handing over at once dialled a live sibling beside a live dial on every
          // call while a refusing address stayed suspect: a connection, or TLS handshake, wasted.)
          if ((probe || suspect) && timer !== undefined) return;
          next(); // a failure hands over at once, as happy eyeballs does
        },
      );
      return attempt;
    };

    if (signal?.aborted) {
      rejectCall(signal.reason);
      return;
    }
    if (signal !== undefined) onCallerAbort(signal, onAbort);
    next();
  });
}

/** One dial of a race: when it started, and whether its TCP has connected. */
interface Attempt {
  readonly key: string;
  readonly started: number;
  connected: boolean;
}

/**
 * Every address dialled failed: their errors in one AggregateError whose `code` is the first
 * one's, as raw `net.connect` with `autoSelectFamily` sets it (code checking `err.code ===
 * 'ECONNREFUSED'` found none).
 */
function eachFailed(name: string, errors: unknown[]): AggregateError {
  const err = new AggregateError(errors, `connect to ${name} failed on each of its ${errors.length} addresses dialled`);
  const code = errors.map((e) => (e as { code?: unknown } | null)?.code).find((c) => typeof c === 'string');
  if (code !== undefined) Object.assign(err, { code });
  // The name is refused once each address dialled is (the others were refused before any dial).
  return errors.every(leftHostRefusing) ? markLeftRefusing(err) : err;
}

function destroy(socket: net.Socket): void {
  socket.destroy();
}

/** TLS options for a dial to one address of `host`: SNI still carries the name. */
export function tlsForName(options: boolean | tls.ConnectionOptions | undefined, host: string): tls.ConnectionOptions | undefined {
  if (options === undefined || options === false) return undefined;
  const o = options === true ? {} : options;
  return o.servername === undefined ? { ...o, servername: host } : o;
}
