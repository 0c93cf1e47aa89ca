/**
 * One HTTP/2 exchange on a leased session: the request's stream, and its response buffered or
 * streamed (a web ReadableStream whose reader drives flow control). Split from client.ts, which
 * keeps the options, the deadline and the pool.
 *
 * @module
 */
import http2 from 'node:http2';
import type { Clock } from '../core/clock.js';
import { afterAnswerBegan, heardOnLiveConnection } from '../core/classify.js';
import { h2Name } from '../core/classify-rules.js';
import { TransportClosedError } from '../core/errors.js';
import type { Lease } from '../pool/pooled-connection.js';
import type { Http2RequestOptions, Http2Response, Http2StreamingResponse } from './client.js';
import { goawayOf, leftUnsent, retireRefusing, retireUnusable } from './session-connector.js';
import { isError } from '../core/validate.js';

/** What a streamed call needs: the body's buffer bound, and where its headers go. */
export interface Streaming {
  readonly highWaterMark: number;
  readonly onHead: (response: Http2StreamingResponse) => void;
}

/** The `body` of the response a streamed call settles with internally (the caller has the stream). */
const EMPTY = Buffer.alloc(0);

/** node:http2's request options for a request with a body: its end comes with the body. */
const KEEP_OPEN: http2.ClientSessionRequestOptions = Object.freeze({ endStream: false });

/** What a settled exchange's listeners hold instead of the headers and chunks they gathered. */
const NO_HEADERS: http2.IncomingHttpHeaders = Object.freeze({});
const NO_CHUNKS = Object.freeze([]) as unknown as Buffer[];

/**
 * Where an exchange's outcome goes, once: the pool's `Trip` itself on the healthy path (no
 * promise made for the exchange), or a promise's settlers ({@link exchange}).
 */
export interface ExchangeEnd {
  end(ok: boolean, value?: unknown): void;
}

/** {@link runExchange}'s arguments but where its outcome goes. */
type ExchangeArgs = Parameters<typeof runExchange> extends [...infer A, ExchangeEnd] ? A : never;

/** {@link runExchange} as a promise of the response: for the pool's `use()` (a redial's attempts). */
export function exchange(...args: ExchangeArgs): Promise<Http2Response> {
  return new Promise((resolve, reject) => {
    runExchange(...args, { end: (ok, value) => (ok ? resolve(value as Http2Response) : reject(value)) });
  });
}

/**
 * Runs one stream on the leased session; `signal` is the caller's, bounded by the call's
 * deadline; `started` is when the call began (for the response's `latency`). The outcome goes to
 * `to.end` once: a response at once (from the stream's last event), a failure a microtask later,
 * as a promise's rejection would have reached the pool, so that whatever the same turn tells the
 * pool about the session (a GOAWAY, its death) is known when the failure lands. Throws at once,
 * before any stream, when node:http2 refuses to open one.
 */
export function runExchange(
  lease: Lease<http2.ClientHttp2Session>,
  url: URL,
  method: string,
  options: Http2RequestOptions,
  signal: AbortSignal | undefined,
  started: number,
  clock: Clock,
  streaming: Streaming | undefined,
  to: ExchangeEnd,
): void {
  const session = lease.connection;
  // Read now, not in the stream's listeners: what they capture lives as long as node:http2 keeps
  // the stream, often past a young-generation GC, and the lease would drag the pool's whole ride
  // (its callback, the call's URL and options) into the old generation with it.
  const connectionId = lease.id;
  // A streamed call commits its ride at the headers (never sent again once its answer has begun);
  // a buffered one keeps no hold on the lease.
  const committing = streaming === undefined ? undefined : lease;
  // Never a stream on a session that can take none: the request was certainly not sent. The pool
  // hears it first (node:http2 may have closed the session on its own, with no event yet), so the
  // request goes back for a fresh session, whatever its method.
  if (session.destroyed) return unusable(session, to, notSent('ERR_HTTP2_INVALID_SESSION', 'The session has been destroyed'));
  if (session.closed || goawayOf(session) !== undefined) {
    return unusable(session, to, notSent('ERR_HTTP2_GOAWAY_SESSION', 'New streams cannot be created after receiving a GOAWAY'));
  }
  const body = options.body;
  const path = `${url.pathname}${url.search}`;
  const extra = options.headers;
  // A literal when there are no extra headers: a spread builds the object on V8's slow path.
  const headers = extra === undefined ? { ':method': method, ':path': path } : { ...extra, ':method': method, ':path': path };
  // node:http2 ends a GET, HEAD or DELETE stream with its headers unless told otherwise: a body
  // given with one was then never sent (the server ran the request without it, and the write
  // failed ERR_STREAM_WRITE_AFTER_END). With a body the stream stays open for it, whatever the method.
  let stream: http2.ClientHttp2Stream;
  try {
    stream = body === undefined ? session.request(headers) : session.request(headers, KEEP_OPEN);
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    // The session could take no stream after all (closed or destroyed between the checks above
    // and here): certainly not sent. Anything else node:http2 throws (a header it refuses) is
    // the request's own, as before.
    if (code === 'ERR_HTTP2_INVALID_SESSION' || code === 'ERR_HTTP2_GOAWAY_SESSION') return unusable(session, to, err);
    throw err;
  }
  const ex = new Exchange(stream, session, url, method, body, signal, started, clock, streaming, connectionId, committing, to);
  if (signal?.aborted === true) {
    // Cancelled before any listener: one for 'error', so a failure node:http2 reports on the
    // cancelled stream (its session destroyed with an error) is not an uncaught one (an outside
    // review's reading; raw node:http2 crashed the process so).
    stream.on('error', ignore);
    return ex.finish(signal.reason);
  }
  // The exchange is the abort listener itself (its handleEvent): no closure a call for it.
  signal?.addEventListener('abort', ex, { once: true });
  // Every listener is one module-level function for all streams, finding its exchange on the
  // stream: ten closures and their context a call were a tenth of the healthy path's extra CPU.
  (stream as Carrying)[EXCHANGE] = ex;
  // Informational headers (103 Early Hints) begin the answer too: the request is under way.
  stream.on('headers', markInformed);
  stream.on('response', onResponse);
  stream.on('trailers', onTrailers);
  stream.on('data', onData);
  // A stream the peer reset with NO_ERROR or CANCEL before any response also ends: that is no
  // response. Only a response the server sent resolves.
  stream.on('end', onEnd);
  // The session was up when the stream opened: whatever its code, this error is never a dial's
  // (an SSL record error ends a live session with the same code a handshake fails with, and
  // read as a dial it let a POST the server had received be sent again).
  stream.on('error', onError);
  stream.on('close', onClose);
  // end() rather than the endStream option: measured faster on Node 20 (A/B, same run), for
  // one empty DATA frame more on the wire. A body it cannot write (the client checks first)
  // resets the stream, never leaves it open on the shared session.
  try {
    stream.end(body);
  } catch (err) {
    stream.close(http2.constants.NGHTTP2_CANCEL);
    ex.failed(err);
  }
}

/** An 'error' listener that does nothing: the call has ended already. */
function ignore(): void {}

/** Where a stream's listeners find their exchange. */
const EXCHANGE = Symbol('dialguard.http2.exchange');
type Carrying = http2.ClientHttp2Stream & { [EXCHANGE]: Exchange };

function onResponse(this: Carrying, h: http2.IncomingHttpHeaders): void {
  this[EXCHANGE].response(h);
}
function onTrailers(this: Carrying, t: http2.IncomingHttpHeaders): void {
  this[EXCHANGE].trailers(t);
}
function onData(this: Carrying, chunk: Buffer): void {
  this[EXCHANGE].data(chunk);
}
function onEnd(this: Carrying): void {
  this[EXCHANGE].end();
}
function onError(this: Carrying, err: unknown): void {
  heardOnLiveConnection(err);
  this[EXCHANGE].failed(err);
}
function onClose(this: Carrying): void {
  this[EXCHANGE].close();
}

/**
 * One stream's exchange: what its listeners gather, and how it settles. What it holds is dropped
 * once the call settles: node:http2 may keep a finished stream (and so its exchange) past a
 * young-generation GC, and copying the response (through the trip that ends the call), its
 * headers and chunks there costs each call.
 */
class Exchange {
  #to: ExchangeEnd | undefined;
  #status = 0;
  #responded = false;
  #headers: http2.IncomingHttpHeaders = NO_HEADERS;
  #chunks: Buffer[] = [];
  /** Bytes of body received. */
  #received = 0;
  #settled = false;
  /** The streamed body's controller, once the headers came (`streaming` only). */
  #sink: ReadableStreamDefaultController<Uint8Array> | undefined = undefined;
  /**
   * Body frames that came while the reader was behind (something already queued for it), handed
   * over as one piece at its next read, as a node stream's `read()` joins what it buffered: each
   * frame a piece of its own (~11 KiB) made a reader doing work per piece 5x slower than over
   * raw node:http2, which hands 64 KiB pieces (an outside review, r148).
   */
  #pending: Buffer[] | undefined = undefined;
  #pendingBytes = 0;
  #response: Http2Response | undefined = undefined;
  /** The streamed response handed to the caller at its headers (`streaming` only). */
  #head: Http2StreamingResponse | undefined = undefined;
  /** What the server sent after the body, if anything (node:http2 emits it before 'end'). */
  #trailers: http2.IncomingHttpHeaders | undefined = undefined;

  constructor(
    readonly stream: http2.ClientHttp2Stream,
    readonly session: http2.ClientHttp2Session,
    readonly url: URL,
    readonly method: string,
    readonly body: string | Uint8Array | undefined,
    readonly signal: AbortSignal | undefined,
    readonly started: number,
    readonly clock: Clock,
    readonly streaming: Streaming | undefined,
    readonly connectionId: number,
    /** A streamed call's lease, committed at the headers (never sent again once its answer has begun). */
    readonly committing: Lease<http2.ClientHttp2Session> | undefined,
    to: ExchangeEnd,
  ) {
    this.#to = to;
  }

  /**
   * The call's end, once. The pool ends the call itself when the session dies (destroying it ends
   * the stream too); a caller's abort or the call's deadline must also cancel the stream, so the
   * peer stops.
   */
  finish(err: unknown, value?: Http2Response): void {
    if (this.#settled) return;
    this.#settled = true;
    const stream = this.stream;
    // An upload left unsent (its timeout, the caller's abort, an early answer): node:http2 keeps
    // what was still queued charged to the session's memory after the stream ends (see
    // leftUnsent). A body written whole has left nothing queued by its response's end (none of
    // 400 uploads of 1 B to 5 MB, measured), so a healthy call reads one length.
    if (this.body !== undefined && stream.writableLength > 0) leftUnsent(this.session, stream.writableLength);
    const settle = this.#to!;
    this.#to = undefined;
    this.#headers = NO_HEADERS;
    this.#chunks = NO_CHUNKS;
    this.#trailers = undefined;
    this.#head = undefined;
    this.signal?.removeEventListener('abort', this);
    if (err === undefined) {
      this.#flush();
      this.#sink?.close();
      settle.end(true, value);
      return;
    }
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    // Closed by the peer but kept by node:http2 for an upload it can no longer send: nothing
    // else would end it, and it held the session, and the process, open past close().
    else if (!stream.destroyed) stream.destroy();
    if (this.#sink !== undefined) {
      // The answer has begun: the failure is the body's, and the call is over (never resent).
      this.#sink.error(err);
      settle.end(true, this.#response);
      return;
    }
    failLater(settle, err);
  }

  /**
   * The stream failed: before any response, if the peer's GOAWAY excluded it, it was never
   * processed; after the response began, whatever the failure says, it was (a REFUSED_STREAM
   * after the headers read as never processed, and a POST ran 3 times; an outside review).
   */
  failed(err: unknown): void {
    const stream = this.stream;
    if (this.#responded || (stream as Informed)[INFORMED] === true) return this.finish(afterAnswerBegan(withRstCode(err, stream.rstCode)));
    const goaway = goawayOf(this.session);
    if (goaway !== undefined && (stream.id === undefined || stream.id > goaway.lastStreamID)) this.finish(unprocessed(stream.id, goaway, err));
    else this.finish(withRstCode(err, stream.rstCode));
  }

  /** The caller's signal aborted (the exchange is its listener). */
  handleEvent(): void {
    this.finish(this.signal!.reason);
  }

  /**
   * A stream that closed without an error of its own: reset by the peer, or cut by its
   * session's end (the session is destroyed then: the transport died under it, which lets an
   * idempotent call go back, as the pool's release of a dead session would).
   */
  #closedError(code: number, answered: boolean): Error {
    const reset = streamClosedError(code, answered);
    return this.session.destroyed ? new TransportClosedError(this.url.origin, 'HTTP/2 session', { cause: reset }) : reset;
  }

  response(h: http2.IncomingHttpHeaders): void {
    this.#responded = true;
    this.#headers = h;
    const status = (this.#status = Number(h[':status']));
    const streaming = this.streaming;
    if (streaming === undefined) return;
    const stream = this.stream;
    const latency = this.clock.now() - this.started;
    const readable = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#sink = controller;
        },
        // Read down to nothing queued: what waited is its next piece, whole; then let node:http2
        // read (and open the flow-control window) again.
        pull: (controller) => {
          if ((controller.desiredSize ?? 0) >= streaming.highWaterMark) this.#flush();
          if (this.#pendingBytes < streaming.highWaterMark) stream.resume();
        },
        cancel: () => {
          this.#sink = undefined; // cancelled by its reader: nothing more to deliver
          this.#pending = undefined;
          if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
          this.finish(undefined, this.#response);
        },
      },
      { highWaterMark: streaming.highWaterMark, size: (chunk) => chunk.byteLength },
    );
    const connectionId = this.connectionId;
    this.#response = { status, headers: h, body: EMPTY, connectionId, latency };
    this.committing!.commit();
    this.#head = { status, headers: h, body: readable, connectionId, latency };
    streaming.onHead(this.#head);
  }

  trailers(t: http2.IncomingHttpHeaders): void {
    this.#trailers = t;
    if (this.#head !== undefined) this.#head.trailers = t;
  }

  data(chunk: Buffer): void {
    if (this.#settled) return;
    this.#received += chunk.length;
    const sink = this.#sink;
    if (sink === undefined) {
      if (this.streaming === undefined) this.#chunks.push(chunk);
      return;
    }
    const highWaterMark = this.streaming!.highWaterMark;
    // Nothing queued for the reader: its piece now. Else it waits, joined with what came since,
    // until the reader has taken what is queued.
    if ((sink.desiredSize ?? 0) >= highWaterMark && this.#pendingBytes === 0) sink.enqueue(bytesOf(chunk));
    else {
      (this.#pending ??= []).push(chunk);
      this.#pendingBytes += chunk.length;
    }
    // The reader is behind (a piece of `highWaterMark` waits, or one piece queued is that big):
    // stop reading, so flow control stops the server. At most two such pieces are held.
    if (this.#pendingBytes >= highWaterMark || (sink.desiredSize ?? 0) <= 0) this.stream.pause();
  }

  /** Hands the reader what waited for it (see {@link Exchange.#pending}) as one piece. */
  #flush(): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    const piece = pending.length === 1 ? pending[0]! : Buffer.concat(pending, this.#pendingBytes);
    this.#pendingBytes = 0;
    this.#sink?.enqueue(bytesOf(piece));
  }

  end(): void {
    if (this.#settled) return;
    const stream = this.stream;
    if (!this.#responded) {
      // Reset (closed, its code set): rejected now with the code. 'close' usually follows, but
      // not while part of an upload still waits on flow control: node:http2 then keeps the
      // writable side, and the call hung until its timeout (for ever without one; an outside
      // review). finish() destroys such a stream.
      if (stream.closed && stream.rstCode !== undefined) this.failed(this.#closedError(stream.rstCode, false));
      return;
    }
    // node:http2 ends the readable side of a stream that closed abnormally too (reset, or its
    // session destroyed mid-body), with the close code already set: that body is cut short.
    const code = stream.rstCode;
    if (code !== undefined && code !== http2.constants.NGHTTP2_NO_ERROR) return this.failed(this.#closedError(code, true));
    // Reset with NO_ERROR (the stream is closed already): a whole answer when the server stops
    // the upload after it (RFC 9113 §8.1), a body cut short when it is shorter than its
    // content-length (node:http2 checks that only at an END_STREAM: 8 of 100 bytes were a 200).
    if (code !== undefined && shortOfLength(this.#headers, this.#received, this.method, this.#status)) return this.failed(this.#closedError(code, true));
    if (this.streaming !== undefined) return this.finish(undefined, this.#response);
    const whole: Http2Response = {
      status: this.#status,
      headers: this.#headers,
      body: Buffer.concat(this.#chunks),
      connectionId: this.connectionId,
      latency: this.clock.now() - this.started,
    };
    if (this.#trailers !== undefined) whole.trailers = this.#trailers; // the key only when there are some
    this.finish(undefined, whole);
  }

  close(): void {
    const stream = this.stream;
    if (stream.rstCode === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM) retireRefusing(this.session);
    if (!this.#settled) this.failed(this.#closedError(stream.rstCode, this.#responded));
  }
}

/**
 * Whether a response holds fewer body bytes than its `content-length` says (a HEAD's, a 204's and
 * a 304's say nothing of a body).
 */
function shortOfLength(headers: http2.IncomingHttpHeaders, received: number, method: string, status: number): boolean {
  const length = headers['content-length'];
  if (length === undefined || method === 'HEAD' || status === 204 || status === 304) return false;
  const expected = Number(length);
  return Number.isSafeInteger(expected) && received < expected;
}

/** Set on a stream that received informational (1xx) headers: its request is under way. */
const INFORMED = Symbol('dialguard.http2.informed');
type Informed = http2.ClientHttp2Stream & { [INFORMED]?: true };

/** A stream's 'headers' listener (1xx headers): one function for every stream, no closure a call. */
function markInformed(this: Informed): void {
  this[INFORMED] = true;
}

/** Ends `to` with `err` a microtask from now (see {@link runExchange}). */
function failLater(to: ExchangeEnd, err: unknown): void {
  queueMicrotask(() => to.end(false, err));
}

/** `session` took no stream: the pool retires it (or drops it, destroyed) before `err` reaches it. */
function unusable(session: http2.ClientHttp2Session, to: ExchangeEnd, err: unknown): void {
  retireUnusable(session);
  failLater(to, err);
}

/** A stream that closed without an error event and without a complete response. */
function streamClosedError(rstCode: number, responded: boolean): Error {
  const name = h2Name(rstCode) ?? String(rstCode);
  const when = responded ? 'before the response ended' : 'before any response';
  return Object.assign(new Error(`Stream closed with error code NGHTTP2_${name} ${when}`), {
    code: 'ERR_HTTP2_STREAM_ERROR',
    rstCode,
  });
}

/**
 * node:http2's own stream error (`ERR_HTTP2_STREAM_ERROR`, a reset with an error code) with the
 * stream's `rstCode` on it, as this client's own reset errors carry it.
 */
function withRstCode(err: unknown, rstCode: number | undefined): unknown {
  if (rstCode === undefined || !isError(err) || (err as { code?: unknown }).code !== 'ERR_HTTP2_STREAM_ERROR') return err;
  if ((err as { rstCode?: unknown }).rstCode !== undefined || !Object.isExtensible(err)) return err;
  Object.defineProperty(err, 'rstCode', { value: rstCode, configurable: true, writable: true, enumerable: true });
  return err;
}

/** A request that was certainly not sent, with node:http2's code for why. */
function notSent(code: 'ERR_HTTP2_INVALID_SESSION' | 'ERR_HTTP2_GOAWAY_SESSION', message: string): Error {
  return Object.assign(new Error(message), { code });
}

/**
 * A stream the peer's GOAWAY excluded (RFC 9113 §6.8): never processed, safe to send again. It
 * carries the GOAWAY's `lastStreamID`: 0 says the session processed nothing (see mayGoAgain in
 * client.ts).
 */
function unprocessed(id: number | undefined, goaway: { code: number; lastStreamID: number }, cause: unknown): Error {
  const name = h2Name(goaway.code) ?? String(goaway.code);
  return Object.assign(
    new Error(`HTTP/2 stream ${id ?? '(unsent)'} was not processed: the peer's GOAWAY (${name}, last stream ${goaway.lastStreamID}) excluded it`, { cause }),
    { code: 'ERR_HTTP2_GOAWAY_SESSION', lastStreamID: goaway.lastStreamID },
  );
}

/** `buf`'s bytes as the plain Uint8Array a web stream's reader is handed (a view, no copy). */
function bytesOf(buf: Buffer): Uint8Array {
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}
