/**
 * The options of a {@link GrpcGuard}: what each one means, its default and why, and their checks
 * (once, at construction, each error naming the option).
 *
 * @module
 */
import type * as grpc from '@grpc/grpc-js';
import type net from 'node:net';
import type { Schedule } from '../../core/backoff.js';
import { type Clock, systemClock } from '../../core/clock.js';
import { checkDuration, checkFunction, checkInteger, checkKeepAlive, opt, show } from '../../core/validate.js';
import { containAnswer, warnOnce } from '../../core/warn-once.js';
import { DEFAULT_CONNECT_TIMEOUT } from '../../core/connect-timeout.js';
import { restartSpanningBackoff } from '../../core/restart-backoff.js';
import { DEFAULT_ATTEMPT_DELAY } from '../../guard/addresses.js';
import type { HostBreaker } from '../../guard/host-breaker.js';
import { breakerOption } from '../../guard/dial.js';
import { RetryBudget } from '../../retry/budget.js';
import { checkOptionNames, optionNames } from '../../core/option-names.js';

/** The option names a GrpcGuard's `retry` takes: any other is warned about (see checkOptionNames). */
const RETRY_OPTIONS = optionNames<GrpcRetryOptions>({ maxAttempts: true, backoff: true, budget: true, retryableStatusCodes: true });

/** The option names a GrpcGuard takes: any other is warned about (see checkOptionNames). */
const GUARD_OPTIONS = optionNames<GrpcGuardOptions>({ connectTimeout: true, breaker: true, keepAliveInterval: true, keepAliveTimeout: true, keepAliveWhileIdle: true, channelOptions: true, idleTimeout: true, sweepInterval: true, retiredRetries: true, closeTimeout: true, redialPace: true, replayBufferSize: true, idempotent: true, retry: true, hostOf: true, perAddress: true, lookup: true, attemptDelay: true, clock: true });

/** How guarded calls are retried (see {@link GrpcGuardOptions.retry}). */
export interface GrpcRetryOptions {
  /**
   * Most attempts of one call, the first included. Default 3: the first try and two retries ride
   * out a failover and a blip without tripling the load (as `retry()`).
   */
  maxAttempts?: number;
  /**
   * Wait before each retry. Default `restartSpanningBackoff`: 400-600 ms, then 800-1 200 ms
   * (jittered): the default three attempts span a 0.3-1 s server restart.
   */
  backoff?: Schedule;
  /**
   * The retry budget every call deposits into and every retry withdraws from. Default the
   * process-wide one (`sharedRetryBudget()`: retries at most 20 % of calls); `null` for none.
   */
  budget?: RetryBudget | null;
  /**
   * Statuses the server sent that an idempotent method may be retried on, as grpc-js's own
   * `retryPolicy.retryableStatusCodes`: codes (`grpc.status.UNAVAILABLE`) or their names
   * (`'UNAVAILABLE'`). As in grpc's retry design, only a status that came before any response
   * header or message (a trailers-only reply: the call was not committed), and the server may
   * veto or pace a retry with `grpc-retry-pushback-ms` (negative or malformed: no retry; a
   * number of ms: the wait before it). Never a non-idempotent method (see `idempotent`): a
   * status means the server ran the handler, or may have. Such a status never retires the
   * connection either. Default none: a status is the server's answer, and only the caller knows
   * which answers a second try may change. Not with grpc-js's own retry: a client whose
   * `grpc.service_config` holds a `retryPolicy` or `hedgingPolicy` (retries not turned off with
   * `'grpc.enable_retries': 0`) is refused with a TypeError, as the two would multiply.
   */
  retryableStatusCodes?: ReadonlyArray<grpc.status | StatusName>;
}

/** A grpc status name, as grpc-js's service config spells it (`'UNAVAILABLE'`). */
export type StatusName = keyof typeof grpc.status;

/** Options of a {@link GrpcGuard}; every one has a default. */
export interface GrpcGuardOptions {
  /**
   * Bound on establishing one channel (TCP + TLS + the HTTP/2 SETTINGS exchange), ms. grpc-js has
   * none of its own. Default 2 500 (`DEFAULT_CONNECT_TIMEOUT`, every entry point's): a live host connects in
   * milliseconds, a dead one costs 2.5 s a dial instead of the kernel's ~130 s, and a call's
   * three default attempts stay under 10 s.
   */
  connectTimeout?: number;
  /**
   * The breaker fed by every channel establishment (and nothing else). Default the process-wide
   * one (`sharedBreaker()`), so every client learns from every other; `null`: none.
   */
  breaker?: HostBreaker | null;
  /**
   * HTTP/2 PING interval, ms (`grpc.keepalive_time_ms`); 0 turns keep-alive off; at least 10
   * otherwise (a RangeError: a fraction of a ms was a PING every millisecond). Default 10 000
   * (seed 003): with the timeout below a silent peer is found within ~20 s, and a call may still
   * run for as long as its deadline allows. grpc-js sends none unless asked. A call still running
   * this long after its server's GOAWAY (a graceful drain) fails UNAVAILABLE: grpc-js reads the
   * PING node:http2 cancels on a draining connection as a dead one (grpc/grpc-node#3068); raise
   * it past such calls, or set 0, where servers drain long calls.
   */
  keepAliveInterval?: number;
  /** How long a PING may go unanswered before the connection is dropped, ms (`grpc.keepalive_timeout_ms`). Default 10 000 (seed 003). */
  keepAliveTimeout?: number;
  /**
   * PING while no call is active (`grpc.keepalive_permit_without_calls`). Default true (seed 003):
   * an idle channel whose peer vanished is found before the next call rides it.
   */
  keepAliveWhileIdle?: boolean;
  /**
   * grpc-js channel options for every channel (max message sizes, `grpc.default_authority`, ...).
   * A client's own options come on top, and explicit `grpc.keepalive_*` keys win over the three
   * options above. `grpc.use_local_subchannel_pool` is always 1: each pooled channel must own its
   * connection, or closing a dead one would hand the same dead connection to its replacement.
   * Default none.
   */
  channelOptions?: grpc.ChannelOptions;
  /** Close a channel no call has used for this long, ms. Default 600 000 (10 min, seed 003). */
  idleTimeout?: number;
  /** The idle sweep runs at most once per this many ms, on a call. Default 60 000 (seed 003). */
  sweepInterval?: number;
  /**
   * Times a call may go back for a fresh channel after a sibling retired the one under it, when
   * it can be resent unchanged (and, if it may have been sent, the channel had served a call
   * before: see ConnectionPoolOptions.retiredRetries). Default 3 (seed 003: outright failures fell geometrically over three
   * turns while the extra connections stopped growing after the second).
   */
  retiredRetries?: number;
  /** How long `close()` lets calls in flight finish before ending them, ms. Default 5 000. */
  closeTimeout?: number;
  /**
   * The longest wait between a target's failed connect and its next one, ms (see
   * ConnectionPoolOptions.redialPace): 10 ms, doubling per failure in a row up to this. Default 250.
   */
  redialPace?: number;
  /**
   * Bytes of request messages a call keeps so it can be resent on a fresh channel (only until the
   * server answers anything). Default 262 144 (256 KiB): every unary request and most short
   * streams fit, and a long upload is not held in memory twice; past it a call is not resent.
   */
  replayBufferSize?: number;
  /**
   * Which methods (full path, `/package.Service/Method`) may run twice without harm. A call of
   * one whose connection died under it is resent, each send counted in `retry.maxAttempts` (never
   * with `retry: false`); other calls are only resent when the server certainly never saw them. Default none: grpc cannot tell. Called synchronously: only `true`
   * is a yes; any other answer (a promise from an `async` function, `'true'`, `1`) is a no, as is a
   * throw (the safe side), each with a process warning the first time: it never fails or strands
   * a call.
   */
  idempotent?: (method: string) => boolean;
  /**
   * Retries, with `retry()`'s rule (a failure the server never saw, for any call; one it may have
   * seen, for an idempotent method; never a refusal by the breaker or a status the server sent),
   * jittered backoff and retry budget. Every attempt gets what remains of the call's deadline, and
   * a call is retried only until the server answers it (streaming calls included). `maxAttempts`
   * counts every send of a call that may have run, the pool's resend on a fresh channel included.
   * `false` leaves retrying to the caller: a call that may have run is never sent again (a call
   * the server certainly never saw, say one a GOAWAY excluded, still goes to a fresh channel).
   * Default `{}`.
   */
  retry?: GrpcRetryOptions | false;
  /**
   * Maps a channel's target to its breaker key. Default {@link grpcHostKey}: `dns:///h:p`,
   * `h:p`, `ipv4:a:p` all become `h:p`. For a name dialled per address (`perAddress`) this is the
   * name's own entry (its lookups, and the refusal when every address is open); each address is
   * keyed `address:port`. One that throws (or answers no string) fails the call INTERNAL with
   * its error as `cause`: a bug of the caller's, never an outage to retry.
   */
  hostOf?: (target: string) => string;
  /**
   * Guard each address of a target's name apart (default `true`): a target naming a DNS name
   * (`name:port`, `dns:///name:port`) is resolved by the guard (with `lookup`), each address is
   * dialled as a channel of its own and recorded against its own breaker entry (`address:port`),
   * open addresses are skipped, and the target is refused only when every address is open (the
   * refusal's `addresses` holds each one's). Why: one dead pod or record must neither cost every
   * connect a timeout nor open the name for its live siblings. Targets grpc-js must resolve itself
   * (another scheme, a DNS server named, a proxy from the environment) stay guarded by name, as
   * with `false`, and so do targets whose `grpc.service_config` picks a load-balancing policy
   * other than `pick_first` (`round_robin` spreads calls over the name's addresses in one channel,
   * which per-address channels would defeat). Calls still carry the name as `:authority`, and TLS checks it. A service config
   * published in DNS TXT records (grpc-js's resolver reads them) is not read per address: give it
   * as `grpc.service_config`, or set `false`.
   */
  perAddress?: boolean;
  /**
   * Resolves target names for per-address dialing, as `net.connect`'s `lookup` (called with
   * `all: true`; an answer of one address is taken too). Default `dns.lookup`: what grpc-js's own
   * DNS resolver calls, so the addresses are the ones grpc-js would have dialled.
   */
  lookup?: net.LookupFunction;
  /**
   * With `perAddress`, ms before the next address is dialled beside one that is not READY yet.
   * Default 250 (Node's and RFC 8305's happy-eyeballs delay): a live address connects within it,
   * so a dead one costs a connect at most this, and only until its entry opens.
   */
  attemptDelay?: number;
  /** Time source for timeouts, deadlines, idleness and backoff. Default the system clock. */
  clock?: Clock;
}

/** Options resolved: defaults applied, values checked. */
export interface GrpcSettings {
  connectTimeout: number;
  breaker: HostBreaker | null;
  channelOptions: grpc.ChannelOptions;
  idleTimeout: number | undefined;
  sweepInterval: number | undefined;
  retiredRetries: number | undefined;
  closeTimeout: number | undefined;
  redialPace: number | undefined;
  replayBufferSize: number;
  idempotent: (method: string) => boolean;
  retry: (Required<Pick<GrpcRetryOptions, 'maxAttempts'>> & Omit<GrpcRetryOptions, 'maxAttempts' | 'retryableStatusCodes'> & { statuses: ReadonlySet<number> }) | false;
  hostOf: ((target: string) => string) | undefined;
  perAddress: boolean;
  lookup: net.LookupFunction | undefined;
  attemptDelay: number;
  clock: Clock;
}

const never = (): boolean => false;

function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${show(value)}`);
  return value;
}

/** The grpc-js reconnect backoff options {@link checkChannelOptions} bounds. */
const RECONNECT_BACKOFF_KEYS = ['grpc.initial_reconnect_backoff_ms', 'grpc.max_reconnect_backoff_ms'] as const;

/**
 * Checks the grpc-js channel options a channel would be made with (`where` names them in the
 * error): each reconnect backoff (`grpc.initial_reconnect_backoff_ms`,
 * `grpc.max_reconnect_backoff_ms`), when given, must be a duration of 1 ms to 2^31-1 ms. Raw
 * grpc-js takes a negative one as given and its backoff never grows past it: it redialled a peer
 * that resets 870 times in a second (seed 001's spiral), its timers throwing unhandled rejections.
 * One past 2^31-1 ms fires at once (Node's timers); 0 becomes grpc-js's 1 s default. The guard's
 * connector fell back to that default for all of them: silently not what the user set.
 *
 * @throws TypeError/RangeError naming the option.
 */
export function checkChannelOptions(where: string, options: grpc.ChannelOptions): void {
  for (const key of RECONNECT_BACKOFF_KEYS) {
    const value: unknown = options[key];
    if (value !== undefined) checkDuration(`${where}['${key}']`, value, 1);
  }
}

/**
 * Applies the defaults and checks every option.
 *
 * @throws TypeError/RangeError naming the option and the bad value.
 */
export function grpcSettings(options: GrpcGuardOptions): GrpcSettings {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
  checkOptionNames('GrpcGuard', options, GUARD_OPTIONS);
  if (typeof options.retry === 'object') checkOptionNames('GrpcGuard retry', options.retry, RETRY_OPTIONS);
  const interval = checkKeepAlive('keepAliveInterval', opt(options.keepAliveInterval, 10_000));
  const timeout = checkDuration('keepAliveTimeout', opt(options.keepAliveTimeout, 10_000), 1);
  const whileIdle = opt(options.keepAliveWhileIdle, true);
  if (typeof whileIdle !== 'boolean') throw new TypeError(`keepAliveWhileIdle must be a boolean, got ${show(whileIdle)}`);
  const extra = opt(options.channelOptions, {});
  if (typeof extra !== 'object' || extra === null) throw new TypeError(`channelOptions must be an object, got ${show(extra)}`);
  checkChannelOptions('channelOptions', extra);
  const keepAlive: grpc.ChannelOptions =
    interval > 0
      ? { 'grpc.keepalive_time_ms': interval, 'grpc.keepalive_timeout_ms': timeout, 'grpc.keepalive_permit_without_calls': whileIdle ? 1 : 0 }
      : {};
  const clock = opt(options.clock, systemClock);
  checkFunction('clock.now', clock?.now);
  checkFunction('clock.setTimeout', clock.setTimeout);
  checkFunction('clock.clearTimeout', clock.clearTimeout);
  return {
    connectTimeout: checkDuration('connectTimeout', opt(options.connectTimeout, DEFAULT_CONNECT_TIMEOUT), 1),
    breaker: breakerOption(options.breaker),
    channelOptions: { ...keepAlive, ...extra },
    // The pool checks and defaults these itself; passed through as given.
    idleTimeout: options.idleTimeout,
    sweepInterval: options.sweepInterval,
    retiredRetries: options.retiredRetries,
    closeTimeout: options.closeTimeout,
    redialPace: options.redialPace,
    replayBufferSize: checkInteger('replayBufferSize', opt(options.replayBufferSize, 262_144), 0),
    idempotent: guardedPredicate(checkFunction<(method: string) => boolean>('idempotent', opt(options.idempotent, never))),
    retry: retrySettings(options.retry),
    hostOf: options.hostOf === undefined ? undefined : checkFunction<(target: string) => string>('hostOf', options.hostOf),
    perAddress: checkBoolean('perAddress', opt(options.perAddress, true)),
    lookup: options.lookup === undefined ? undefined : checkFunction<net.LookupFunction>('lookup', options.lookup),
    attemptDelay: checkDuration('attemptDelay', opt(options.attemptDelay, DEFAULT_ATTEMPT_DELAY)),
    clock,
  };
}

/**
 * The user's `idempotent`, made safe to call from anywhere in a call's life (inside a promise
 * chain, a timer): only `true` is a yes. A throw answers false, never resending anything on a
 * guess, and is reported once as a process warning rather than as an unhandled rejection or a
 * call that never ends. Any answer but a boolean is a no, reported once: read as truthy, an
 * `async` predicate's promise (or `'false'`) made every method idempotent, and a server ran a
 * non-idempotent handler twice (an outside review); its rejection is the predicate's throw.
 */
function guardedPredicate(idempotent: (method: string) => boolean): (method: string) => boolean {
  if (idempotent === never) return never;
  const threw = "the grpc guard's idempotent() threw, so the method was taken as not idempotent";
  return (method) => {
    try {
      const answer: unknown = idempotent(method);
      if (typeof answer === 'boolean') return answer;
      containAnswer(threw, idempotent, answer); // a rejection is a throw, reported once with it
      warnOnce("the grpc guard's idempotent() answered neither true nor false, so the method was taken as not idempotent", idempotent, show(answer));
      return false;
    } catch (err) {
      warnOnce(threw, idempotent, err);
      return false;
    }
  };
}

function retrySettings(retry: GrpcRetryOptions | false | undefined): GrpcSettings['retry'] {
  if (retry === false) return false;
  const r = opt<GrpcRetryOptions>(retry, {});
  if (typeof r !== 'object' || r === null) throw new TypeError(`retry must be an object or false, got ${show(r)}`);
  if (r.backoff !== undefined) checkFunction('retry.backoff', r.backoff);
  if (r.budget !== undefined && r.budget !== null && !(r.budget instanceof RetryBudget)) {
    throw new TypeError(`retry.budget must be a RetryBudget or null, got ${show(r.budget)}`);
  }
  const { retryableStatusCodes, ...rest } = r;
  return {
    ...rest,
    backoff: opt<Schedule>(r.backoff, restartSpanningBackoff),
    maxAttempts: checkInteger('retry.maxAttempts', opt(r.maxAttempts, 3), 1),
    statuses: statusCodes(retryableStatusCodes),
  };
}

/**
 * Whether channel options make grpc-js retry or hedge calls itself: a `grpc.service_config` with
 * a `retryPolicy` or `hedgingPolicy` in any method config, and retries not turned off
 * (`grpc.enable_retries: 0`). A service config that does not parse is grpc-js's to refuse. One
 * that grpc-js resolves itself (a DNS TXT record, unless `grpc.service_config_disable_resolution`)
 * is not seen here.
 */
export function serviceConfigRetries(options: Readonly<Record<string, unknown>>): boolean {
  if (options['grpc.enable_retries'] === 0) return false;
  return methodConfigs(options)?.some((m) => 'retryPolicy' in m || 'hedgingPolicy' in m) === true;
}

/**
 * The method configs (objects) of channel options' `grpc.service_config`; undefined when there is
 * none, or it does not parse (grpc-js's to refuse).
 */
export function methodConfigs(options: Readonly<Record<string, unknown>>): object[] | undefined {
  const config = options['grpc.service_config'];
  if (typeof config !== 'string') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(config);
  } catch {
    return undefined;
  }
  const methods = (parsed as { methodConfig?: unknown } | null)?.methodConfig;
  return Array.isArray(methods) ? methods.filter((m: unknown): m is object => typeof m === 'object' && m !== null) : undefined;
}

/** grpc status names by code, built from the names alone (grpc-js is only a type import here). */
const STATUS_NAMES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS',
  'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE',
  'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED',
] as const;

/** `retry.retryableStatusCodes` as a set of codes; OK and anything not a grpc status are refused. */
function statusCodes(codes: unknown): ReadonlySet<number> {
  const name = 'retry.retryableStatusCodes';
  if (codes === undefined) return new Set();
  if (!Array.isArray(codes)) throw new TypeError(`${name} must be an array of grpc status codes or names, got ${show(codes)}`);
  const set = new Set<number>();
  for (const code of codes as unknown[]) {
    const n = typeof code === 'string' ? (STATUS_NAMES as readonly string[]).indexOf(code.toUpperCase()) : code;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n >= STATUS_NAMES.length) {
      throw new RangeError(`${name} must hold grpc status codes 1-16 or their names (not OK), got ${show(code)}`);
    }
    set.add(n);
  }
  return set;
}
