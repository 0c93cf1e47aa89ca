/**
 * An HTTP/2 client on `node:http2`, built on the ConnectionPool: one session per origin (h2c or
 * TLS), shared by every request, established in one bounded dial, watched by keep-alive PINGs.
 *
 * What each failure does to the session:
 * - transport closed or errored, PING unanswered: gone, and every request on it released at once;
 * - GOAWAY: retired; its streams finish, new requests open a new session;
 * - RST_STREAM of any code, a request timeout, any status: nothing (one stream, not the session).
 *
 * A request resolves only with a response the server sent; `timeout` is one deadline for the whole
 * call (the wait for a session and every turn spend it); a session that received GOAWAY takes no
 * new stream, and a stream the GOAWAY excluded fails as not sent, so any method may go again.
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import http2 from 'node:http2';
import type net from 'node:net';
import tls from 'node:tls';
import type { Schedule } from '../core/backoff.js';
import { type FailureKind, classify, toldAsSentEarlier } from '../core/classify.js';
import { type Clock, checkedClock, systemClock } from '../core/clock.js';
import { DeadlineExceededError, ErrorCodes, PoolClosedError, RequestTimeoutError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../core/errors.js';
import { restartSpanningBackoff } from '../core/restart-backoff.js';
import { checkBoolean, checkDuration, checkFunction, checkInteger, checkKeepAlive, checkSignal, opt, show } from '../core/validate.js';
import { DEFAULT_CONNECT_TIMEOUT, breakerOption } from '../guard/dial.js';
import { HostBreaker } from '../guard/host-breaker.js';
import { ConnectionPool, type ConnectionPoolEvents, type PoolStats, type UseOptions } from '../pool/connection-pool.js';
import { EventHub, type Listener, type Unsubscribe } from '../core/events.js';
import { RetryBudget, sharedRetryBudget } from '../retry/budget.js';
import { retry } from '../retry/retry.js';
import { tellStory } from '../retry/story.js';
import { type InCallerContext, callerContext, traceFailedCall } from '../observe/tracing.js';
import { REPORTED_BY_CALLER } from '../retry/retry-options.js';
import type { Lease } from '../pool/pooled-connection.js';
import type { Trip } from '../pool/trip.js';
import { type Streaming, exchange, runExchange } from './exchange.js';
import { SessionConnector } from './session-connector.js';
import { onCallerAbort } from '../core/shared-signal.js';
import { checkOptionNames, optionNames } from '../core/option-names.js';

/** The option names an Http2Client's `retry` takes: any other is warned about (see checkOptionNames). */
const RETRY_OPTIONS = optionNames<Http2RetryOptions>({ maxAttempts: true, backoff: true, budget: true });
/** The option names an Http2Client takes: any other is warned about (see checkOptionNames). */
const CLIENT_OPTIONS = optionNames<Http2ClientOptions>({ connectTimeout: true, breaker: true, lookup: true, keepAliveInterval: true, keepAliveTimeout: true, requestTimeout: true, tls: true, settings: true, sessionOptions: true, idleTimeout: true, sweepInterval: true, retiredRetries: true, closeTimeout: true, redialPace: true, retry: true, clock: true });

/**
 * `tls.connect` options a caller may put at the top level by mistake: ignored there, a `ca` given
 * so failed every request with UNABLE_TO_VERIFY_LEAF_SIGNATURE and no hint (an outside review).
 */
const TLS_ONLY_KEYS = [
  'ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized', 'checkServerIdentity',
  'ciphers', 'minVersion', 'maxVersion', 'secureContext', 'ALPNProtocols', 'session',
] as const;

/** Options of an {@link Http2Client}. */
export interface Http2ClientOptions {
  /** Bound on TCP + TLS + the SETTINGS exchange, ms. Default {@link DEFAULT_CONNECT_TIMEOUT} (2 500). */
  connectTimeout?: number;
  /**
   * Breaker fed by every session establishment. Default the shared one; `null`: none. With one,
   * an origin whose host is a name is guarded per address (as `connect()`'s `perAddress`): one
   * dead address neither costs requests a timeout nor refuses the name while another is alive.
   */
  breaker?: HostBreaker | null;
  /**
   * Resolves an origin's name to its addresses (`dns.lookup`'s signature, called with `all:
   * true`). Default `dns.lookup`: the system resolver, as `http2.connect` uses.
   */
  lookup?: net.LookupFunction;
  /**
   * PING interval, ms; 0 disables; at least 10 otherwise (a RangeError: a fraction of a ms was a
   * PING every millisecond). Default 10 000 (seed 003): with the timeout below, a silent peer is
   * detected within ~20 s without capping how long a request may run.
   */
  keepAliveInterval?: number;
  /** How long a PING may go unanswered before the session is gone, ms. Default 10 000 (seed 003). */
  keepAliveTimeout?: number;
  /**
   * Default timeout of a whole request (session wait and every turn), ms. Default none (`Infinity`): a long poll or a streaming call
   * may run as long as its caller allows; bound a call with `timeout` or `signal` instead.
   */
  requestTimeout?: number;
  /** TLS for `https:` origins (`ca`, `cert`, `key`, `rejectUnauthorized`...). Built into one context per origin. */
  tls?: tls.SecureContextOptions & Pick<tls.ConnectionOptions, 'rejectUnauthorized' | 'servername' | 'checkServerIdentity'>;
  /**
   * Local HTTP/2 SETTINGS. Default Node's, but `enablePush: false` unless given: the client has
   * no API for a pushed stream, and a pushing server's unread pushes filled the session's memory
   * (ENHANCE_YOUR_CALM on later requests). Checked here (a TypeError/RangeError naming it): an
   * invalid value would otherwise fail every session after its TCP/TLS connect.
   */
  settings?: http2.Settings;
  /**
   * node:http2 session limits (`maxSessionMemory`, `maxHeaderListPairs`...), passed to each
   * session as `http2.connect` takes them. Default Node's (`maxSessionMemory` 10 MB). Raise
   * `maxSessionMemory` for big uploads a server may answer without reading: past it a session
   * refuses new streams (ENHANCE_YOUR_CALM) and is replaced. Checked here (a TypeError/RangeError
   * naming it): node:http2 coerces bad values without a word.
   */
  sessionOptions?: Http2SessionLimits;
  /** Close a session no request has used for this long, ms. Default 600 000 (see ConnectionPool). */
  idleTimeout?: number;
  /** Idle sweep at most once per this many ms. Default 60 000. */
  sweepInterval?: number;
  /**
   * Times a request may go back for a fresh session after a sibling retired its own (a sent one
   * only if the session had served a request before: see ConnectionPoolOptions.retiredRetries).
   * Default 3.
   */
  retiredRetries?: number;
  /** How long `close()` lets requests finish, ms. Default 5 000. */
  closeTimeout?: number;
  /**
   * The longest wait between a target's failed connect and its next one, ms (see
   * ConnectionPoolOptions.redialPace): 10 ms, doubling per failure in a row up to this. Default 250.
   */
  redialPace?: number;
  /**
   * How a request whose session could not be established is tried again; `false`: never. Only
   * such a request, of any method: its dial was refused, or reset or closed before the session
   * was up, so nothing of it was sent. Inside the request's own `timeout`; never a refusal by the
   * breaker, a certificate or protocol the client rejects (a wrong CA fails at once, as before),
   * or a dial that timed out (one connect timeout is what a silent host costs a call). Default
   * `{ maxAttempts: 3 }` with `restartSpanningBackoff` and the shared budget: a 0.3-1 s server
   * restart (every dial refused) failed every request sent during it.
   */
  retry?: Http2RetryOptions | false;
  /** Time source. Default {@link systemClock}. */
  clock?: Clock;
}

/** The session limits an {@link Http2Client} passes to `http2.connect` (see `Http2ClientOptions.sessionOptions`). */
export type Http2SessionLimits = Pick<http2.ClientSessionOptions, (typeof SESSION_LIMITS)[number]>;

/** Each session limit, with its least value (node:http2's documented minimum; 0 where it has none). */
const SESSION_LIMIT_MIN = {
  maxSessionMemory: 1,
  maxHeaderListPairs: 4,
  maxOutstandingPings: 0,
  maxSendHeaderBlockLength: 0,
  maxDeflateDynamicTableSize: 0,
  maxReservedRemoteStreams: 0,
  peerMaxConcurrentStreams: 1,
  paddingStrategy: 0,
} as const;
const SESSION_LIMITS = Object.keys(SESSION_LIMIT_MIN) as Array<keyof typeof SESSION_LIMIT_MIN>;

/** How an {@link Http2Client} tries again a request whose session could not be established. */
export interface Http2RetryOptions {
  /**
   * Most attempts of one request, the first included; 1: none. Default 3, as every adapter's:
   * with the default backoff, the three dials span a 0.3-1 s restart. Also bounds the sends of an
   * idempotent request whose session died under it (it may have run each time): at most
   * `maxAttempts` in all; with `retry: false`, one.
   */
  maxAttempts?: number;
  /**
   * Wait before each retry, ms. Default `restartSpanningBackoff`: 400-600 ms, then 800-1 200 ms
   * (jittered), so callers that failed together do not return together.
   */
  backoff?: Schedule;
  /**
   * The budget every request deposits into and every retry withdraws from, a request resent on a
   * fresh session after its own died under it included. Default the process-wide one
   * (`sharedRetryBudget()`: retries at most 20 % of calls); `null`: none.
   */
  budget?: RetryBudget | null;
}

/** An {@link Http2RetryOptions}, resolved. */
interface RedialPolicy {
  readonly maxAttempts: number;
  readonly backoff: Schedule;
  readonly budget: RetryBudget | null;
}

/** The pool's `mayResend`: a withdrawal from `budget`. */
function budgetOf(budget: RetryBudget): () => boolean {
  return () => budget.tryWithdraw();
}

/** `options.retry`, checked (a TypeError/RangeError naming it); undefined for `false`. */
function redialPolicy(options: Http2RetryOptions | false | undefined): RedialPolicy | undefined {
  if (options === false) return undefined;
  const r = opt<Http2RetryOptions>(options, {});
  if (typeof r !== 'object' || r === null) throw new TypeError(`retry must be an object or false, got ${show(r)}`);
  // A misspelt name was silent: `maxAttemps: 1` meant one send, and the client sent 3 (a review).
  checkOptionNames('Http2Client retry', r, RETRY_OPTIONS);
  const maxAttempts = checkInteger('retry.maxAttempts', opt(r.maxAttempts, 3), 1, 100);
  const backoff = r.backoff === undefined ? restartSpanningBackoff : checkFunction<Schedule>('retry.backoff', r.backoff);
  const budget = r.budget === undefined ? sharedRetryBudget() : r.budget;
  if (budget !== null && !(budget instanceof RetryBudget)) throw new TypeError(`retry.budget must be a RetryBudget or null, got ${show(budget)}`);
  return { maxAttempts, backoff, budget };
}

/**
 * Whether a request that failed with `err` may go again after a wait, any method:
 * - it never reached a session, and a dial a moment later may get one (the port was closed, or the
 *   connection was reset or closed before the session was up: a server restarting). Not the
 *   breaker's refusal, not a certificate or protocol the client rejects, and not a dial that timed
 *   out: a host silent for a whole connect timeout would cost the caller another (seed 001);
 * - or a session took it and provably never processed it (a GOAWAY excluded it, the session was
 *   closing, REFUSED_STREAM). The pool sends those again at once, up to `retiredRetries` times;
 *   past those, callers of a server that ends every session after 3 requests (nginx
 *   `keepalive_requests 3`) all landed on the next session together and failed, 30 % of them,
 *   with their time left (an outside review).
 */
function mayGoAgain(err: unknown): boolean {
  const c = classify(err);
  if (c.kind === 'dial') return c.notSent && c.transient && c.code !== ErrorCodes.CONNECT_TIMEOUT;
  // A GOAWAY whose last stream is 0: its session processed nothing, and a server sending one on
  // every session (refusing service) cost up to 12 sessions a call with these waits (3 attempts,
  // each with the pool's 3 immediate resends; plain node:http2 1; an outside review). Its session
  // ending after serving (nginx `keepalive_requests`, a graceful restart) names a later stream.
  if ((err as { lastStreamID?: unknown } | null)?.lastStreamID === 0) return false;
  return c.notSent && c.transient && (c.kind === 'connection' || c.kind === 'stream');
}

/** Options of one request. */
export interface Http2RequestOptions {
  /**
   * Default `GET`. Sent as given (methods are case-sensitive), except that `delete`, `get`,
   * `head`, `options`, `post` and `put` in any case are sent upper-cased, as `fetch` does.
   */
  method?: string;
  /** Extra request headers (pseudo-headers are set from the URL and method). */
  headers?: http2.OutgoingHttpHeaders;
  /** Request body. */
  body?: string | Uint8Array;
  /** The caller's cancellation: aborts the stream (RST CANCEL) and rejects with its reason. */
  signal?: AbortSignal;
  /**
   * Timeout of the whole call, ms: the wait for a session and every turn spend this one deadline;
   * rejects with `RequestTimeoutError`. Default the client's `requestTimeout`.
   */
  timeout?: number;
  /**
   * Whether the request may be repeated safely when its session dies under it. Default true for
   * GET, HEAD, OPTIONS, PUT and DELETE (idempotent per RFC 9110), false otherwise.
   */
  idempotent?: boolean;
}

/** A complete response. */
export interface Http2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  /** Identity of the session that carried it. */
  connectionId: number;
  /** Whole-call latency in ms, from `request()` to the last byte: connect wait included. */
  latency: number;
  /** The trailers the server sent after the body (a `grpc-status`, a checksum), if it sent any. */
  trailers?: http2.IncomingHttpHeaders;
}

/**
 * A response whose body arrives as it is read: `body` is a web `ReadableStream` (also an async
 * iterable: `for await (const chunk of res.body)`). Reading drives HTTP/2 flow control: a body
 * nobody reads stops the server once the stream's window and `highWaterMark` are full.
 */
export interface Http2StreamingResponse {
  status: number;
  headers: http2.IncomingHttpHeaders;
  /** The body's bytes as the server sends them. Cancel it (or `signal`) to reset the stream. */
  body: ReadableStream<Uint8Array>;
  /** Identity of the session that carries it. */
  connectionId: number;
  /** From `stream()` to the response's headers, ms: connect wait included. */
  latency: number;
  /**
   * The trailers the server sent after the body, if it sent any: set once they arrive, before
   * the body ends (read it after the body's last chunk).
   */
  trailers?: http2.IncomingHttpHeaders;
}

/** Options of {@link Http2Client.stream}: a request's, plus how much of the body to buffer. */
export interface Http2StreamOptions extends Http2RequestOptions {
  /**
   * Bytes of body kept unread before the stream is paused (and the server, by flow control,
   * stopped). Default 65 536: one default HTTP/2 stream window, so a slow reader costs at most
   * two windows of memory.
   */
  highWaterMark?: number;
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

/** The methods `fetch` upper-cases (its "normalize"); any other is a name of its own, sent as given. */
const NORMALIZED = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT']);

/** An HTTP token (RFC 9110 §5.6.2): what a method name may be. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `method` as it goes on the wire: HTTP methods are case-sensitive (`patch` is not `PATCH`). */
function normalizedMethod(method: string): string {
  const upper = method.toUpperCase();
  return NORMALIZED.has(upper) ? upper : method;
}

/**
 * The pool's options of a call without a signal that is not idempotent, or of a retry's attempt
 * (whose every send the retry's attempts count): shared, not built per call.
 */
const NOT_IDEMPOTENT_USE: UseOptions = Object.freeze({ idempotent: false });

/** Payloads of the HTTP/2 client's events (on `dialguard:http2:<event>`). */
export interface Http2ClientEvents {
  /**
   * A request ended: whole-call latency, connect wait included. Fires per request (and costs
   * nothing unless someone listens): for metrics, not logs.
   */
  settled: { ok: boolean; latency: number; status: number | undefined; kind: FailureKind | undefined };
}

const events = new EventHub<Http2ClientEvents>('http2', { settled: true });
/** Who hears `settled`: asked on every request, so held rather than looked up each time. */
const settledAudience = events.audience('settled');

/** An HTTP/2 client: one guarded, watched session per origin. */
export class Http2Client {
  readonly #pool: ConnectionPool<http2.ClientHttp2Session>;
  readonly #requestTimeout: number;
  readonly #clock: Clock;
  readonly #redial: RedialPolicy | undefined;
  /**
   * How many times the pool may send an idempotent request again after its session died under
   * it: what the retry policy's attempts leave (`maxAttempts - 1`; 0 with `retry: false`).
   */
  readonly #resends: number;
  /** The pool's options of an idempotent call without a signal (per client: they carry `#resends`). */
  readonly #idempotentUse: UseOptions;
  /** Aborted by close(): a request waiting to dial again ends at once, with PoolClosedError. */
  readonly #closing = new AbortController();

  /** @throws TypeError/RangeError naming the option, for any invalid option. */
  constructor(options: Http2ClientOptions = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
    for (const key of TLS_ONLY_KEYS) {
      if ((options as Record<string, unknown>)[key] !== undefined) {
        throw new TypeError(`${key} is a TLS option: pass it as tls: { ${key} } (at the top level it was ignored)`);
      }
    }
    checkOptionNames('Http2Client', options, CLIENT_OPTIONS); // after: a TLS option at the top level is its TypeError alone
    this.#clock = checkedClock(options.clock);
    this.#requestTimeout = checkDuration('requestTimeout', opt(options.requestTimeout, Number.POSITIVE_INFINITY), 1, true);
    const breaker = breakerOption(options.breaker);
    const connectTimeout = checkDuration('connectTimeout', opt(options.connectTimeout, DEFAULT_CONNECT_TIMEOUT), 1);
    const lookup = options.lookup;
    if (lookup !== undefined && typeof lookup !== 'function') throw new TypeError(`lookup must be a function, got ${show(lookup)}`);
    const policy = redialPolicy(options.retry);
    // maxAttempts 1: no dial again, but the budget still bounds resends (was: ignored with it),
    // so every call still deposits in it (#again dials only when maxAttempts allows).
    this.#redial = policy;
    this.#resends = policy === undefined ? 0 : policy.maxAttempts - 1;
    this.#idempotentUse = Object.freeze({ idempotent: true, resends: this.#resends });
    setMaxListeners(0, this.#closing.signal); // one listener per request waiting to dial again
    const connector = new SessionConnector({
      connectTimeout,
      breaker,
      lookup,
      tls: checkTls(options.tls),
      settings: checkSettings(options.settings),
      session: checkSessionLimits(options.sessionOptions),
      keepAliveInterval: checkKeepAlive('keepAliveInterval', opt(options.keepAliveInterval, 10_000)),
      keepAliveTimeout: checkDuration('keepAliveTimeout', opt(options.keepAliveTimeout, 10_000), 1),
      clock: this.#clock,
    });
    this.#pool = new ConnectionPool({
      connector,
      connectTimeout,
      breaker,
      idleTimeout: options.idleTimeout,
      sweepInterval: options.sweepInterval,
      retiredRetries: options.retiredRetries,
      closeTimeout: options.closeTimeout,
      redialPace: options.redialPace,
      clock: this.#clock,
      // A request that may have been sent goes back (its session died under it) only as a retry
      // the budget allows, as GrpcGuard's: was budget-free, so a server killing sessions over
      // and over had every idempotent request resent without bound but retiredRetries.
      ...(policy?.budget == null ? {} : { mayResend: budgetOf(policy.budget) }),
    });
  }

  /**
   * Sends one request and resolves with the whole response.
   *
   * Resolves only with a response the server sent. Rejects with the dial's error
   * (`HostUnavailableError` at once for a blocked origin, `ConnectTimeoutError`, a socket error,
   * `TransportClosedError` when the peer hangs up before its HTTP/2 SETTINGS),
   * the stream's error (`ERR_HTTP2_STREAM_ERROR` with `rstCode` for a reset, before the response
   * or during it; `ERR_HTTP2_GOAWAY_SESSION`, not sent, when the peer's GOAWAY excluded the stream
   * and no turn was left), `RequestTimeoutError` (the whole call's deadline), `ConnectionGoneError`
   * (the session died under it), `PoolClosedError`, or the caller's `signal.reason`.
   *
   * @param url - an absolute `http:` (h2c, prior knowledge) or `https:` URL.
   */
  request(url: string | URL, options: Http2RequestOptions = {}): Promise<Http2Response> {
    return this.#call(url, options, undefined);
  }

  /**
   * Sends one request and resolves at the response's headers, with a body to read as it arrives
   * (backpressure through HTTP/2 flow control). Rejects as {@link Http2Client.request} does until
   * the headers come; after them, a failure (a reset, the session dying, `signal`, the call's
   * `timeout`, which covers the whole body) errors the body instead, and the request is never
   * sent again (its answer has begun). Cancelling the body resets the stream (CANCEL).
   *
   * @param url - an absolute `http:` (h2c, prior knowledge) or `https:` URL.
   */
  stream(url: string | URL, options: Http2StreamOptions = {}): Promise<Http2StreamingResponse> {
    let highWaterMark: number;
    try {
      checkCallOptions(options);
      highWaterMark = checkInteger('highWaterMark', opt(options.highWaterMark, 65_536), 1);
    } catch (err) {
      return Promise.reject(err);
    }
    let onHead!: (response: Http2StreamingResponse) => void;
    let noHead!: (err: unknown) => void;
    const head = new Promise<Http2StreamingResponse>((resolve, reject) => {
      onHead = resolve;
      noHead = reject;
    });
    // The call settles when the body ends; before the headers, its failure is the caller's.
    this.#call(url, options, { highWaterMark, onHead }).then(() => noHead(new Error('dialguard: the stream ended without a response')), noHead);
    return head;
  }

  /** One call: buffered (`streaming` undefined) or streamed (resolving `streaming.onHead` at the headers). */
  #call(url: string | URL, options: Http2RequestOptions, streaming: Streaming | undefined): Promise<Http2Response> {
    const started = this.#clock.now();
    let target: URL;
    let timeout: number;
    let signal: AbortSignal | undefined;
    try {
      checkCallOptions(options);
      target = typeof url === 'string' ? new URL(url) : url;
      if (target.protocol !== 'http:' && target.protocol !== 'https:') {
        throw new TypeError(`url must be http: or https:, got ${JSON.stringify(target.protocol)}`);
      }
      // The client's own default was checked once, by the constructor.
      timeout = options.timeout === undefined ? this.#requestTimeout : checkDuration('timeout', options.timeout, 1, true);
      signal = checkSignal('signal', options.signal);
      checkBody(options.body);
      if (options.method !== undefined && (typeof options.method !== 'string' || !TOKEN.test(options.method))) {
        throw new TypeError(`method must be an HTTP method name (a token), got ${show(options.method)}`);
      }
    } catch (err) {
      return Promise.reject(err);
    }
    const method = options.method === undefined ? 'GET' : normalizedMethod(options.method);
    let idempotent: boolean;
    try {
      idempotent = checkBoolean('idempotent', options.idempotent, IDEMPOTENT.has(method));
    } catch (err) {
      return Promise.reject(err);
    }
    // One deadline for the whole call (DESIGN rule 10): the wait for a session and every turn the
    // pool takes spend what is left of it, never a fresh one.
    // The call's own signal (the deadline's, and the caller's passed on) whenever there is either:
    // the pool and the stream both listen to it, and the caller's signal gets one listener per
    // call, as with node:http2 alone. Listened to directly, a signal shared by six calls in flight
    // passed Node's default of ten listeners and printed a MaxListenersExceededWarning.
    let stop: (() => void) | undefined;
    const finite = Number.isFinite(timeout);
    if (finite || signal !== undefined) {
      const caller = signal;
      const controller = new AbortController();
      const onCaller = (): void => controller.abort(caller!.reason);
      // Listened to before the timer is armed: a signal-like that cannot be listened to fails the
      // call (a rejection, as every other bad option) and leaves no timer behind.
      try {
        if (caller?.aborted === true) controller.abort(caller.reason);
        else if (caller !== undefined) onCallerAbort(caller, onCaller);
      } catch (err) {
        return Promise.reject(err);
      }
      const timer = finite ? this.#clock.setTimeout(() => controller.abort(new RequestTimeoutError(timeout)), timeout) : undefined;
      signal = controller.signal;
      stop = () => {
        if (timer !== undefined) this.#clock.clearTimeout(timer);
        caller?.removeEventListener('abort', onCaller);
      };
    }
    const use = signal === undefined ? (idempotent ? this.#idempotentUse : NOT_IDEMPOTENT_USE) : { signal, idempotent, resends: this.#resends };
    const origin = target.origin;
    const clock = this.#clock;
    const redial = this.#redial;
    // Through ride(), the pool's callback form: the call's own settlers hear the outcome, so the
    // timer's clearing and the budget's deposit cost no promise of their own, and a failure can go
    // to #again before the caller hears of it.
    // Where a call that fails without entering retry() traces its span (only when someone traces).
    const inCaller = callerContext();
    const call = new Promise<Http2Response>((resolve, reject) => {
      const done = (r: Http2Response): void => {
        stop?.();
        resolve(r);
      };
      const failed = (err: unknown): void => {
        stop?.();
        reject(err);
      };
      this.#pool.ride(
        origin,
        // The exchange ends the trip itself: no promise of its own, none chained on it.
        (trip: Trip<http2.ClientHttp2Session>) => runExchange(trip, target, method, options, signal, started, clock, streaming, trip),
        use,
        redial === undefined
          ? (done as (value: unknown) => void)
          : (r) => {
              // A call that ends without entering retry() deposits here; retry() deposits for
              // those it takes, so each call counts once in the budget.
              redial.budget?.deposit();
              done(r as Http2Response);
            },
        redial === undefined
          ? (err) => {
              traceFailedCall(err, inCaller);
              failed(err);
            }
          : (err, resent = 0, sentBefore = false) => {
              const work = (lease: Lease<http2.ClientHttp2Session>): Promise<Http2Response> => exchange(lease, target, method, options, signal, started, clock, streaming);
              void this.#again(err, resent, sentBefore, redial, origin, work, signal === undefined ? NOT_IDEMPOTENT_USE : { signal, idempotent: false }, timeout, started, signal, inCaller).then(done, failed);
            },
      );
    });
    if (!settledAudience.heard) return call;
    return call.then(
      (r) => {
        events.emit('settled', { ok: true, latency: r.latency, status: r.status, kind: undefined });
        return r;
      },
      (err: unknown) => {
        events.emit('settled', { ok: false, latency: this.#clock.now() - started, status: undefined, kind: classify(err).kind });
        throw err;
      },
    );
  }

  /**
   * The request's first attempt failed with `err`: when no session could be had for it, tries
   * again as `retry()` would (backoff, budget, the same deadline), handing it that failure as its
   * own first attempt. Out of attempts, budget or time before the next wait, it fails as its last
   * dial did (ECONNREFUSED, as raw node:http2 says); the deadline passing, with RequestTimeoutError.
   * `resent`: how many times the pool sent the request again in that first attempt, spent from
   * the attempts; `sentBefore`: whether a send of it may have reached the server (the call then
   * never fails as "not sent", see toldAsSentEarlier, though its redials go on as for any
   * idempotent request); `use` lets the pool send no attempt again (the attempts count every send).
   */
  #again(
    err: unknown,
    resent: number,
    sentBefore: boolean,
    redial: RedialPolicy,
    origin: string,
    fn: (lease: Lease<http2.ClientHttp2Session>) => Promise<Http2Response>,
    use: UseOptions,
    timeout: number,
    started: number,
    signal: AbortSignal | undefined,
    inCaller: InCallerContext | undefined,
  ): Promise<Http2Response> {
    const deadline = started + timeout; // Infinity: none
    const maxAttempts = redial.maxAttempts - resent;
    const told = toldAsSentEarlier(err, undefined, sentBefore);
    if (maxAttempts <= 1 || !mayGoAgain(err) || signal?.aborted === true || this.#closing.signal.aborted) {
      redial.budget?.deposit();
      traceFailedCall(told, inCaller); // not retried: its span here, as retry() traces the retried
      return Promise.reject(told);
    }
    let last = told;
    return retry(
      (attempt) => {
        if (attempt.number === 1) return Promise.reject(told);
        return this.#pool.use(origin, fn, use).catch((e: unknown) => {
          last = e;
          throw e;
        });
      },
      {
        deadline: Number.isFinite(deadline) ? deadline : undefined,
        start: started,
        maxAttempts,
        // After the pool's immediate resends (the session died under the request), the waits go
        // on from where those left the schedule: they were the first retries, with no wait. Was
        // the schedule's first wait again (400-600 ms), the only one left: a warm client's GETs
        // failed a 600 ms restart 5 of 5, where a cold client's spanned it (an outside review).
        backoff: resent === 0 ? redial.backoff : (n, previous, random) => redial.backoff(n + resent, previous, random),
        budget: redial.budget,
        clock: this.#clock,
        signal,
        shutdown: this.#closing.signal,
        retryable: (e) => mayGoAgain(e === told ? err : e), // the first as it was before it was told as sent
        [REPORTED_BY_CALLER]: true, // request() reports the whole call on http2:settled
      },
    ).catch((e: unknown) => {
      // Its last attempt's own error, as raw node:http2 fails, the verdict told on it for
      // retriesOf(): a request failed with a GOAWAY's error once the budget was spent said
      // nothing of the budget (an outside review).
      if (e instanceof RetriesExhaustedError || e instanceof RetryBudgetExhaustedError) throw tellStory(toldAsSentEarlier(last, e), e);
      // Stopped because the next wait would outlast the deadline: the call failed as its dial did;
      // the deadline itself passing is this client's RequestTimeoutError, as on any other path.
      if (e instanceof DeadlineExceededError) throw this.#clock.now() < deadline ? toldAsSentEarlier(last, e) : new RequestTimeoutError(timeout);
      throw e;
    });
  }

  /** Sessions, attempts and requests in flight; counters. */
  stats(): PoolStats {
    return this.#pool.stats();
  }

  /** Listens for session events (opened, retired, gone, closed). */
  on<K extends keyof ConnectionPoolEvents>(event: K, listener: Listener<ConnectionPoolEvents[K]>): Unsubscribe {
    return this.#pool.on(event, listener);
  }

  /**
   * Takes no new requests (they reject with `PoolClosedError`), aborts connects in flight, lets
   * requests in flight finish for up to `closeTimeout`, then closes every session. Resolves once
   * nothing is left open, or `SETTLE_TIMEOUT` (1 s) after that at the latest (ConnectionPool.close).
   */
  close(): Promise<void> {
    if (!this.#closing.signal.aborted) this.#closing.abort(new PoolClosedError());
    return this.#pool.close();
  }

  /** `await using` support: the same as {@link Http2Client.close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/**
 * `settings` as given, once node:http2 accepts them (its own check, `getPackedSettings`). Unchecked,
 * a bad value threw from `http2.connect` after every TCP/TLS connect: counted against the host as
 * a failed dial (one client's options refusing it for every client on the breaker) and leaking the
 * socket.
 */
function checkSettings(settings: http2.Settings | undefined): http2.Settings {
  if (settings === undefined) return NO_PUSH;
  if (typeof settings !== 'object' || settings === null) throw new TypeError(`settings must be an object, got ${show(settings)}`);
  try {
    http2.getPackedSettings(settings);
  } catch (err) {
    const message = `settings: ${err instanceof Error ? err.message : String(err)}`;
    throw err instanceof TypeError ? new TypeError(message, { cause: err }) : new RangeError(message, { cause: err });
  }
  return settings.enablePush === undefined ? { ...NO_PUSH, ...settings } : settings;
}

/**
 * The client takes no pushed stream (it has no API for one), so it says so: with Node's default
 * (`enablePush: true`) a pushing server's unread pushes filled the session's memory, and 2 of 30
 * GETs failed ENHANCE_YOUR_CALM while 29 MB went unread (an outside review).
 */
const NO_PUSH: http2.Settings = Object.freeze({ enablePush: false });

/**
 * `limits` as given, each a number node:http2 takes (an integer at least its minimum; padding
 * 0-4). Unchecked, node:http2 coerced a bad one silently (a negative memory cap became 1 MB), or
 * a key it does not know here (`createConnection`, `protocol`) would have replaced the client's own.
 */
function checkSessionLimits(limits: Http2SessionLimits | undefined): Http2SessionLimits {
  if (limits === undefined) return {};
  if (typeof limits !== 'object' || limits === null) throw new TypeError(`sessionOptions must be an object, got ${show(limits)}`);
  const checked: Record<string, number> = {};
  for (const [key, value] of Object.entries(limits)) {
    if (!(key in SESSION_LIMIT_MIN)) throw new TypeError(`sessionOptions: unknown option ${key} (known: ${SESSION_LIMITS.join(', ')})`);
    if (value === undefined) continue;
    checked[key] = checkInteger(`sessionOptions.${key}`, value, SESSION_LIMIT_MIN[key as keyof typeof SESSION_LIMIT_MIN], key === 'paddingStrategy' ? 4 : 2 ** 32 - 1);
  }
  return checked;
}

/**
 * A body node:http2 can write: none, a string or bytes. Anything else (a stream, an ArrayBuffer,
 * a Blob from a caller without the types) is a TypeError before any stream opens: node:http2
 * threw it only after the request's headers were out, and the stream it left open held one of the
 * shared session's concurrent streams for good (five such calls wedged every caller of a server
 * that allows five).
 */
function checkBody(body: unknown): void {
  if (body === undefined || typeof body === 'string' || body instanceof Uint8Array) return;
  throw Object.assign(new TypeError(`body must be a string or a Uint8Array (a Buffer), got ${show(body)}`), { code: 'ERR_INVALID_ARG_TYPE' });
}

/**
 * The `tls` option: an object, or left out. `null` (or any other value) was taken, then every
 * request failed reading it while its session stayed open: one session leaked per request, and
 * the process never exited (an outside review).
 */
function checkTls(value: unknown): NonNullable<Http2ClientOptions['tls']> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError(`tls must be an object of TLS options, got ${show(value)}`);
  const options = value as NonNullable<Http2ClientOptions['tls']>;
  const { rejectUnauthorized, servername, checkServerIdentity } = options;
  if (rejectUnauthorized !== undefined && typeof rejectUnauthorized !== 'boolean') throw new TypeError(`tls.rejectUnauthorized must be a boolean, got ${show(rejectUnauthorized)}`);
  if (servername !== undefined && typeof servername !== 'string') throw new TypeError(`tls.servername must be a string, got ${show(servername)}`);
  if (checkServerIdentity !== undefined && typeof checkServerIdentity !== 'function') throw new TypeError(`tls.checkServerIdentity must be a function, got ${show(checkServerIdentity)}`);
  // The secure context is built per origin at its first dial: a value Node refuses (`ca: 5`)
  // failed every dial there, before any socket, and each failure counted against the live host,
  // opening it for every client on the breaker (an outside review). Built once here to check.
  try {
    tls.createSecureContext(options);
  } catch (err) {
    throw new TypeError(`tls: ${(err as Error).message}`, { cause: err });
  }
  return options;
}

/** A call's options: an object, or left out (`null` was a raw property read, a string taken). */
function checkCallOptions(options: unknown): void {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object, got ${show(options)}`);
  const headers = (options as { headers?: unknown }).headers;
  if (headers !== undefined && (typeof headers !== 'object' || headers === null)) throw new TypeError(`headers must be an object, got ${show(headers)}`);
}
