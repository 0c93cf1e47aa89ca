/**
 * One request through the retrying layer: the caller's handler sees one request, while
 * underneath it dialguard's `retry()` runs as many undici attempts as is safe.
 *
 * - The caller gets its controller at once, so an abort reaches the call whatever it is doing:
 *   waiting for a dial, waiting out a backoff, reading the body. An abort is never a failure of
 *   anything: it ends the call with the caller's reason and the breaker hears nothing of it.
 * - Each attempt's headers and body timeouts are cut to what is left of the call's deadline.
 * - A refused origin fails before entering undici: the breaker is asked first.
 * - Once the response is handed to the caller, the call is committed: nothing is retried.
 * - A response with a retryable status (429, 502, 503, 504 by default) to an idempotent request
 *   is held back (its body buffered, up to 64 KiB) while another attempt may still be made; its
 *   `Retry-After` lengthens the wait. When no retry comes, the caller gets that response as it
 *   came: the server answered, so the caller sees the answer, not an error.
 * - A one-shot body (a stream, fetch's body) that an attempt started reading is never sent again.
 *
 * @module
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { RetriesExhaustedError } from '../../core/errors.js';
import { hostKey } from '../../guard/host-key.js';
import { type RetryAttempt, type RetryPredicate, retry } from '../../retry/retry.js';
import type { Schedule } from '../../core/backoff.js';
import type { RetrySettings } from './options.js';
import { type RequestBody, requestBody } from './request-body.js';
import { retryAfterMs } from './retry-after.js';

type Dispatch = Dispatcher.Dispatch;
type Handler = Dispatcher.DispatchHandler;
type Controller = Dispatcher.DispatchController;

/** Methods that may be repeated (RFC 9110 §9.2.2) when the request's own `idempotent` is unset. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/** Most body bytes of a held response buffered; past it the response goes to the caller. */
const MAX_HELD = 64 * 1024;

/** A response with a retryable status, held back while the call decides whether to try again. */
class HeldResponse extends Error {
  override readonly name = 'HeldResponse';
  constructor(
    readonly statusCode: number,
    readonly headers: IncomingHttpHeaders,
    readonly statusMessage: string | undefined,
    readonly chunks: Buffer[],
    readonly trailers: IncomingHttpHeaders,
  ) {
    super(`the server answered ${statusCode}`);
  }
}

/** An attempt's deadline cut: `cap` (0 = none) lowered to `remaining` when the call has a deadline. */
function cut(cap: number, remaining: number): number {
  if (remaining === Infinity) return cap;
  const left = Math.max(1, Math.ceil(remaining));
  return cap === 0 ? left : Math.min(cap, left);
}

/** One request, retried underneath its caller's handler. Also the controller the caller holds. */
export class GuardedCall implements Controller {
  readonly #s: RetrySettings;
  readonly #dispatch: Dispatch;
  readonly #opts: Dispatcher.DispatchOptions;
  readonly #handler: Handler;
  readonly #body: RequestBody;
  readonly #idempotent: boolean;
  readonly #key: string | undefined;
  readonly #headersTimeout: number;
  readonly #bodyTimeout: number;
  readonly #abort = new AbortController();
  #current: Attempt | undefined;
  /** The last attempt's held response, until another attempt starts. */
  #held: HeldResponse | undefined;
  #retryAfter = 0;
  #finished = false;
  #paused = false;

  constructor(s: RetrySettings, dispatch: Dispatch, opts: Dispatcher.DispatchOptions, handler: Handler) {
    this.#s = s;
    this.#dispatch = dispatch;
    this.#opts = opts;
    this.#handler = handler;
    this.#body = requestBody(opts.body);
    const method = String(opts.method).toUpperCase();
    this.#idempotent = typeof opts.idempotent === 'boolean' ? opts.idempotent : IDEMPOTENT.has(method);
    this.#key = breakerKey(s, opts.origin);
    this.#headersTimeout = lowest(s.headersTimeout, opts.headersTimeout);
    this.#bodyTimeout = lowest(s.bodyTimeout, opts.bodyTimeout);
  }

  /** Hands the caller its controller and runs the attempts. */
  start(): void {
    try {
      this.#handler.onRequestStart?.(this, {});
    } catch (err) {
      this.abort(asError(err)); // ends the call with it
    }
    retry((a) => this.#attempt(a), {
      signal: this.#abort.signal,
      timeout: this.#s.timeout,
      maxAttempts: this.#s.maxAttempts,
      idempotent: this.#idempotent,
      backoff: this.#backoff,
      retryable: this.#retryable,
      budget: this.#s.budget,
      clock: this.#s.clock,
      random: this.#s.random,
      classify: this.#s.classify,
      onResult: this.#s.onResult,
    }).then(undefined, (err: unknown) => this.#fail(err));
  }

  // --- the controller the caller holds ---

  get aborted(): boolean {
    return this.#abort.signal.aborted;
  }

  get reason(): Error | null {
    return this.#abort.signal.aborted ? (this.#abort.signal.reason as Error) : null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get rawHeaders(): Controller['rawHeaders'] {
    return this.#current?.controller?.rawHeaders;
  }

  get rawTrailers(): Controller['rawTrailers'] {
    return this.#current?.controller?.rawTrailers;
  }

  /** The caller gives up: the call ends with `reason`, whatever it was doing. */
  abort(reason?: Error): void {
    if (this.#finished || this.#abort.signal.aborted) return;
    this.#abort.abort(reason ?? new DOMException('This operation was aborted', 'AbortError'));
  }

  pause(): void {
    this.#paused = true;
    this.#current?.controller?.pause();
  }

  resume(): void {
    this.#paused = false;
    this.#current?.controller?.resume();
  }

  // --- what attempts report ---

  /** Whether a response with `status` should be held back for a possible retry. */
  hold(attempt: Attempt, status: number, headers: IncomingHttpHeaders): boolean {
    const s = this.#s;
    if (!s.retryStatuses.has(status) || !this.#idempotent || this.#body.consumed) return false;
    if (attempt.number >= s.maxAttempts || this.#abort.signal.aborted) return false;
    const after = retryAfterMs(headers['retry-after']) ?? 0;
    if (after > s.maxRetryAfter || s.clock.now() + after >= attempt.deadline) return false;
    this.#retryAfter = after;
    return true;
  }

  /** The response goes to the caller: from now on nothing is retried. */
  commit(status: number, headers: IncomingHttpHeaders, statusMessage: string | undefined): void {
    this.#handler.onResponseStart?.(this, status, headers, statusMessage);
  }

  /** An informational (1xx) response, passed on without committing. */
  info(status: number, headers: IncomingHttpHeaders, statusMessage: string | undefined): void {
    this.#handler.onResponseStart?.(this, status, headers, statusMessage);
  }

  data(chunk: Buffer): void {
    this.#handler.onResponseData?.(this, chunk);
  }

  end(trailers: IncomingHttpHeaders): void {
    this.#finished = true;
    this.#handler.onResponseEnd?.(this, trailers);
  }

  // --- the loop ---

  #attempt(a: RetryAttempt): Promise<void> {
    this.#held = undefined;
    this.#retryAfter = 0;
    const refusal = this.#refusal();
    if (refusal !== undefined) return Promise.reject(refusal);
    const remaining = a.remaining;
    const attempt = new Attempt(this, a.number, a.deadline);
    this.#current = attempt;
    const opts = {
      ...this.#opts,
      body: this.#body.forAttempt() as Dispatcher.DispatchOptions['body'],
      headersTimeout: cut(this.#headersTimeout, remaining),
      bodyTimeout: cut(this.#bodyTimeout, remaining),
    };
    try {
      this.#dispatch(opts, attempt);
    } catch (err) {
      attempt.onResponseError(undefined, err as Error);
    }
    return attempt.promise.then(undefined, (err: unknown) => {
      if (err instanceof HeldResponse) this.#held = err;
      throw err;
    });
  }

  readonly #backoff: Schedule = (n, previous, random) => Math.max(this.#retryAfter, this.#s.backoff(n, previous, random));

  readonly #retryable: RetryPredicate = (err, classification, attempt) => {
    // Never again once the caller has the response, or once a one-shot body has been read.
    if (this.#current?.forwarded === true || this.#body.consumed) return false;
    if (err instanceof HeldResponse) return true; // decided when it was held
    return this.#s.retryable?.(err, classification, attempt);
  };

  /** The breaker's refusal of this origin, if it would refuse a dial now (no I/O either way). */
  #refusal(): unknown {
    const breaker = this.#s.breaker;
    if (breaker === null || this.#key === undefined) return undefined;
    const state = breaker.state(this.#key);
    if (state === undefined || state.state === 'closed' || state.retryAfter <= 0) return undefined;
    try {
      // Refuses (and counts the refusal), as the snapshot said; a permit granted because the
      // window ended in between is given back untouched, and the dial will ask again.
      breaker.admit(this.#key).abandoned();
      return undefined;
    } catch (err) {
      return err;
    }
  }

  /** The call ends without a response of its own: the held one, or the error. */
  #fail(err: unknown): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#current?.abandon(err);
    const held = this.#held;
    const handler = this.#handler;
    if (held !== undefined && !this.#abort.signal.aborted) {
      handler.onResponseStart?.(this, held.statusCode, held.headers, held.statusMessage);
      for (const chunk of held.chunks) handler.onResponseData?.(this, chunk);
      handler.onResponseEnd?.(this, held.trailers);
      return;
    }
    handler.onResponseError?.(this, asError(ownError(err)));
  }
}

/**
 * What the caller is told: retry()'s error, except that a call allowed one attempt (retries
 * off) fails with that attempt's own error, not a RetriesExhaustedError around it.
 */
function ownError(err: unknown): unknown {
  if (err instanceof RetriesExhaustedError && err.errors.length === 1) return err.errors[0];
  return err;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/** The handler of one undici attempt. */
class Attempt implements Handler {
  readonly #call: GuardedCall;
  readonly number: number;
  readonly deadline: number;
  readonly promise: Promise<void>;
  #resolve!: () => void;
  #reject!: (err: unknown) => void;
  controller: Controller | undefined;
  /** The response (or part of it) went to the caller. */
  forwarded = false;
  #done = false;
  #abandoned: { reason: unknown } | undefined;
  #held: { status: number; headers: IncomingHttpHeaders; statusMessage: string | undefined; chunks: Buffer[]; size: number } | undefined;

  constructor(call: GuardedCall, number: number, deadline: number) {
    this.#call = call;
    this.number = number;
    this.deadline = deadline;
    this.promise = new Promise<void>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  /** The call left this attempt: stop it, and ignore whatever it reports from now on. */
  abandon(reason: unknown): void {
    if (this.#done || this.#abandoned !== undefined) return;
    this.#abandoned = { reason };
    this.controller?.abort(asError(reason));
  }

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    if (this.#abandoned !== undefined) {
      controller.abort(asError(this.#abandoned.reason));
    }
  }

  onResponseStart(_c: Controller, status: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    if (this.#done || this.#abandoned !== undefined) return;
    if (status < 200) return this.#call.info(status, headers, statusMessage);
    if (this.#call.hold(this, status, headers)) {
      this.#held = { status, headers, statusMessage, chunks: [], size: 0 };
      return;
    }
    this.forwarded = true;
    this.#call.commit(status, headers, statusMessage);
  }

  onResponseData(_c: Controller, chunk: Buffer): void {
    if (this.#done || this.#abandoned !== undefined) return;
    const held = this.#held;
    if (held === undefined) {
      if (this.forwarded) this.#call.data(chunk);
      return;
    }
    held.chunks.push(chunk);
    held.size += chunk.length;
    if (held.size <= MAX_HELD) return;
    // Too big to hold: the caller gets it as it comes, and it will not be retried.
    this.#held = undefined;
    this.forwarded = true;
    this.#call.commit(held.status, held.headers, held.statusMessage);
    for (const c of held.chunks) this.#call.data(c);
  }

  onResponseEnd(_c: Controller, trailers: IncomingHttpHeaders): void {
    if (this.#done || this.#abandoned !== undefined) return;
    this.#done = true;
    const held = this.#held;
    if (held !== undefined) {
      this.#reject(new HeldResponse(held.status, held.headers, held.statusMessage, held.chunks, trailers));
      return;
    }
    this.#call.end(trailers);
    this.#resolve();
  }

  onResponseError(_c: Controller | undefined, err: Error): void {
    if (this.#done || this.#abandoned !== undefined) return;
    this.#done = true;
    this.#reject(err);
  }
}

/** The breaker key of `origin` (as the connector files it), or undefined if it has none. */
function breakerKey(s: RetrySettings, origin: string | URL | undefined): string | undefined {
  if (s.breaker === null || origin === undefined) return undefined;
  try {
    return hostKey(typeof origin === 'string' ? origin : origin.origin);
  } catch {
    return undefined;
  }
}

/** The lower of a configured cap and a request's own timeout (0 = none). */
function lowest(cap: number, own: number | null | undefined): number {
  if (typeof own !== 'number' || !Number.isFinite(own) || own < 0) return cap;
  if (own === 0) return cap;
  return cap === 0 ? own : Math.min(cap, own);
}
