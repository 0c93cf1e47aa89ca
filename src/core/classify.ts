/**
 * One place that decides what an error means: what kind of failure it was, whether the request
 * certainly never reached the server, whether the connection it rode is dead, and whether trying
 * again may help. The pool drops connections by it, the breaker counts dials by it, and the retry
 * loop decides by it, so they never disagree.
 *
 * `classify` walks the error and what it wraps (`Error.cause`, `AggregateError.errors` as Node's
 * happy-eyeballs connect throws, undici's `fetch failed`, grpc-js statuses) and lets the most
 * specific error decide: an errno code deep in the chain beats a wrapper's vague message. It never
 * throws and never hangs, whatever it is given: cycles, 10 000-deep chains, throwing getters,
 * revoked proxies, megabyte messages, non-Error throwables.
 *
 * @module
 */
import { containAnswer, warnOnce } from './warn-once.js';
import {
  type Facts,
  type Verdict,
  factsOf,
  intIn,
  patternVerdict,
  safeGet,
  structuralVerdict,
  verdict,
} from './classify-rules.js';
import { GRPC_REQUEST_REFUSED, answeredByServer, grpcVerdict, madeByClient } from './classify-grpc.js';
import { ErrorCodes, MAX_CHAIN_DEPTH, MAX_CHAIN_MEMBERS, MAX_CHAIN_NODES } from './errors.js';
import { type Unsubscribe, unsubscriber } from './events.js';
import { show } from './validate.js';

/** What a failure was. */
export type FailureKind =
  /** Refused by dialguard's breaker (HostUnavailableError / NoServerAvailableError): no I/O happened. */
  | 'refused'
  /** Establishing the connection failed (refused, unreachable, DNS, connect/TLS timeout or failure). */
  | 'dial'
  /** An established connection died under the request (reset, EOF, closed, GOAWAY with an error). */
  | 'connection'
  /** The request's own timeout or a deadline. Never a dead connection (seed 003). */
  | 'timeout'
  /** One HTTP/2 stream was reset; the connection carries on. */
  | 'stream'
  /** The caller aborted (or closed its own client). Never counts as a failure of anything. */
  | 'cancelled'
  /** The server answered (an HTTP status, a grpc status it sent): proof the host is alive. */
  | 'application'
  /** Nothing on the chain was recognised. */
  | 'unknown';

/** What {@link classify} concluded about an error. */
export interface Classification {
  readonly kind: FailureKind;
  /**
   * The request certainly never reached the server: safe to retry for ANY method. True for
   * refused, dial, REFUSED_STREAM, a GOAWAY'd session refusing a new stream, grpc "not sent" cases
   * (only a status a `GrpcGuard` call marks as its own: a plain grpc-js status's details, `No
   * connection established`, may be a server relaying its upstream's, so they never prove it);
   * never for the error a client ends a call with after an earlier attempt of it may have been
   * sent (its retries refused: GuardedAgent, Http2Client, `retry()` and the pool mark it so).
   */
  readonly notSent: boolean;
  /**
   * The connection that carried the request is dead: drop exactly that connection and release
   * everything riding it. Only ever true for 'connection' (never for timeout, stream, application
   * or cancelled). A 'connection' failure with `connectionDead: false` is a connection going away
   * gracefully (GOAWAY: retire it, let its streams finish) or one that died on the far side of the
   * server we talk to (a remote `rpc error: EOF`: ours delivered the news, so it is fine).
   */
  readonly connectionDead: boolean;
  /**
   * The failure may pass if tried again (dial, connection, refused stream, EOF strings, timeouts of
   * one attempt). False for refused (permanent), cancelled, application (unless a pattern or hook
   * says so), unknown.
   */
  readonly transient: boolean;
  /**
   * The most specific code found on the chain: an errno (`ECONNRESET`), a dialguard code, an
   * undici code, an HTTP/2 error code name (`REFUSED_STREAM`), a grpc status name
   * (`UNAVAILABLE`), `HTTP_<status>`, or `EOF` for a remote EOF recognised in text.
   */
  readonly code: string | undefined;
  /** The error in the chain that decided the classification (the error itself when none did). */
  readonly cause: unknown;
}

/**
 * Text that marks an error, with what it means. Matched against the message (and grpc details)
 * of every error on the chain; a match decides at once. Fields left out keep what classify would
 * have said about that error, so `{ match: 'No cluster leader', transient: true, notSent: true }`
 * on a grpc UNAVAILABLE the server sent stays 'application' but becomes safe to retry.
 */
export interface ClassifyPattern {
  /** A substring (case-sensitive) or a RegExp (its `g`/`y` flags are ignored). */
  readonly match: string | RegExp;
  readonly kind?: FailureKind;
  readonly notSent?: boolean;
  readonly transient?: boolean;
  readonly connectionDead?: boolean;
  readonly code?: string;
}

/** What a hook may change; fields it leaves out stay. */
export type ClassificationOverride = Partial<Omit<Classification, 'cause'>>;

/**
 * Runs after the walk with the error and the classification so far; returns changes, or nothing.
 * A hook that throws is ignored (reported once as a process warning).
 */
export type ClassifyHook = (err: unknown, classification: Classification) => ClassificationOverride | undefined | void;

/** Options of {@link classify}. */
export interface ClassifyOptions {
  /** Extra patterns, tried before the registered ones and the built-in ones. Default none. */
  readonly patterns?: readonly ClassifyPattern[];
  /** A last word on the result, after the registered hooks. Default none. */
  readonly hook?: ClassifyHook;
  /**
   * The caller's signal. An error on the chain that is its `reason` is 'cancelled', whatever it
   * is (a caller may abort with any value). Default none.
   */
  readonly signal?: AbortSignal;
}

/**
 * A walk never goes deeper than this many causes, nor visits more than this many errors in all,
 * nor reads more than this many members of one AggregateError: the same bounds as `findError`.
 * Past them nothing is read, so a chain deeper than 32 causes whose only recognisable error is
 * below that depth classifies as 'unknown' (not transient: not retried, not counted against any
 * host). Real chains are a few levels deep; the bound is what keeps a hostile one cheap.
 */
const MAX_DEPTH = MAX_CHAIN_DEPTH;
const MAX_NODES = MAX_CHAIN_NODES;
const MAX_CHILDREN = MAX_CHAIN_MEMBERS;

const KINDS: ReadonlySet<unknown> = new Set(['refused', 'dial', 'connection', 'timeout', 'stream', 'cancelled', 'application', 'unknown']);

interface Registered {
  readonly patterns: readonly ClassifyPattern[];
  readonly hook: ClassifyHook | undefined;
}
const registry: Registered[] = [];

/**
 * Adds patterns and/or a hook that every {@link classify} call in the process uses (after any
 * per-call ones). Returns the function that removes them again.
 *
 * @throws TypeError naming the bad field.
 */
export function registerClassifier(extra: { patterns?: readonly ClassifyPattern[]; hook?: ClassifyHook }): Unsubscribe {
  checkClassifyOptions('registerClassifier', extra);
  // Stryker disable next-line ArrayDeclaration: a stray entry in a copy of no patterns is not a pattern and matches nothing.
  const given = extra.patterns ?? [];
  const entry: Registered = { patterns: [...given], hook: extra.hook };
  registry.push(entry);
  return unsubscriber(() => {
    const i = registry.indexOf(entry);
    if (i >= 0) registry.splice(i, 1);
  });
}

/**
 * Checks classify options (used by `classify`, `retry` and {@link registerClassifier}).
 *
 * @throws TypeError naming `name.<field>` and the bad value.
 */
export function checkClassifyOptions(name: string, options: unknown): void {
  if (options === undefined) return;
  if (typeof options !== 'object' || options === null) throw new TypeError(`${name} must be an object, got ${show(options)}`);
  const o = options as ClassifyOptions;
  if (o.patterns !== undefined) {
    if (!Array.isArray(o.patterns)) throw new TypeError(`${name}.patterns must be an array, got ${show(o.patterns)}`);
    o.patterns.forEach((p: unknown, i) => {
      const where = `${name}.patterns[${i}]`;
      if (typeof p !== 'object' || p === null) throw new TypeError(`${where} must be an object, got ${show(p)}`);
      const { match, kind } = p as ClassifyPattern;
      if (typeof match !== 'string' && !(match instanceof RegExp)) throw new TypeError(`${where}.match must be a string or RegExp, got ${show(match)}`);
      if (match === '') throw new TypeError(`${where}.match must not be empty`);
      if (kind !== undefined && !KINDS.has(kind)) throw new TypeError(`${where}.kind must be a FailureKind, got ${show(kind)}`);
    });
  }
  if (o.hook !== undefined && typeof o.hook !== 'function') throw new TypeError(`${name}.hook must be a function, got ${show(o.hook)}`);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new TypeError(`${name}.signal must be an AbortSignal, got ${show(o.signal)}`);
}

/** What the walk found: the deciding verdict and the error it came from (`final` is read per error only). */
interface Found extends Omit<Verdict, 'final'> {
  cause: unknown;
}

interface Walk {
  readonly visited: Set<unknown>;
  nodes: number;
  readonly patterns: readonly ClassifyPattern[];
  /**
   * The caller's abort reason: undefined until the signal aborts, and never undefined after (an
   * `abort()` without a reason stores an AbortError). No node with facts is undefined.
   */
  readonly reason: unknown;
  /** The deepest string code seen, for a result nothing decided. */
  code: string | undefined;
}

/** Errors a connection emitted once it was up (see {@link heardOnLiveConnection}). */
const heardLive = new WeakSet<object>();

/**
 * @internal Records that `err` came from a connection after its dial was over (a socket handed to
 * a client, a stream on a session that was up). Its code may be one a dial also fails with: an
 * SSL error (`ERR_SSL_BAD_RECORD_TYPE`) ends a live TLS session exactly as it ends a handshake.
 * `classify` then never calls it a dial's: the connection died with the request maybe sent. The
 * error itself is left as it is (the caller sees what the raw client would have). What it wraps
 * (`cause`, a few deep) is recorded too, so an inner dial code does not decide for it; a wrapper
 * that knew the request unsent (a canceled pending stream) still says so. Only objects are
 * recorded; anything else is ignored.
 */
export function heardOnLiveConnection(err: unknown): void {
  alongCauses(err, (node) => {
    heardLive.add(node);
    return false;
  });
}

/** How deep {@link heardOnLiveConnection} and {@link wrapsLive} follow `cause`. */
const LIVE_CAUSE_DEPTH = 4;

/**
 * Whether `node`, or what it wraps (`cause`, a few deep), is an error a live connection emitted.
 * A client's own wrapper copies the code (axios's `AxiosError`, got's `RequestError`) onto an
 * error nobody recorded: read alone, that code made the wrapper a dial's final verdict, and a
 * POST the server had received was sent again.
 */
function wrapsLive(node: unknown): boolean {
  return alongCauses(node, (n) => heardLive.has(n));
}

/**
 * Calls `visit` on `node` and what it wraps (`cause`), {@link LIVE_CAUSE_DEPTH} errors deep,
 * objects only; true at the first visit that says so.
 */
function alongCauses(node: unknown, visit: (node: object) => boolean): boolean {
  for (let depth = 0; depth < LIVE_CAUSE_DEPTH && ((typeof node === 'object' && node !== null) || typeof node === 'function'); depth++) {
    if (visit(node)) return true;
    node = safeGet(node, 'cause');
  }
  return false;
}

/**
 * Classifies `err`: what kind of failure, whether it was certainly not sent, whether its
 * connection is dead, whether it may pass if tried again, the most specific code, and which
 * error on the chain decided. Never throws on any `err`.
 *
 * @throws TypeError only for malformed `options`.
 */
export function classify(err: unknown, options?: ClassifyOptions): Classification {
  checkClassifyOptions('classify options', options);
  const patterns = registry.flatMap((r) => r.patterns);
  if (options?.patterns !== undefined) patterns.unshift(...options.patterns);
  const walk: Walk = {
    visited: new Set(),
    nodes: 0,
    patterns,
    reason: options?.signal?.reason,
    code: undefined,
  };
  const found = decide(err, 0, walk);
  // Sent before, whatever this error says (a marked copy, see toldAsSentEarlier): read only of an
  // error that says "not sent", the one verdict it can change.
  const began = (found === undefined ? ESTABLISHING.has(err as object) : found.notSent) && beganAlong(walk.visited);
  let result: Classification =
    found === undefined
      ? // A connection's own establishment that failed in a way no rule knows (a protocol's first
        // exchange answered with an error): nothing was sent on it, whatever it says.
        ESTABLISHING.has(err as object)
        ? { kind: 'dial', notSent: !began, connectionDead: false, transient: true, code: walk.code, cause: err }
        : { kind: 'unknown', notSent: false, connectionDead: false, transient: false, code: walk.code, cause: err }
      : {
          kind: found.kind,
          notSent: (found.notSent && !began) || NEVER_SENT.has(err as object),
          connectionDead: found.connectionDead,
          transient: found.transient,
          code: found.code ?? walk.code,
          cause: found.cause,
        };
  for (const r of registry) if (r.hook !== undefined) result = runHook(r.hook, err, result);
  if (options?.hook !== undefined) result = runHook(options.hook, err, result);
  return Object.freeze(enforce(result, began));
}

/** Errors a client met after the server's answer had begun (see {@link afterAnswerBegan}). */
const ANSWER_BEGAN = new WeakSet<object>();

/**
 * Whether any error the walk visited (the error, what wraps it, its causes) carries the mark of
 * {@link afterAnswerBegan}: a wrapper made over a marked error (fetch's `TypeError: fetch failed`
 * over GuardedAgent's error) is no more "not sent" than what it wraps.
 */
function beganAlong(visited: ReadonlySet<unknown>): boolean {
  for (const node of visited) if (ANSWER_BEGAN.has(node as object)) return true; // a primitive is never in it
  return false;
}

/**
 * @internal Marks `err` as met after the server's answer had begun (its headers, part of its
 * body): {@link classify} then never says it was not sent, whatever it says itself. An HTTP/2
 * stream the server answered and then reset with REFUSED_STREAM was read as never processed, and
 * a POST whose handler had run was sent 3 times (an outside review). Returns `err`.
 */
export function afterAnswerBegan<E>(err: E): E {
  if (typeof err === 'object' && err !== null) ANSWER_BEGAN.add(err);
  return err;
}

/**
 * @internal Marks `err`, an error a retry loop made to end a call (out of attempts, of time or of
 * budget), as the end of a call an earlier attempt of which may have reached the server:
 * {@link classify} then never says it was not sent, whatever its last attempt met. An idempotent
 * call whose first attempt was cut after sending (ECONNRESET) and whose retries were refused
 * ended as "not sent", and a layer above that is not idempotent sent it again (an outside
 * review: a gRPC handler ran twice). Only for an error made for this one call: the mark is the
 * object's, and an attempt's own error may be shared by every caller of one dial. Returns `err`.
 */
export function sentEarlier<E>(err: E): E {
  return afterAnswerBegan(err);
}

/**
 * @internal `err`, an attempt's own error a client hands its caller as the whole call's failure
 * (GuardedAgent, Http2Client and the pool's resends fail with it, so `err.code` reads as the
 * client alone would say it), told as the end of a call sent before when `ending` (retry()'s
 * verdict, see {@link sentEarlier}) says an earlier attempt may have reached the server, or
 * `sent` says so: when `err` itself says "not sent" (a redial refused), a copy of it that does
 * not; else `err`. The copy keeps its prototype and own properties (`instanceof`, `code`,
 * `message`, `stack`, `cause`); the error is not marked itself, as one dial's failure may be
 * handed to every call that waited on it, some of them never sent. An idempotent PUT run once,
 * cut, then refused on its retries ended with an ECONNREFUSED read as not sent, and a
 * `retry({ idempotent: false })` around it sent it again (an outside review, r142).
 */
export function toldAsSentEarlier<E>(err: E, ending: unknown, sent = false, classified?: Classification): E {
  if (!sent && !ANSWER_BEGAN.has(ending as object)) return err; // a primitive is never in it
  if (ANSWER_BEGAN.has(err as object)) return err;
  // A caller's abort reason, the client's own close, an error of the caller's code: left as they
  // are (a caller compares its signal's reason by identity); "not sent" matters only of I/O. `c`:
  // how the caller classified `err` (retry() with the call's own patterns), else classify's.
  const c = classified ?? classify(err);
  if (!c.notSent || !(c.kind === 'dial' || c.kind === 'refused' || c.kind === 'connection' || c.kind === 'stream')) return err;
  if (typeof err !== 'object' || err === null) return err; // a string or a number: nothing to copy, nothing to mark
  let copy: E & object;
  try {
    copy = Object.create(Object.getPrototypeOf(err) as object | null, Object.getOwnPropertyDescriptors(err)) as E & object;
  } catch {
    return err; // a Proxy or an exotic object that cannot be read: left as it is
  }
  // What was said of the error holds of its copy (a dial failure that left its host refused, one
  // heard on a live connection, an establishment's failure; the dial layer's own marks, see copiedFrom).
  for (const marks of [heardLive, ESTABLISHING, LEFT_REFUSING]) if (marks.has(err)) marks.add(copy);
  COPIES.set(copy, err);
  return sentEarlier(copy);
}

/** The errors {@link toldAsSentEarlier} copied, by copy. */
const COPIES = new WeakMap<object, object>();

/**
 * @internal The error `err` was copied from by {@link toldAsSentEarlier}, else `err`: for a
 * layer that marks errors in a set of its own (the dial layer's local failures) to read a copy's
 * marks as its original's.
 */
export function copiedFrom(err: object): object {
  return COPIES.get(err) ?? err;
}

/** Errors made to end a call none of whose attempts was sent (see {@link neverSent}). */
const NEVER_SENT = new WeakSet<object>();

/**
 * @internal Marks `err`, an error a retry loop made between attempts to end a call (out of time,
 * attempts or budget) none of whose attempts may have reached the server: {@link classify} then
 * says it was not sent, whatever its own kind (a deadline is otherwise "maybe sent": it may cut
 * an attempt under way). Only for an error made for this one call. Returns `err`.
 */
export function neverSent<E>(err: E): E {
  if (typeof err === 'object' && err !== null) NEVER_SENT.add(err);
  return err;
}

/** Errors a connection's establishment failed with (see {@link failedEstablishing}). */
const ESTABLISHING = new WeakSet<object>();

/**
 * @internal Marks `err` as the failure of a connection's establishment (a pool's connector: its
 * dial and the protocol's first exchange), on which no request was sent. An error no rule knows
 * (memcached's `ERROR Too many open connections` answering the `version` handshake) then
 * classifies as a failed dial, not sent and transient, so it is retried and a `ServerSet` moves
 * on: read as unknown, every call failed while healthy servers sat idle (an outside review: 0 of
 * 1 792 calls served). Known errors keep their own classification. Returns `err`.
 */
export function failedEstablishing<E>(err: E): E {
  if (typeof err === 'object' && err !== null) ESTABLISHING.add(err);
  return err;
}

/** Dial failures after which their host was refused (see {@link leftHostRefusing}). */
const LEFT_REFUSING = new WeakSet<object>();

/**
 * @internal Marks `err`, a dial's failure, as one after which the breaker refused its host (its
 * own failure opened it, or found it open; for a name, every address it resolved to). Returns `err`.
 */
export function markLeftRefusing<E>(err: E): E {
  if (typeof err === 'object' && err !== null) LEFT_REFUSING.add(err);
  return err;
}

/**
 * Whether `err` (or a cause it wraps, three deep at most: undici's and grpc-js's wrappings) is a
 * dial failure after which the breaker refused its host. A retry of it would be refused, or,
 * after a backoff longer than the breaker's window, would be that host's probe: its caller paying
 * a dial and a backoff per window where every other caller was refused at once (an outside review:
 * 3 dials and ~1.4 s a call, once a window, to a host long dead).
 */
export function leftHostRefusing(err: unknown): boolean {
  let e = err;
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    if (LEFT_REFUSING.has(e)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The contract's invariants, whatever a pattern or hook said. */
function enforce(c: Classification, began: boolean): Classification {
  const { kind } = c;
  return {
    ...c,
    connectionDead: kind === 'connection' && c.connectionDead,
    // A refusal sent nothing, unless it ends a call an earlier attempt of which was sent.
    notSent: (kind === 'refused' && !began) || c.notSent,
    transient: kind !== 'refused' && kind !== 'cancelled' && c.transient,
  };
}

function runHook(hook: ClassifyHook, err: unknown, c: Classification): Classification {
  // The answer is read inside the same guard as the call: a getter that throws, or a Proxy whose
  // traps do, is a hook that threw. Read outside it, it escaped classify(), which adapters call
  // inside their own callbacks: an unhandled rejection, a call that never settled.
  try {
    const o: unknown = hook(err, Object.freeze({ ...c }));
    if (typeof o !== 'object' || o === null) return c;
    if (typeof (o as { then?: unknown }).then === 'function') {
      // An async hook: classify is synchronous, so its verdict is not awaited; a rejection is
      // the hook's throw, reported (unwatched, it ended the process: an outside review).
      containAnswer('a classify hook threw and was ignored', hook, o);
      warnOnce("a classify hook's promise was ignored (hooks answer synchronously)", hook, 'an async hook');
      return c;
    }
    const over = o as Record<string, unknown>;
    const next = { ...c } as { -readonly [K in keyof Classification]: Classification[K] };
    const kind = over.kind;
    if (KINDS.has(kind)) next.kind = kind as FailureKind;
    const notSent = over.notSent;
    if (typeof notSent === 'boolean') next.notSent = notSent;
    const transient = over.transient;
    if (typeof transient === 'boolean') next.transient = transient;
    const connectionDead = over.connectionDead;
    if (typeof connectionDead === 'boolean') next.connectionDead = connectionDead;
    const code = over.code;
    if (typeof code === 'string' || (code === undefined && 'code' in over)) next.code = code as string | undefined;
    return next;
  } catch (e) {
    warnOnce('a classify hook threw and was ignored', hook, e);
    return c;
  }
}

/** The members of an AggregateError (bounded), or undefined for anything else. */
function membersOf(node: unknown, f: Facts): unknown[] | undefined {
  let aggregate = f.name === 'AggregateError';
  if (!aggregate) {
    try {
      aggregate = node instanceof AggregateError;
    } catch {
      // A Proxy whose getPrototypeOf throws: not an AggregateError.
    }
  }
  if (!aggregate) return undefined;
  const errors = safeGet(node, 'errors');
  let isArray = false;
  try {
    isArray = Array.isArray(errors);
  } catch {
    // A revoked Proxy: no members to read.
  }
  if (!isArray) return undefined;
  const length = Number(safeGet(errors, 'length'));
  const out: unknown[] = [];
  for (let i = 0; i < Math.min(MAX_CHILDREN, Number.isFinite(length) ? length : 0); i++) out.push(safeGet(errors, i));
  return out;
}

/**
 * Finds the verdict for `node` and what it wraps. Each value is visited once (so a cycle ends
 * where it closes); only objects, functions and strings have facts, and a string has no members
 * and no cause.
 */
function decide(node: unknown, depth: number, w: Walk): Found | undefined {
  if (depth >= MAX_DEPTH || w.nodes >= MAX_NODES || w.visited.has(node)) return undefined;
  w.visited.add(node);
  w.nodes++;
  const f = factsOf(node);
  if (f === undefined) return undefined;
  if (typeof f.code === 'string') w.code = f.code;

  const members = membersOf(node, f);
  // An AggregateError's own code is only its first member's; the members decide.
  const own = members === undefined ? verdictOf(node, f, w) : userVerdict(f, undefined, w);
  if (own?.final) return { ...own, cause: node };

  let inner: Found | undefined;
  if (members !== undefined) inner = combine(members.map((m) => decide(m, depth + 1, w)).filter((x): x is Found => x !== undefined));
  if (inner === undefined) {
    const cause = safeGet(node, 'cause');
    if (cause !== undefined) inner = decide(cause, depth + 1, w);
  }
  if (inner !== undefined && !(inner.kind === 'unknown' && own !== undefined && own.kind !== 'unknown')) {
    // A wrapper that knew the request was never sent keeps saying so.
    return own?.notSent === true ? { ...inner, notSent: true } : inner;
  }
  return own === undefined ? undefined : { ...own, cause: node };
}

/** One error's own verdict: the caller's abort reason, a user pattern, its structure, built-in text. */
function verdictOf(node: unknown, f: Facts, w: Walk): Verdict | undefined {
  if (node === w.reason) return verdict('cancelled', typeof f.code === 'string' ? f.code : 'ABORT_ERR');
  const { code, details } = f;
  const grpcStatus = intIn(code, 0, 16) && details !== undefined;
  let base = grpcStatus ? grpcVerdict(code, details, answeredByServer(node), madeByClient(node)) : structuralVerdict(f);
  // A transport that closed in its handshake carried nothing: a dial's failure, not a connection's.
  // (Read safely: `instanceof` on a hostile Proxy throws.)
  if (base?.code === ErrorCodes.TRANSPORT_CLOSED && safeGet(node, 'handshake') === true) base = verdict('dial', base.code);
  // A dial's code on an error a live connection emitted: the connection died under the request.
  if (base?.kind === 'dial' && wrapsLive(node)) base = verdict('connection', base.code, { transient: base.transient });
  if (base === undefined || (base.kind === 'application' && !intIn(f.status, 400, 499) && !(grpcStatus && GRPC_REQUEST_REFUSED.has(code)))) {
    const text = patternVerdict(f);
    // Text can upgrade what a server answered (a 500 carrying `rpc error: EOF`), never override
    // what a code said about our own I/O, nor an explicit 4xx or its grpc kin: the server read
    // the request and rejected it, so a 403 whose message mentions "connection reset by peer"
    // stays a 403, and an INVALID_ARGUMENT saying "unexpected EOF" (a truncated message) stays that.
    if (text !== undefined) base = base === undefined ? text : { ...text, final: true };
  }
  return userVerdict(f, base, w) ?? base;
}

/** The first user pattern that matches this error's text, applied over `base`. */
function userVerdict(f: Facts, base: Verdict | undefined, w: Walk): Verdict | undefined {
  for (const p of w.patterns) {
    if (!(occursIn(f.message, p.match) || (f.details !== undefined && occursIn(f.details, p.match)))) continue;
    const kind = p.kind ?? base?.kind ?? 'unknown';
    // Without a code of its own the verdict takes the walk's, which is this error's if it has one.
    const start = base !== undefined && base.kind === kind ? base : verdict(kind, base?.code);
    return {
      kind,
      code: p.code ?? start.code,
      notSent: p.notSent ?? start.notSent,
      transient: p.transient ?? start.transient,
      connectionDead: p.connectionDead ?? start.connectionDead,
      final: true,
    };
  }
  return undefined;
}

/** Stateless copies of user RegExps that carry `g` or `y` (which make matching positional). */
const plainCopies = new WeakMap<RegExp, RegExp>();

/** Whether a user pattern's `match` occurs in `text`; a RegExp that throws matches nothing. */
function occursIn(text: string, match: string | RegExp): boolean {
  if (typeof match === 'string') return text.includes(match);
  try {
    let plain = match;
    if (match.global || match.sticky) {
      plain = plainCopies.get(match) ?? new RegExp(match.source, match.flags.replace(/[gy]/g, ''));
      plainCopies.set(match, plain);
    }
    return plain.test(text);
  } catch {
    // A RegExp subclass whose exec throws, or a hostile `source`.
  }
  return false;
}

/**
 * An AggregateError's verdict from its members': their kind when they agree (else the first
 * transient one's), not sent only if none was sent, transient if any may pass, dead only if all
 * say so.
 */
function combine(members: Found[]): Found | undefined {
  const first = members[0];
  if (first === undefined) return undefined;
  const agree = members.every((m) => m.kind === first.kind);
  const decider = agree ? first : (members.find((m) => m.transient) ?? first);
  return {
    ...decider,
    notSent: members.every((m) => m.notSent),
    transient: members.some((m) => m.transient),
    connectionDead: agree && members.every((m) => m.connectionDead),
  };
}
