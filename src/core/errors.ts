/**
 * dialguard's errors. Every one is a class with a stable `code`; callers branch on `code` or
 * `instanceof`, never on the message. `instanceof` works across two copies of the package (a
 * brand from `Symbol.for`, as undici does), and the error that caused one stays as `cause`.
 *
 * @module
 */
import type { Clock } from './clock.js';

/** Stable codes of every error dialguard throws. */
export const ErrorCodes = {
  HOST_UNAVAILABLE: 'DIALGUARD_HOST_UNAVAILABLE',
  CONNECT_TIMEOUT: 'DIALGUARD_CONNECT_TIMEOUT',
  CONNECTION_GONE: 'DIALGUARD_CONNECTION_GONE',
  POOL_CLOSED: 'DIALGUARD_POOL_CLOSED',
  REQUEST_TIMEOUT: 'DIALGUARD_REQUEST_TIMEOUT',
  DEADLINE_EXCEEDED: 'DIALGUARD_DEADLINE_EXCEEDED',
  RETRIES_EXHAUSTED: 'DIALGUARD_RETRIES_EXHAUSTED',
  RETRY_BUDGET_EXHAUSTED: 'DIALGUARD_RETRY_BUDGET_EXHAUSTED',
  NO_SERVER_AVAILABLE: 'DIALGUARD_NO_SERVER_AVAILABLE',
  KEEPALIVE_TIMEOUT: 'DIALGUARD_KEEPALIVE_TIMEOUT',
  TRANSPORT_CLOSED: 'DIALGUARD_TRANSPORT_CLOSED',
  CLIENT_CERTIFICATE_REJECTED: 'DIALGUARD_CLIENT_CERTIFICATE_REJECTED',
} as const;

/** One of {@link ErrorCodes}' values. */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

const kBrand = Symbol.for('dialguard.error');
/** On each of dialguard's own error classes: the class itself (a caller's subclass inherits its parent's). */
const kBranded = Symbol('dialguard.branded');

/** Marks `cls.prototype` so `instanceof cls` holds for instances made by any copy of the package. */
function brand(cls: { prototype: object; brand: symbol }): void {
  Object.defineProperty(cls.prototype, cls.brand, { value: true });
  Object.defineProperty(cls, kBranded, { value: cls });
}

/** Base class of every dialguard error. */
export class DialguardError extends Error {
  /** The brand `instanceof` checks; each subclass has its own. */
  static readonly brand: symbol = kBrand;

  /**
   * Checks the brand rather than the prototype chain, so two copies of dialguard agree. A
   * caller's own subclass (`class MyTimeout extends ConnectTimeoutError`) has no brand of its own
   * and is checked by its prototype chain: it inherited its parent's, so every
   * ConnectTimeoutError was taken for a MyTimeout.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if ((this as { [kBranded]?: unknown })[kBranded] !== this) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[this.brand] === true;
  }

  /** Stable machine-readable code, one of {@link ErrorCodes}. */
  readonly code: ErrorCode;

  /**
   * True when retrying the same operation cannot help (a retry loop stops at once). Only a
   * refusal by the breaker is permanent: it would be refused again.
   */
  get permanent(): boolean {
    return false;
  }

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
brand(DialguardError);

/** Where a {@link HostUnavailableError} keeps when it may be retried, and its clock. */
const kRetryAt = Symbol('retryAt');
const kNow = Symbol('now');

/** The state a refusing host was in. */
export type RefusedState = 'open' | 'half-open';

/** What a refusal knows about why the host is refused; see {@link HostUnavailableError}. */
export interface RefusalDetails {
  /** Consecutive failed dial rounds counted against the host. */
  failures?: number;
  /** The dial error that opened the host (or kept it open): the refusal's `cause`. */
  cause?: unknown;
  /** An operator isolated the host (`HostBreaker.isolate`); no dial failed. */
  isolated?: boolean;
  /** A name guarded per address (`connect()`): the refusal of each address it resolves to. */
  addresses?: readonly HostUnavailableError[];
}

/**
 * A {@link HostBreaker} refused to dial `host`: its dials failed for too long (or an operator
 * isolated it) and it is being left alone for a while. Thrown without any I/O. Permanent for a
 * retry loop: every attempt against the same host would be refused the same way. `cause` is the
 * dial error that opened the host or kept it open.
 *
 * One instance stands for one refusal window of one host: the breaker throws the same instance
 * to every caller it refuses in that window (so a refusal costs a map lookup, not an Error
 * allocation and stack capture). Treat it as read-only; `retryAfter` is computed on each read.
 */
export class HostUnavailableError extends DialguardError {
  /** Always `DIALGUARD_HOST_UNAVAILABLE`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.HOST_UNAVAILABLE;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.HOST_UNAVAILABLE}`);
  /** The breaker's key for the host (normalised `host:port`). */
  readonly host: string;
  /** Why it was refused: open (waiting out its window or isolated) or half-open (a probe is out). */
  readonly state: RefusedState;
  /** Consecutive failed dial rounds behind the refusal (0 when isolated or unknown). */
  readonly failures: number;
  /** Whether an operator isolated the host. */
  readonly isolated: boolean;
  /**
   * For a name whose addresses are guarded apart (`connect()`): each address's own refusal, in
   * the order the name resolved to them (every one of them is refused). Undefined otherwise.
   */
  readonly addresses: readonly HostUnavailableError[] | undefined;
  // Own properties, not private fields (`#retryAt`): a copy of a refusal (a call that may have
  // been sent ends with a copy of its last attempt's error that does not say "not sent") is made
  // from its own property descriptors, and reading a copy's `retryAfter` threw "Cannot read
  // private member" (an outside review, r147: a GrpcGuard client's process crashed during a 3 s
  // outage). Non-enumerable, so they stay out of what the error prints.
  declare private readonly [kRetryAt]: number;
  declare private readonly [kNow]: () => number;

  /**
   * @param retryAfter - ms from now until the host may be dialled again.
   * @param clock - the clock `retryAfter` counts down on (default: a fixed value).
   * @param details - the failures and the dial error behind the refusal.
   */
  constructor(host: string, retryAfter: number, state: RefusedState, clock?: Pick<Clock, 'now'>, details: RefusalDetails = {}) {
    const failures = details.failures ?? 0;
    const isolated = details.isolated === true;
    const wait = Number.isFinite(retryAfter) ? `in ${Math.max(0, Math.ceil(retryAfter))} ms` : 'when released';
    let why: string;
    if (details.addresses !== undefined) why = `every address it resolves to is refused: ${details.addresses.map((a) => `${a.host} ${a.state}`).join(', ')}`;
    else if (isolated) why = 'isolated by an operator';
    else if (state === 'open') why = `${failures} consecutive failed dial round(s), last error ${describe(details.cause)}`;
    else why = `a probe dial is deciding whether it is back; last error ${describe(details.cause)}`;
    const next = isolated ? `dials resume ${wait}` : state === 'open' ? `a probe may run ${wait}` : `retry ${wait}`;
    super(ErrorCodes.HOST_UNAVAILABLE, `${host} is unavailable (${why}); refused without dialling; ${next}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.host = host;
    this.state = state;
    this.failures = failures;
    this.isolated = isolated;
    this.addresses = details.addresses;
    const now = clock === undefined ? () => 0 : () => clock.now();
    Object.defineProperty(this, kNow, { value: now });
    Object.defineProperty(this, kRetryAt, { value: now() + retryAfter });
  }

  override get permanent(): boolean {
    return true;
  }

  /**
   * Whole milliseconds until the host may be dialled again, at the latest: when its open window
   * ends, or when the outstanding probe's report is due (rounded up). Never negative; `Infinity`
   * while isolated without an end.
   */
  get retryAfter(): number {
    return Math.max(0, Math.ceil(this[kRetryAt] - this[kNow]()));
  }
}
brand(HostUnavailableError);

/** The stage of establishing a connection that did not finish in time. */
export type ConnectPhase = 'lookup' | 'tcp' | 'tls' | 'handshake' | (string & {});

/**
 * Establishing a connection (TCP connect, TLS handshake and any protocol handshake, together)
 * took longer than `timeout`. Counted by the breaker as a failed dial.
 */
export class ConnectTimeoutError extends DialguardError {
  /** Always `DIALGUARD_CONNECT_TIMEOUT`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.CONNECT_TIMEOUT;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.CONNECT_TIMEOUT}`);
  /** The dialled host, as `host:port`. */
  readonly host: string;
  /** The bound that was exceeded, in milliseconds. */
  readonly timeout: number;
  /** Which stage stalled. */
  readonly phase: ConnectPhase;

  constructor(host: string, timeout: number, phase: ConnectPhase, options?: { cause?: unknown }) {
    super(ErrorCodes.CONNECT_TIMEOUT, `connect to ${host} timed out after ${timeout} ms (stalled in ${phase})`, options);
    this.host = host;
    this.timeout = timeout;
    this.phase = phase;
  }
}
brand(ConnectTimeoutError);

/**
 * The connection a request was riding died (its transport failed, or a sibling request proved it
 * dead), so the request was released at once instead of waiting for its own timeout.
 */
export class ConnectionGoneError extends DialguardError {
  /** Always `DIALGUARD_CONNECTION_GONE`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.CONNECTION_GONE;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.CONNECTION_GONE}`);
  /** The connection's target. */
  readonly target: string;
  /** The identity of the connection that died. */
  readonly connectionId: number;

  constructor(target: string, connectionId: number, options?: { cause?: unknown }) {
    super(ErrorCodes.CONNECTION_GONE, `connection #${connectionId} to ${target} is gone`, options);
    this.target = target;
    this.connectionId = connectionId;
  }
}
brand(ConnectionGoneError);

/**
 * A keep-alive PING went unanswered: the peer went silent with the connection still open (a
 * frozen host, a dropped route). The connection is dead; everything riding it is released.
 */
export class KeepAliveTimeoutError extends DialguardError {
  /** Always `DIALGUARD_KEEPALIVE_TIMEOUT`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.KEEPALIVE_TIMEOUT;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.KEEPALIVE_TIMEOUT}`);
  /** How often PINGs were sent, and how long this one waited, in ms. */
  readonly interval: number;
  readonly timeout: number;
  constructor(interval: number, timeout: number) {
    super(ErrorCodes.KEEPALIVE_TIMEOUT, `keep-alive PING unanswered for ${timeout} ms (sent every ${interval} ms): peer is silent`);
    this.interval = interval;
    this.timeout = timeout;
  }
}
brand(KeepAliveTimeoutError);

/**
 * A connection's transport closed (reset, EOF, the peer went away) while it was in use: the
 * connection is dead, not draining. What a connector reports to the pool as the cause.
 */
export class TransportClosedError extends DialguardError {
  /** Always `DIALGUARD_TRANSPORT_CLOSED`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.TRANSPORT_CLOSED;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.TRANSPORT_CLOSED}`);
  /** The connection's target. */
  readonly target: string;
  /**
   * Closed before its protocol's handshake finished (an HTTP/2 peer hanging up before its
   * SETTINGS): no request was ever sent on it, so `classify` calls it a dial that may pass.
   */
  readonly handshake: boolean;
  constructor(target: string, what = 'connection', options?: { cause?: unknown; handshake?: boolean }) {
    super(ErrorCodes.TRANSPORT_CLOSED, `the ${what} to ${target} closed`, options);
    this.target = target;
    this.handshake = options?.handshake === true;
  }
}
brand(TransportClosedError);

/**
 * The server hung up right after a TLS handshake in which it asked for this client's certificate
 * and the client sent one, before sending a byte of its own: it most likely rejected the
 * certificate (expired, not signed by a CA it trusts). Node's TLS servers check a client's
 * certificate after the handshake and destroy the connection with no alert under TLS 1.3, so
 * the client sees only a close, which looked like a dead host: one client's bad certificate got
 * the host refused for every client on the breaker (an outside review). The server answered (it
 * presented its certificate and asked for ours), so the dial is never counted against it, and
 * the same certificate gets the same answer: never retried (`classify`: a `dial`, not transient).
 */
export class ClientCertificateRejectedError extends DialguardError {
  /** Always `DIALGUARD_CLIENT_CERTIFICATE_REJECTED`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.CLIENT_CERTIFICATE_REJECTED;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.CLIENT_CERTIFICATE_REJECTED}`);
  /** What was dialled (an origin, a host:port or a grpc target). */
  readonly target: string;
  constructor(target: string, options?: { cause?: unknown }) {
    super(
      ErrorCodes.CLIENT_CERTIFICATE_REJECTED,
      `${target} closed the connection right after a TLS handshake in which it asked for this client's certificate, before answering: it most likely rejected the certificate (expired, or not signed by a CA it trusts)`,
      options,
    );
    this.target = target;
  }
}
brand(ClientCertificateRejectedError);

/** The pool (or client) was closed; it takes no new requests. */
export class PoolClosedError extends DialguardError {
  /** Always `DIALGUARD_POOL_CLOSED`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.POOL_CLOSED;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.POOL_CLOSED}`);
  constructor(what = 'pool') {
    super(ErrorCodes.POOL_CLOSED, `${what} is closed`);
  }
}
brand(PoolClosedError);

/** One request took longer than its own timeout. Says nothing about the connection it used. */
export class RequestTimeoutError extends DialguardError {
  /** Always `DIALGUARD_REQUEST_TIMEOUT`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.REQUEST_TIMEOUT;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.REQUEST_TIMEOUT}`);
  /** The bound that was exceeded, in milliseconds. */
  readonly timeout: number;
  constructor(timeout: number, options?: { cause?: unknown }) {
    super(ErrorCodes.REQUEST_TIMEOUT, `request timed out after ${timeout} ms`, options);
    this.timeout = timeout;
  }
}
brand(RequestTimeoutError);

/**
 * The caller's overall deadline passed. Distinct from the caller aborting its own signal (that
 * rejects with the signal's reason).
 */
export class DeadlineExceededError extends DialguardError {
  /** Always `DIALGUARD_DEADLINE_EXCEEDED`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.DEADLINE_EXCEEDED;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.DEADLINE_EXCEEDED}`);
  /** The overall budget that was spent, in milliseconds. */
  readonly timeout: number;
  /** Attempts started before the deadline passed. */
  readonly attempts: number;
  /**
   * When the call ended before its deadline because the next attempt could not start before it
   * (the wait a retry needs would end past it): the milliseconds that were left. Undefined: the
   * deadline had passed.
   */
  readonly left: number | undefined;
  /**
   * @param options.left - given when the deadline had not passed yet but the next attempt could
   *   not start before it (see {@link DeadlineExceededError.left}); `options.wait` is the wait it needed.
   */
  constructor(timeout: number, attempts: number, options?: { cause?: unknown; left?: number; wait?: number }) {
    // Whole milliseconds in the text (a budget computed from clock readings read "299.87654 ms" in
    // a gRPC status's details); `timeout` keeps the exact figure.
    const ms = (v: number): string => String(Number.isFinite(v) ? Math.round(v) : v);
    const left = options?.left;
    // "Exceeded" at 0 ms of a 200 ms deadline read as a bug (an outside review): say what happened.
    const what = left === undefined ? 'exceeded' : `would pass before the next attempt (${ms(left)} ms left, the wait before it ${ms(options?.wait ?? Infinity)} ms)`;
    super(ErrorCodes.DEADLINE_EXCEEDED, `deadline of ${ms(timeout)} ms ${what} after ${attempts} attempt(s)`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.timeout = timeout;
    this.attempts = attempts;
    this.left = left;
  }
}
brand(DeadlineExceededError);

/** Every attempt a retry loop was allowed failed; `errors` holds each attempt's error, in order. */
export class RetriesExhaustedError extends DialguardError {
  /** Always `DIALGUARD_RETRIES_EXHAUSTED`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.RETRIES_EXHAUSTED;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.RETRIES_EXHAUSTED}`);
  /** Each attempt's error, first to last. The last one is also `cause`. */
  readonly errors: readonly unknown[];
  constructor(errors: readonly unknown[], reason: string) {
    super(ErrorCodes.RETRIES_EXHAUSTED, `gave up after ${errors.length} attempt(s): ${reason}`, {
      cause: errors[errors.length - 1],
    });
    this.errors = errors;
  }
}
brand(RetriesExhaustedError);

/**
 * A retry was wanted but the shared retry budget had no token left: the fleet is already retrying
 * as much as it is allowed to, so this call fails with its last error as `cause`.
 */
export class RetryBudgetExhaustedError extends DialguardError {
  /** Always `DIALGUARD_RETRY_BUDGET_EXHAUSTED`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.RETRY_BUDGET_EXHAUSTED;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.RETRY_BUDGET_EXHAUSTED}`);
  constructor(options?: { cause?: unknown }) {
    super(ErrorCodes.RETRY_BUDGET_EXHAUSTED, 'retry budget exhausted; not retrying', options);
  }
}
brand(RetryBudgetExhaustedError);

/** Every server of a set is refused by its breaker (or failed), so the call failed fast. */
export class NoServerAvailableError extends DialguardError {
  /** Always `DIALGUARD_NO_SERVER_AVAILABLE`: narrows `code` after `instanceof`, and in a `switch` on it. */
  declare readonly code: typeof ErrorCodes.NO_SERVER_AVAILABLE;
  static override readonly brand: symbol = Symbol.for(`dialguard.error.${ErrorCodes.NO_SERVER_AVAILABLE}`);
  /** Milliseconds until the earliest server may be dialled again. */
  readonly retryAfter: number;
  constructor(servers: number, retryAfter: number, options?: { cause?: unknown }) {
    super(
      ErrorCodes.NO_SERVER_AVAILABLE,
      `none of ${servers} server(s) is available; earliest retry in ${Math.ceil(retryAfter)} ms`,
      options,
    );
    this.retryAfter = retryAfter;
  }
}
brand(NoServerAvailableError);

/** `code` (or, lacking one, the name) of an error, for messages; `unknown` when there is none. */
function describe(err: unknown): string {
  // A string code (ECONNREFUSED, DIALGUARD_CONNECT_TIMEOUT) names a failure best; a gRPC status
  // error carries only a number (14), so look a few causes down for the errno under it first.
  let node: unknown = err;
  let fallback: string | undefined;
  for (let depth = 0; depth < 4 && typeof node === 'object' && node !== null; depth++) {
    // Each field on its own: a getter that throws (a hostile or revoked object) loses only that
    // field, never a code already read (a throwing `cause` just ends the walk here).
    const code = read(node, 'code');
    const name = read(node, 'name');
    if (typeof code === 'string' && code !== '') return code;
    if (fallback === undefined && typeof code === 'number') fallback = `${typeof name === 'string' ? name : 'code'} ${code}`;
    else if (fallback === undefined && typeof name === 'string') fallback = name;
    node = read(node, 'cause');
  }
  return fallback ?? 'unknown';
}

/**
 * How far {@link findError} (and `classify`) look into what an error wraps: at most this many
 * causes deep... Real chains are a few levels (`fetch failed` -> a dialguard error -> an errno);
 * the bound only stops a hostile or cyclic chain from costing more than a short one.
 */
export const MAX_CHAIN_DEPTH = 32;
/** ...and at most this many errors in all (an AggregateError fans out). */
export const MAX_CHAIN_NODES = 64;
/** ...reading at most this many members of one AggregateError. */
export const MAX_CHAIN_MEMBERS = 16;

/** `obj[key]`, or undefined when reading it throws (a hostile getter, a revoked Proxy). */
function read(obj: object, key: PropertyKey): unknown {
  try {
    return (obj as Record<PropertyKey, unknown>)[key];
  } catch {
    // Nothing to read.
  }
  return undefined;
}

/**
 * The first error of class `cls` on `err`'s chain: `err` itself, then what it wraps (`cause`,
 * and the members of an AggregateError), depth first, within {@link MAX_CHAIN_DEPTH} causes and
 * {@link MAX_CHAIN_NODES} errors. This is how dialguard recognises its own errors wherever they
 * arrive: `fetch` wraps a refusal in `TypeError('fetch failed', { cause })`, and `instanceof` on
 * the outer error alone would miss it. Never throws, whatever `err` is (cycles, hostile getters).
 */
export function findError<T>(err: unknown, cls: abstract new (...args: never[]) => T): T | undefined {
  return findInChain(err, (node) => node instanceof cls) as T | undefined;
}

/** The first value on `err`'s chain that passes `test` (see {@link findError} for the walk). */
function findInChain(err: unknown, test: (node: object) => boolean): object | undefined {
  const seen = new Set<unknown>();
  const visit = (node: unknown, depth: number): object | undefined => {
    if (depth >= MAX_CHAIN_DEPTH || seen.size >= MAX_CHAIN_NODES || seen.has(node)) return undefined;
    if ((typeof node !== 'object' && typeof node !== 'function') || node === null) return undefined;
    seen.add(node);
    try {
      if (test(node)) return node;
    } catch {
      // A Proxy whose getPrototypeOf or a getter throws: not one of ours.
    }
    const members = read(node, 'errors');
    let aggregate = false;
    try {
      // As classify reads one: by name, or a subclass of AggregateError, with an array of members.
      aggregate = (read(node, 'name') === 'AggregateError' || node instanceof AggregateError) && Array.isArray(members);
    } catch {
      // A Proxy whose getPrototypeOf throws, a revoked one: no members.
    }
    if (aggregate) {
      const n = Math.min(MAX_CHAIN_MEMBERS, Number(read(members as object, 'length')) || 0);
      for (let i = 0; i < n; i++) {
        const found = visit(read(members as object, i), depth + 1);
        if (found !== undefined) return found;
      }
    }
    return visit(read(node, 'cause'), depth + 1);
  };
  return visit(err, 0);
}

/**
 * True when `err`, or an error it wraps (see {@link findError}), is a dialguard error saying
 * that retrying the same operation cannot help (a breaker's refusal, even inside `fetch failed`).
 */
export function isPermanent(err: unknown): boolean {
  return findInChain(err, (node) => node instanceof DialguardError && node.permanent) !== undefined;
}

/**
 * True when `err` itself is one of dialguard's errors, typed as {@link AnyDialguardError} so a
 * `switch (err.code)` narrows it: `catch (err) { if (isDialguardError(err)) switch (err.code) {
 * case 'DIALGUARD_HOST_UNAVAILABLE': err.retryAfter } }`. `instanceof DialguardError` gives the
 * base class, whose `code` narrows nothing (an outside review: no way there from `unknown`
 * without a cast). Wrapped errors are not looked for: see {@link findError}.
 */
export function isDialguardError(err: unknown): err is AnyDialguardError {
  return err instanceof DialguardError;
}

/**
 * Every error class of dialguard's, as a union discriminated by `code`: a `switch (err.code)` on
 * one narrows `err` to its class (`case 'DIALGUARD_HOST_UNAVAILABLE': err.retryAfter`); from a
 * `catch`, through {@link isDialguardError}.
 */
export type AnyDialguardError =
  | HostUnavailableError
  | ConnectTimeoutError
  | ConnectionGoneError
  | KeepAliveTimeoutError
  | TransportClosedError
  | ClientCertificateRejectedError
  | PoolClosedError
  | RequestTimeoutError
  | DeadlineExceededError
  | RetriesExhaustedError
  | RetryBudgetExhaustedError
  | NoServerAvailableError;
