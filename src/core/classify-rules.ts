/**
 * The per-error rules behind `classify`: what one error object, looked at on its own, says about
 * a failure. `classify` walks the cause chain and decides which error's verdict wins; this file
 * only reads one error at a time, and never throws, whatever it is given.
 *
 * The shapes recognised here were captured from real failures (see test/core/capture.ts): Node's
 * errno errors (`syscall` tells a failed connect from a dropped connection), undici's `UND_ERR_*`
 * errors, node:http2's `ERR_HTTP2_*` errors, grpc-js `ServiceError`s (numeric `code` plus the
 * `details` grpc-js writes when it makes the status up itself) and dialguard's own errors.
 *
 * @module
 */
import type { FailureKind } from './classify.js';
import { ErrorCodes } from './errors.js';
import { CERT_CODES, NOT_TLS_CODE, TLS_MISMATCH_ALERT } from './tls-codes.js';

/**
 * One error's verdict. `final` means no error deeper in the chain can say more (an errno code is
 * the bottom of the story); a verdict that is not final gives way to a deeper one, keeping its
 * `notSent` (a pending HTTP/2 stream cancelled by its session was never sent, whatever killed the
 * session).
 */
export interface Verdict {
  kind: FailureKind;
  notSent: boolean;
  connectionDead: boolean;
  transient: boolean;
  code: string | undefined;
  final: boolean;
}

/** The fields of one error that the rules read, read once and defensively. */
export interface Facts {
  readonly name: string | undefined;
  /**
   * `code` as found. The rules read it only as a string (an errno, a library's or dialguard's
   * code) or as an integer (a grpc status), and check which before reading.
   */
  readonly code: unknown;
  /** The message, bounded (see {@link boundText}); '' when there is none. */
  readonly message: string;
  readonly syscall: string | undefined;
  /** grpc-js `details`, bounded; undefined when absent. */
  readonly details: string | undefined;
  /** An HTTP status carried as `statusCode` or `status` (100-599). */
  readonly status: number | undefined;
  /**
   * An AbortError's: the `name` of its `cause` (a TimeoutError reason); axios's `ERR_CANCELED`'s:
   * the name of its config's signal's reason. Undefined for any other error.
   */
  readonly causeName: string | undefined;
  /**
   * A 5xx response's body as texts, bounded, when the error holds one (axios: `response.data`,
   * got: `response.body`): where a server relays its upstream's `rpc error: EOF`. The text as it
   * came and, for JSON (a text that parses, or the object a client parsed it into), each string
   * in it (see {@link bodyTexts}); bytes (a Buffer) decoded unless their content-type is no
   * text. Undefined otherwise (never read for another status, or a stream).
   */
  readonly body: readonly string[] | undefined;
}

/** Longest text the rules look at: the first and last part of a longer message. */
const HEAD = 4096;
const TAIL = 2048;

/**
 * A bounded view of `text`: whole when short, else its head and tail (an EOF suffix lives at the
 * end, a status line at the start), so a megabyte message costs no more than a short one.
 */
export function boundText(text: string): string {
  return text.length <= HEAD + TAIL ? text : `${text.slice(0, HEAD)} … ${text.slice(-TAIL)}`;
}

/** `obj[key]`, or undefined if reading it throws (a hostile getter, a revoked Proxy, null). */
export function safeGet(obj: unknown, key: PropertyKey): unknown {
  try {
    return (obj as Record<PropertyKey, unknown>)[key];
  } catch {
    // A hostile getter, a revoked Proxy, null or undefined: nothing to read.
  }
  return undefined;
}

/** Whether `value` is an integer from `min` to `max` (a number of any other kind, or no number, is not). */
export function intIn(value: unknown, min: number, max: number): value is number {
  return Number.isInteger(value) && (value as number) >= min && (value as number) <= max;
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The `name` of an object (an error), if it has a string one. */
function nameOf(value: unknown): string | undefined {
  // Stryker disable next-line ConditionalExpression,LogicalOperator,EqualityOperator,StringLiteral: the check only spares safeGet a throw on null; a primitive or null has no name either way
  return (typeof value === 'object' || typeof value === 'function') && value !== null ? str(safeGet(value, 'name')) : undefined;
}

/**
 * The AbortSignal reason behind a timeout error, when it shows one: the TimeoutError itself (fetch
 * rejects with its signal's reason), an AbortError's cause (node:http, http2, net), axios's
 * CanceledError's config's signal's reason. Undefined otherwise. Never throws. One signal's
 * timeout gives the same reason object to every request it ends: retry() reads a reason met twice
 * in a row as a signal that outlived its attempt (see retry.ts).
 */
export function timeoutReasonOf(err: unknown): object | undefined {
  // Stryker disable next-line ConditionalExpression,LogicalOperator: equivalent: the check only spares the reads; safeGet answers undefined for a primitive or null, and no rule below matches then
  if (typeof err !== 'object' || err === null) return undefined;
  const name = str(safeGet(err, 'name'));
  if (name === 'TimeoutError') return err;
  const code = safeGet(err, 'code');
  const reason = name === 'AbortError' || code === 'ABORT_ERR' ? safeGet(err, 'cause') : code === 'ERR_CANCELED' ? safeGet(safeGet(safeGet(err, 'config'), 'signal'), 'reason') : undefined;
  return nameOf(reason) === 'TimeoutError' ? (reason as object) : undefined;
}

/** Reads the facts of one thrown value; never throws. Primitives other than strings have none. */
export function factsOf(value: unknown): Facts | undefined {
  if (typeof value === 'string') {
    return { name: undefined, code: undefined, message: boundText(value), syscall: undefined, details: undefined, status: undefined, causeName: undefined, body: undefined };
  }
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined;
  const details = str(safeGet(value, 'details'));
  let status: number | undefined;
  for (const key of ['statusCode', 'status']) {
    const s = safeGet(value, key);
    if (intIn(s, 100, 599)) {
      status = s;
      break;
    }
  }
  const code = safeGet(value, 'code');
  const name = str(safeGet(value, 'name'));
  if (status === undefined && code === 'ERR_NON_2XX_3XX_RESPONSE') {
    // got's HTTPError keeps the status on its response only.
    const s = safeGet(safeGet(value, 'response'), 'statusCode');
    if (intIn(s, 100, 599)) status = s;
  }
  return {
    name,
    code,
    message: boundText(str(safeGet(value, 'message')) ?? ''),
    syscall: str(safeGet(value, 'syscall')),
    details: details === undefined ? undefined : boundText(details),
    status,
    // Read for an AbortError only (the one rule that asks): a cause is otherwise read once, by the walk.
    // axios's CanceledError drops the signal's reason, which its config's signal still holds.
    causeName: name === 'AbortError' || code === 'ABORT_ERR' ? nameOf(safeGet(value, 'cause')) : code === 'ERR_CANCELED' ? nameOf(safeGet(safeGet(safeGet(value, 'config'), 'signal'), 'reason')) : undefined,
    // undici's ResponseError (its responseError interceptor) keeps the body on the error itself.
    body: status !== undefined && status >= 500 ? bodyTexts(code === 'UND_ERR_RESPONSE' ? value : safeGet(value, 'response')) : undefined,
  };
}

/**
 * The texts of a response body an HTTP client's error holds: axios's `response.data` or got's
 * `response.body`. Their messages carry only the status ("Request failed with status code 500"),
 * so a server's relayed `rpc error: EOF` went unread and no retry path retried it (an outside
 * review). A body that is JSON gives the strings of its error fields too (see stringsOf): a Go
 * server's `{"error":"read tcp ...: EOF"}`, as text or as the object axios (by default) and got
 * (`responseType: 'json'`) parse it into, was an application error, never retried (another
 * review). Bytes are decoded (see textOfBytes); a stream says nothing here.
 */
function bodyTexts(response: unknown): string[] | undefined {
  const data = safeGet(response, 'data'); // safeGet: undefined for none, null or a primitive
  let body = data === undefined || data === null ? safeGet(response, 'body') : data;
  // Kept as bytes (axios `responseType: 'arraybuffer'`, got `'buffer'`): decoded unless its
  // content-type says it is no text. Read as text only, the same "EOF" body was retried or not by
  // the client's body type (an outside review: axios text 3 sends, arraybuffer 1).
  if (isBytes(body)) body = textOfBytes(body, safeGet(response, 'headers'));
  const texts: string[] = [];
  if (typeof body === 'string') {
    texts.push(boundText(body));
    // Parsed only when read whole (a bounded view of a longer one is no JSON).
    if (body.length <= HEAD + TAIL && JSON_START.test(body)) {
      try {
        stringsOf(JSON.parse(body), texts, 0);
      } catch {
        // Not JSON after all: its text alone.
      }
    }
  } else {
    stringsOf(body, texts, 0);
  }
  return texts.length === 0 ? undefined : texts;
}

/**
 * `bytes` as text (UTF-8), bounded as {@link boundText} bounds (its head and tail decoded, a
 * megabyte costing what a short body does); undefined when `headers` name a content-type that is
 * no text (neither `text/*` nor JSON, XML or a form), whose bytes say nothing readable.
 */
function textOfBytes(bytes: Uint8Array | ArrayBuffer, headers: unknown): string | undefined {
  // axios's AxiosHeaders, got's and undici's header objects all hold it by its lower-case name.
  const type = safeGet(headers, 'content-type');
  if (typeof type === 'string' && type !== '' && !TEXT_TYPE.test(type)) return undefined;
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const decoder = new TextDecoder();
  // Stryker disable next-line ConditionalExpression: equivalent in what is read: decoded whole, a long body is bounded the same by boundText (this spares decoding a megabyte)
  if (view.byteLength <= HEAD + TAIL) return decoder.decode(view);
  return `${decoder.decode(view.subarray(0, HEAD))} … ${decoder.decode(view.subarray(view.byteLength - TAIL))}`;
}

/** Whether `value` is bytes; false for what cannot be asked (a revoked Proxy throws). */
function isBytes(value: unknown): value is Uint8Array | ArrayBuffer {
  try {
    return value instanceof Uint8Array || value instanceof ArrayBuffer;
    // Stryker disable next-line BlockStatement: equivalent: an empty catch answers undefined, as falsy as false
  } catch {
    return false;
  }
}

/** Content-types whose bytes are text. */
const TEXT_TYPE = /^\s*(?:text\/|application\/(?:[\w.+-]*\+)?(?:json|xml|x-www-form-urlencoded)\b)/i;

/** A text that may be JSON holding strings: an object, an array or a string, after any whitespace. */
const JSON_START = /^\s*[{["]/;

/** Most strings read out of one JSON body, and how deep: an error body's fields, not a document. */
const BODY_STRINGS = 16;
const BODY_DEPTH = 3;

/**
 * The fields of a JSON error body that carry its text: Go's and OAuth's `error` (and
 * `error_description`), most APIs' and gRPC-gateway's `message` (and `details`), RFC 9457's
 * `title` and `detail`, JSON:API's `errors`, and the like. Read by name, so a body of a million
 * keys or elements costs what a small one does: a walk of every key cost a parsed 160 000-key
 * body 52 ms a classify, a million-string array 223 ms (an outside review).
 */
const BODY_FIELDS = ['error', 'message', 'msg', 'detail', 'details', 'description', 'error_description', 'reason', 'title', 'cause', 'errors'];

/**
 * Adds to `out` the strings in `value` (a JSON value, or a client's parse of one): a string; an
 * array's first {@link BODY_STRINGS} elements; a plain object's {@link BODY_FIELDS}; so a Buffer,
 * a stream or a class instance is not walked. Bounded in count and depth, each string in length;
 * a getter that throws reads as absent.
 */
function stringsOf(value: unknown, out: string[], depth: number): void {
  // Every call is made with room left in `out` (each loop below checks first).
  if (typeof value === 'string') {
    out.push(boundText(value));
    return;
  }
  // Stryker disable next-line ConditionalExpression: equivalent: a number or boolean has a prototype that is no plain object's, and null's read throws, so each ends below the same
  if (depth >= BODY_DEPTH || typeof value !== 'object' || value === null) return;
  let array: boolean;
  try {
    array = Array.isArray(value);
    const proto: unknown = Object.getPrototypeOf(value);
    if (!array && proto !== Object.prototype && proto !== null) return;
    // Stryker disable next-line BlockStatement: equivalent: a revoked Proxy that went on would read every field as absent (safeGet)
  } catch {
    return; // a revoked Proxy: nothing to read
  }
  if (array) {
    const n = Math.min(Number(safeGet(value, 'length')) || 0, BODY_STRINGS);
    for (let i = 0; i < n && out.length < BODY_STRINGS; i++) stringsOf(safeGet(value, i), out, depth + 1);
    return;
  }
  for (const field of BODY_FIELDS) {
    if (out.length >= BODY_STRINGS) return;
    stringsOf(safeGet(value, field), out, depth + 1);
  }
}

/** Builds a verdict with each kind's defaults; `o` overrides them. */
export function verdict(kind: FailureKind, code: string | undefined, o: Partial<Omit<Verdict, 'kind' | 'code'>> = {}): Verdict {
  return {
    kind,
    code,
    notSent: o.notSent ?? (kind === 'refused' || kind === 'dial'),
    connectionDead: o.connectionDead ?? kind === 'connection',
    transient: o.transient ?? (kind === 'dial' || kind === 'connection' || kind === 'timeout'),
    final: o.final ?? true,
  };
}

/** HTTP/2 error codes by number (RFC 9113 §7). */
const H2_CODES = [
  'NO_ERROR',
  'PROTOCOL_ERROR',
  'INTERNAL_ERROR',
  'FLOW_CONTROL_ERROR',
  'SETTINGS_TIMEOUT',
  'STREAM_CLOSED',
  'FRAME_SIZE_ERROR',
  'REFUSED_STREAM',
  'CANCEL',
  'COMPRESSION_ERROR',
  'CONNECT_ERROR',
  'ENHANCE_YOUR_CALM',
  'INADEQUATE_SECURITY',
  'HTTP_1_1_REQUIRED',
] as const;

/** The RFC name of an HTTP/2 error code, or undefined. */
export function h2Name(code: number): string | undefined {
  return H2_CODES[code];
}

/**
 * Stream resets worth trying again: the server refused the stream before any processing, ended
 * it early (cancel, internal error, no error before a response), or asked us to slow down.
 * Protocol-level codes (a framing or compression bug, a security or version demand) will happen
 * again the same way.
 */
const TRANSIENT_RESETS: ReadonlySet<string | undefined> = new Set(['NO_ERROR', 'REFUSED_STREAM', 'CANCEL', 'INTERNAL_ERROR', 'STREAM_CLOSED', 'ENHANCE_YOUR_CALM']);

/** One HTTP/2 stream was reset with `name`. Only REFUSED_STREAM promises it was never processed. */
export function streamReset(name: string | undefined): Verdict {
  return verdict('stream', name, {
    notSent: name === 'REFUSED_STREAM',
    transient: TRANSIENT_RESETS.has(name),
  });
}

/**
 * Codes that mean the connection was never established: refused, unroutable, or a name that did
 * not resolve (getaddrinfo's codes; c-ares' own codes come with a `query*` syscall).
 */
const DIAL_CODES = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ENONET',
  'ERR_SOCKET_CONNECTION_TIMEOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'EAI_NODATA',
]);
/** Codes that mean an established connection died. */
const CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ENOTCONN', 'ESHUTDOWN', 'ERR_STREAM_PREMATURE_CLOSE', 'ERR_SOCKET_CLOSED']);
function isDnsSyscall(syscall: string | undefined): boolean {
  return syscall === 'getaddrinfo' || syscall === 'getnameinfo' || (syscall !== undefined && syscall.startsWith('query'));
}

/** Node's system and TLS errors, by code (and `syscall`: a connect that failed is a dial). */
function systemVerdict(code: string, f: Facts): Verdict | undefined {
  // A certificate verdict, an alert saying the two ends' configurations disagree, or a peer that
  // does not speak TLS at all: the same handshake fails the same way again, so a retry cannot help.
  if (CERT_CODES.has(code) || code === NOT_TLS_CODE || TLS_MISMATCH_ALERT.test(code)) return verdict('dial', code, { transient: false });
  // A broken TLS record on an established connection kills it with the request maybe sent;
  // every other SSL error arrives during the handshake, before a byte of the request.
  if (code.startsWith('ERR_SSL_')) return verdict(/BAD_RECORD_MAC|DECRYPTION_FAILED|RECORD_OVERFLOW/.test(code) ? 'connection' : 'dial', code);
  if (code === 'ERR_TLS_HANDSHAKE_TIMEOUT') return verdict('dial', code);
  // The socket could not bind as the client's own options ask (a localAddress not on this
  // machine or of the other family, a pinned localPort in use): nothing was sent, and the same
  // options fail the same way again (GuardedAgent waited out 2 retries' backoff: an outside review).
  if (f.syscall === 'bind') return verdict('dial', code, { transient: false });
  if (f.syscall === 'connect' || isDnsSyscall(f.syscall)) return verdict('dial', code);
  // tls.connect: the peer hung up after TCP connected but before the handshake finished.
  if (code === 'ECONNRESET' && f.message.includes('before secure TLS connection was established')) return verdict('dial', code);
  if (DIAL_CODES.has(code)) return verdict('dial', code);
  // axios reports its own `timeout` as ECONNABORTED (no syscall: no socket call failed).
  if (code === 'ECONNABORTED' && f.syscall === undefined && f.name === 'AxiosError') return verdict('timeout', code);
  if (CONNECTION_CODES.has(code)) return verdict('connection', code);
  // A timeout on an established socket (TCP retransmission or keepalive gave up) is a timeout,
  // never by itself proof that the connection must be dropped (seed 003).
  if (code === 'ETIMEDOUT') return verdict('timeout', code);
  return undefined;
}

/**
 * undici's ProxyAgent failing a request whose CONNECT the proxy answered with another status than
 * 200: the tunnel never opened, the origin saw nothing (a RequestAbortedError, read as the
 * caller's cancellation: a 300 ms origin restart behind a proxy failed calls at once, never
 * retried; an outside review). A gateway status (502-504: the proxy could not reach the origin)
 * is a dial that may pass; any other (407: credentials) will not.
 */
const PROXY_TUNNEL = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling$/;

/** undici's errors, by `UND_ERR_*` code (and message, for the catch-all `UND_ERR_INFO`). */
function undiciVerdict(code: string, f: Facts): Verdict {
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_PRX_TLS':
      return verdict('dial', code);
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return verdict('timeout', code);
    case 'UND_ERR_SOCKET':
      // Its cause, when it has one that says more, speaks: undici gives none, but the guarded
      // connector adds the TLS alert that ended the connection (a handshake refused, see
      // adapters/undici/tls-alert.ts).
      return verdict('connection', code, { final: false });
    case 'UND_ERR_ABORTED':
    case 'UND_ERR_ABORT':
    case 'UND_ERR_DESTROYED':
    case 'UND_ERR_CLOSED':
      // Aborted by the caller, or the dispatcher was closed by its owner: nobody's failure.
      return verdict('cancelled', code);
    case 'UND_ERR_RESPONSE':
    case 'UND_ERR_REQ_RETRY':
      // The interceptors that turn a status into an error; without a status, let the cause speak.
      return f.status === undefined ? verdict('unknown', code, { final: false }) : verdict('application', `HTTP_${f.status}`);
    case 'UND_ERR_INFO': {
      const m = f.message;
      if (m.startsWith('No DNS entries')) return verdict('dial', code);
      const rst = /"stream error" received - code (\d+)/.exec(m);
      if (rst !== null) return streamReset(h2Name(Number(rst[1])));
      if (m.includes('stream closed before the response') || m.includes('half-closed')) return streamReset('CANCEL');
      if (m.includes('frameError')) return streamReset('PROTOCOL_ERROR');
      // 'reset', 'socket idle timeout', 'aborted', a failed PING: the socket was destroyed.
      return verdict('connection', code);
    }
    default:
      return verdict('unknown', code);
  }
}

/** node:http2's errors, by `ERR_HTTP2_*` code; the RST or GOAWAY code is in the message. */
function http2Verdict(code: string, f: Facts): Verdict {
  switch (code) {
    case 'ERR_HTTP2_STREAM_ERROR':
      return streamReset(/NGHTTP2_([A-Z0-9_]+)/.exec(f.message)?.[1]);
    case 'ERR_HTTP2_SESSION_ERROR': {
      const n = /error code (\d+)/.exec(f.message);
      return verdict('connection', n === null ? code : (h2Name(Number(n[1])) ?? code));
    }
    case 'ERR_HTTP2_GOAWAY_SESSION':
    case 'ERR_HTTP2_OUT_OF_STREAMS':
      // The session takes no new streams but finishes the ones it has: this request was never
      // sent, and the connection is going away (retire it) rather than dead (abort everything).
      return verdict('connection', code, { notSent: true, connectionDead: false });
    case 'ERR_HTTP2_INVALID_SESSION':
      return verdict('connection', code, { notSent: true });
    case 'ERR_HTTP2_STREAM_CANCEL':
      // A pending stream whose session died before it was sent; the cause says why it died.
      return verdict('connection', code, { notSent: true, final: false });
    case 'ERR_HTTP2_PING_CANCEL':
    case 'ERR_HTTP2_SOCKET_UNBOUND':
      return verdict('connection', code);
    case 'ERR_HTTP2_INVALID_STREAM':
      return verdict('stream', code); // a stream already closed: not transient, as no stream is by default
    default:
      return verdict('unknown', code);
  }
}

/** dialguard's own errors, by their stable code. Wrappers of other errors defer to the cause. */
function dialguardVerdict(code: string): Verdict | undefined {
  switch (code) {
    case ErrorCodes.HOST_UNAVAILABLE:
    case ErrorCodes.NO_SERVER_AVAILABLE:
      return verdict('refused', code);
    case ErrorCodes.CONNECT_TIMEOUT:
      return verdict('dial', code);
    case ErrorCodes.CLIENT_CERTIFICATE_REJECTED:
      // The same certificate gets the same answer: never worth a retry.
      return verdict('dial', code, { transient: false });
    case ErrorCodes.CONNECTION_GONE:
    case ErrorCodes.TRANSPORT_CLOSED:
    case ErrorCodes.KEEPALIVE_TIMEOUT: // a keep-alive PING went unanswered: the peer is silent
      return verdict('connection', code);
    case ErrorCodes.REQUEST_TIMEOUT:
      return verdict('timeout', code);
    case ErrorCodes.DEADLINE_EXCEEDED:
      // The caller's whole budget is spent: nothing more can be tried inside it.
      return verdict('timeout', code, { transient: false });
    case ErrorCodes.POOL_CLOSED:
      return verdict('cancelled', code);
    case ErrorCodes.RETRIES_EXHAUSTED:
    case ErrorCodes.RETRY_BUDGET_EXHAUSTED:
      return verdict('unknown', code, { final: false });
  }
  return undefined;
}

/**
 * The structural verdict of one error: from its code, name or HTTP status, never from its message
 * alone (except where the code's own documentation puts the detail there). grpc statuses are read
 * by `grpcVerdict`.
 */
export function structuralVerdict(f: Facts): Verdict | undefined {
  const { code, name } = f;
  // ioredis's AbortError for a command its closed connection took with it (not resent:
  // `autoResendUnfulfilledCommands: false`, or a pipeline cut mid-way): nobody cancelled it.
  if (name === 'AbortError' && code === undefined && f.message === IOREDIS_CONNECTION_CLOSE) return verdict('connection', 'COMMAND_ABORTED');
  // undici's RequestAbortedError (an AbortError too) for a CONNECT the proxy refused (see PROXY_TUNNEL).
  if (code === 'UND_ERR_ABORTED') {
    const status = PROXY_TUNNEL.exec(f.message)?.[1];
    if (status !== undefined) return verdict('dial', `PROXY_${status}`, { transient: status === '502' || status === '503' || status === '504' });
  }
  if (name === 'AbortError' || code === 'ABORT_ERR') {
    // Node's http, http2 and net wrap an `AbortSignal.timeout` reason (a TimeoutError) in an
    // AbortError: a timeout, as fetch says. Any other reason stays the caller's cancellation,
    // whatever it is (an app aborting with a sibling's ECONNREFUSED did not make its POST unsent).
    if (f.causeName === 'TimeoutError') return verdict('timeout', 'TIMEOUT_ERR');
    return verdict('cancelled', typeof code === 'string' ? code : 'ABORT_ERR');
  }
  // axios's cancellation (a signal, a CancelToken); a signal that ended by AbortSignal.timeout is
  // a timeout, as fetch's is (axios's own docs time requests out so: it was never retried).
  if (code === 'ERR_CANCELED' && name === 'CanceledError') return f.causeName === 'TimeoutError' ? verdict('timeout', 'TIMEOUT_ERR') : verdict('cancelled', code);
  if (name === 'TimeoutError') return verdict('timeout', typeof code === 'string' ? code : 'TIMEOUT_ERR');
  if (typeof code === 'string') {
    if (code.startsWith('DIALGUARD_')) {
      const v = dialguardVerdict(code);
      if (v !== undefined) return v;
    } else if (code.startsWith('UND_ERR')) {
      return undiciVerdict(code, f);
    } else if (code.startsWith('ERR_HTTP2_')) {
      return http2Verdict(code, f);
    } else if (code.startsWith('HPE_')) {
      return verdict('unknown', code); // undici's HTTP parser: the peer does not speak HTTP/1.1
    } else {
      const v = systemVerdict(code, f);
      if (v !== undefined) return v;
    }
  }
  const offline = offlineClientVerdict(f);
  if (offline !== undefined) return offline;
  if (f.status !== undefined) {
    // axios's error for a response body cut off after its status line: the connection died
    // under the response, which was no answer (its status was 200).
    if (code === 'ERR_BAD_RESPONSE' && name === 'AxiosError' && f.message === 'stream has been aborted') return verdict('connection', code);
    // Any other error carrying a 1xx or 2xx status failed after a status line that was fine (a
    // client's own check refused it, a body failed to decode): not the server's failure. Unknown,
    // unless a cause says more.
    if (f.status < 300) return verdict('unknown', `HTTP_${f.status}`, { final: false });
    return verdict('application', `HTTP_${f.status}`);
  }
  return undefined;
}

/**
 * Redis clients' errors for a command they did not send, having no connection: node-redis's
 * ClientOfflineError (`disableOfflineQueue`) and ClientClosedError (its reconnect strategy gave
 * up, or it was closed), ioredis's refusal with `enableOfflineQueue: false`. These set neither a
 * name nor a code, so their fixed messages stand for their classes, matched whole. Not sent, and
 * another server (or the client once back) may serve it: `connection` (its server may be dead),
 * not sent, transient, no connection of ours dead. Classified `unknown` before, so a `ServerSet`
 * over two guarded redis clients neither tried the live one nor moved the dead one back: 90 % of
 * calls failed for 2 s after one node died (an outside review). ioredis's
 * MaxRetriesPerRequestError (which has a name) may carry a command that was sent before its
 * connection died and was queued to be sent again: the same, but not "not sent".
 */
const OFFLINE_CLIENT_MESSAGES: ReadonlyMap<string, string> = new Map([
  ['The client is offline', 'CLIENT_OFFLINE'],
  ['The client is closed', 'CLIENT_CLOSED'],
  ["Stream isn't writeable and enableOfflineQueue options is false", 'CLIENT_OFFLINE'],
]);

/**
 * Redis clients' errors for commands their connection took with it, sent or not: seed 004's EOF in
 * redis's words (an outside review: a BLPOP long poll through retry() whose connection was killed
 * mid-wait failed at once with 3.5 s of its 5 s left, plain and guarded alike, where the same
 * long poll over axios or got was sent again). node-redis's SocketClosedUnexpectedlyError (its
 * socket closed under them: that connection is dead) and ioredis's "Connection is closed." (the
 * client ended, its queue flushed: no connection left to drop), both without a name or code.
 */
const CLOSED_CLIENT_MESSAGES: ReadonlyMap<string, Verdict> = new Map([
  ['Socket closed unexpectedly', verdict('connection', 'SOCKET_CLOSED_UNEXPECTEDLY')],
  ['Connection is closed.', verdict('connection', 'CONNECTION_CLOSED', { connectionDead: false })],
]);

/** ioredis's AbortError message for a command whose connection closed under it. */
const IOREDIS_CONNECTION_CLOSE = 'Command aborted due to connection close';

/** The verdict of a Redis client's own error for a command it could not send, or lost with its connection (see above). */
function offlineClientVerdict(f: Facts): Verdict | undefined {
  if (f.code !== undefined) return undefined;
  if (f.name === 'MaxRetriesPerRequestError') return verdict('connection', 'MAX_RETRIES_PER_REQUEST', { connectionDead: false });
  if (f.name !== 'Error') return undefined;
  // node-redis's ConnectionTimeoutError (no name of its own): its `connectTimeout` ran out before
  // the socket connected (TLS: before its handshake ended); it writes nothing before then. Read
  // as unknown, a `retry()` over a TLS client gave up at once with most of its deadline left.
  if (f.message === 'Connection timeout') return verdict('dial', 'CONNECTION_TIMEOUT');
  const code = OFFLINE_CLIENT_MESSAGES.get(f.message);
  return code === undefined ? CLOSED_CLIENT_MESSAGES.get(f.message) : verdict('connection', code, { notSent: true, connectionDead: false });
}

/**
 * A connection that a remote server saw die, reported to us as text (seed 004): Go's `io.EOF`
 * wrapped by net/rpc (`rpc error: EOF`, nested) or by gRPC-Go's status (`rpc error: code =
 * Unavailable desc = EOF`, its closing transport `desc = transport is closing`), any message
 * ending in `: EOF`, yamux's `stream closed` / `session shutdown`, and Go's and Node's spellings
 * of ECONNRESET / EPIPE. Our own connection delivered that text, so it is not dead; the request may
 * have been processed.
 */
const REMOTE_TRANSPORT: ReadonlyArray<readonly [RegExp, string]> = [
  [/\brpc error: (?:rpc error: )*(?:unexpected )?EOF\b/, 'EOF'],
  [/\bdesc = (?:unexpected )?EOF\b/, 'EOF'],
  [/\bdesc = transport is closing\b/, 'EOF'],
  // At the end, after what may close it: a quote or bracket of the body it came in, a full stop,
  // one short parenthetical (`: EOF (after 3 attempts)`).
  [/(?:^|: |\(|")(?:unexpected )?EOF(?: \([^()]{0,80}\))?[)"'.\]}]*$/, 'EOF'],
  [/\bunexpected EOF\b/, 'EOF'],
  [/\bstream closed\b/, 'EOF'],
  [/\bsession shutdown\b/, 'EOF'],
  [/\bconnection reset by peer\b/, 'ECONNRESET'],
  [/\bbroken pipe\b/, 'EPIPE'],
];

/**
 * Node's spellings of ECONNRESET / EPIPE, as a Node server relays them (`{"error":"read
 * ECONNRESET"}`) or a library re-wraps an error by its message alone (`new Error(err.message)`,
 * its code lost): read as unknown, a bare "EOF" was retried and a bare "read ECONNRESET" was not
 * (an outside review, r148). Not in a grpc status's text: grpc-js words its own transport's
 * failures so, and a server's status quoting them (INTERNAL "... triggered by internal client
 * error: read ECONNRESET") stays its answer.
 */
const NODE_TRANSPORT: ReadonlyArray<readonly [RegExp, string]> = [
  [/\bECONNRESET\b/, 'ECONNRESET'],
  [/\bsocket hang up\b/, 'ECONNRESET'],
  [/\bEPIPE\b/, 'EPIPE'],
];

/** Nomad's and Consul's API clients: `Unexpected response code: 500 (...)`. */
const STATUS_LINE = /^Unexpected response code: ([1-5]\d\d)\b/;

/** The verdict of the built-in text patterns for one error, if any matches. */
export function patternVerdict(f: Facts): Verdict | undefined {
  const status = STATUS_LINE.exec(f.message);
  // A 4xx status line is the server's verdict on the request; transport words after it do not change it.
  if (status !== null && status[1]!.startsWith('4')) return verdict('application', `HTTP_${status[1]}`, { final: false });
  const texts = [f.message];
  if (f.details !== undefined) texts.push(f.details);
  if (f.body !== undefined) texts.push(...f.body);
  for (const text of texts) {
    const t = text.trimEnd();
    for (const [re, code] of REMOTE_TRANSPORT) {
      if (re.test(t)) return verdict('connection', code, { connectionDead: false, final: false });
    }
    if (f.details !== undefined) continue; // a grpc status (see NODE_TRANSPORT)
    for (const [re, code] of NODE_TRANSPORT) {
      if (re.test(t)) return verdict('connection', code, { connectionDead: false, final: false });
    }
  }
  if (status !== null) return verdict('application', `HTTP_${status[1]}`, { final: false });
  return undefined;
}
