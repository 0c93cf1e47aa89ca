/**
 * One undici attempt of a guarded call: the handler undici drives, which passes the response on
 * to the caller, or holds back a response with a retryable status while the call decides
 * whether to try again.
 *
 * @module
 */
import { type Clock, type TimerHandle, unrefTimer } from '../../core/clock.js';
import { asError } from '../../core/validate.js';
import type { LegacyHandler, RawHeaders } from './handlers.js';

/** Most body bytes of a held response buffered; past it the response goes to the caller. */
const MAX_HELD = 64 * 1024;

/**
 * Longest a response is held while its body arrives, in ms; past it the response goes to the
 * caller as it comes, and is not sent again. A retryable status's body is short and comes with
 * its headers (nginx's 503 page is one packet); one still arriving after this is slow or never
 * ends, and holding it for its end cost the caller the whole body's time on every attempt (an
 * outside review: a body trickling for 3 s reached the caller after ~8 s and three sends, raw
 * undici at 9-17 ms; one that never ended never reached it). The window is the most a slow body
 * delays a response raw undici would have handed over at once.
 */
export const HOLD_WINDOW_MS = 250;

const noop = (): void => {};

/** A response with a retryable status, held back while the call decides whether to try again. */
export class HeldResponse extends Error {
  override readonly name = 'HeldResponse';
  constructor(
    readonly statusCode: number,
    readonly rawHeaders: RawHeaders,
    readonly statusText: string,
    readonly chunks: Buffer[],
    readonly trailers: RawHeaders | null,
    /** What ended its body before the end (the connection cut, the agent destroyed); none: it came whole. */
    readonly bodyError?: Error,
  ) {
    super(`the server answered ${statusCode}`);
  }

  /**
   * Hands the whole response to `caller`, as undici would have. What the caller's callbacks throw
   * before the end goes to its onError, as undici does with a handler that throws (a `stream()`
   * factory refusing the status): delivered from a timer or a promise, outside undici, the throw
   * was an unhandled rejection that ended the process. A throw from onComplete goes to onError
   * too (see {@link completeOrFail}).
   */
  deliver(caller: LegacyHandler): void {
    try {
      caller.onResponseStarted?.();
      caller.onHeaders?.(this.statusCode, this.rawHeaders, noop, this.statusText);
      for (const chunk of this.chunks) caller.onData?.(chunk);
    } catch (err) {
      caller.onError?.(asError(err));
      return;
    }
    if (this.bodyError !== undefined) caller.onError?.(this.bodyError);
    else completeOrFail(caller, this.trailers);
  }
}

/**
 * Ends `caller`'s response with onComplete; what onComplete throws goes to the caller's onError,
 * as undici's request does with a handler whose onComplete throws. undici's own retry
 * interceptor gives up that way (its onResponseEnd throws the final error): dropped, its request
 * never settled.
 */
export function completeOrFail(caller: LegacyHandler, trailers: RawHeaders | null): void {
  try {
    caller.onComplete?.(trailers);
  } catch (err) {
    caller.onError?.(asError(err));
  }
}


/** What an attempt asks of, and reports to, the call it belongs to. */
export interface AttemptOwner {
  /** The caller's handler, which a response that is not held back goes to. */
  readonly caller: LegacyHandler;
  /** The call's clock, which times how long a response is held (see {@link HOLD_WINDOW_MS}). */
  readonly clock: Clock;
  /** Whether a response with `status` should be held back for a possible retry. */
  hold(attempt: Attempt, status: number, rawHeaders: RawHeaders): boolean;
  /** The response went to the caller in full. */
  complete(trailers: RawHeaders | null): void;
  /** undici sent a chunk of this attempt's request body. */
  bodySent(chunk: unknown): void;
  /** undici sent this attempt's whole request. */
  requestSent(): void;
  /** `attempt` ended with `err` (undefined: success); heard once, never after it was left. */
  ended(attempt: Attempt, err: unknown): void;
  /** `attempt` waits for a connection no more: undici gave it one, or it was left. */
  waitOver(attempt: Attempt): void;
}

/** {@link Attempt.deadlineCut}: its headers timeout is the deadline's remainder. */
export const HEADERS_CUT = 1;
/** {@link Attempt.deadlineCut}: its body timeout is the deadline's remainder. */
export const BODY_CUT = 2;

/**
 * The handler of one undici attempt; its owner's `ended()` hears how it ended (an error, or
 * nothing). A method, not a callback given per attempt: a closure per attempt was two allocations
 * on every healthy request. A call is its own first attempt (it extends this class): a healthy
 * request, which makes only that one, allocates no attempt of its own.
 */
export class Attempt implements LegacyHandler {
  readonly #owner: AttemptOwner;
  readonly number: number;
  /**
   * When the attempt must be over, on the clock (Infinity: no deadline). Set once, before the
   * attempt is dispatched: a call that is its own first attempt knows it only at its start.
   */
  deadline: number;
  #abort: ((err?: Error) => void) | undefined;
  /** The response (or part of it) went to the caller: from now on it is not retried. */
  forwarded = false;
  /** The status of the response this attempt handed the caller (0 until it did). */
  status = 0;
  /**
   * Which of its undici timeouts the call's deadline set (cut to the time left):
   * {@link HEADERS_CUT} | {@link BODY_CUT}; 0: neither. Such a timeout firing is the deadline
   * passing (see GuardedCall.#deadlineTimedOut).
   */
  deadlineCut = 0;
  /** A retry's own listener for how it ended (its promise's), for the owner to call; none on a first attempt. */
  settled: ((err: unknown) => void) | undefined;
  #settled = false;
  #abandoned: Error | undefined;
  #held: Holding | undefined;

  /** @param owner - the call it belongs to; undefined: the attempt is the call's own (see above). */
  constructor(owner: AttemptOwner | undefined, number: number, deadline: number) {
    this.#owner = owner ?? (this as unknown as AttemptOwner);
    this.number = number;
    this.deadline = deadline;
  }

  /** Whether the server's answer has come: its headers handed to the caller, or held. */
  get answered(): boolean {
    return this.forwarded || this.#held !== undefined;
  }

  /** Still under way: neither ended nor left. */
  get running(): boolean {
    return !this.#settled && this.#abandoned === undefined;
  }

  /** The call left this attempt: stop it, and ignore whatever it reports from now on. */
  abandon(reason: Error): void {
    if (this.#settled || this.#abandoned !== undefined) return;
    // A response held while its body still arrives goes to the caller now, headers and what came
    // of its body, whose end the call's error will be: raw undici had handed it over, and the
    // abort (or deadline) then failed its body. Dropped, the server's answer became the error.
    if (this.#held !== undefined) {
      try {
        this.#release();
      } catch {
        // the caller's own callbacks threw: the call ends with `reason` all the same
      }
    }
    this.#abandoned = reason;
    this.#owner.waitOver(this);
    this.#abort?.(reason);
    // A retry's promise ends with the reason (retry() has let go of it already): it never
    // settled, and its `dialguard:attempt` span stayed open for good (an outside review).
    const settled = this.settled;
    this.settled = undefined;
    settled?.(reason);
  }

  /**
   * The held response goes to the caller as it has come so far; the rest follows as it arrives,
   * and the attempt is not retried. Returns the caller's last onData answer (false: pause).
   */
  #release(): boolean {
    const held = this.#unhold()!;
    this.forwarded = true;
    this.status = held.status;
    const caller = this.#owner.caller;
    caller.onResponseStarted?.();
    caller.onHeaders?.(held.status, held.rawHeaders, held.resume, held.statusText);
    let more = true;
    for (const c of held.chunks) more = caller.onData?.(c) ?? true;
    return more;
  }

  /**
   * The hold window ran out with the body still arriving: the response goes to the caller. What
   * the caller's callbacks throw here (a timer, outside undici) ends the attempt with it, as
   * undici does with a handler that throws.
   */
  #windowEnded(): void {
    if (this.#held === undefined || !this.running) return;
    try {
      this.#release();
    } catch (err) {
      this.#abort?.(asError(err));
    }
  }

  /** Ends the attempt with `err` (undefined: success) unless it already ended or was left. */
  #settle(err: unknown): void {
    if (this.#settled || this.#abandoned !== undefined) return;
    this.#settled = true;
    this.#owner.ended(this, err);
  }

  onConnect(abort: (err?: Error) => void): void {
    this.#owner.waitOver(this);
    this.#abort = abort;
    // Left while undici still queued it: nothing of it was written. Thrown, undici fails the
    // request (its onError, ignored now) and keeps the connection for the next one; `abort` would
    // destroy the connection, which undici then redials for the next request in its queue. A
    // client with `connections: 1` and 3 000 calls aborted while queued went on dialling one
    // connection per aborted request for ~4 s after its callers were released, each holding its
    // call until then (an outside review; raw undici makes the same 3 000 connections, sooner).
    if (this.#abandoned !== undefined) throw this.#abandoned;
  }

  onBodySent(chunk: unknown): void {
    if (!this.#settled && this.#abandoned === undefined) this.#owner.bodySent(chunk);
  }

  onRequestSent(): void {
    if (!this.#settled && this.#abandoned === undefined) this.#owner.requestSent();
  }

  onHeaders(status: number, rawHeaders: RawHeaders, resume: () => void, statusText: string): boolean {
    if (this.#settled || this.#abandoned !== undefined) return true;
    const caller = this.#owner.caller;
    if (status < 200) return caller.onHeaders?.(status, rawHeaders, resume, statusText) ?? true; // 1xx: passed on
    if (this.#owner.hold(this, status, rawHeaders)) {
      const timer = unrefTimer(this.#owner.clock.setTimeout(() => this.#windowEnded(), HOLD_WINDOW_MS));
      this.#held = { status, rawHeaders, resume, statusText, chunks: [], size: 0, timer };
      return true;
    }
    this.forwarded = true;
    this.status = status;
    caller.onResponseStarted?.();
    return caller.onHeaders?.(status, rawHeaders, resume, statusText) ?? true;
  }

  onData(chunk: Buffer): boolean {
    if (this.#settled || this.#abandoned !== undefined) return true;
    const held = this.#held;
    if (held === undefined) return this.forwarded ? (this.#owner.caller.onData?.(chunk) ?? true) : true;
    held.chunks.push(chunk);
    held.size += chunk.length;
    if (held.size <= MAX_HELD) return true;
    return this.#release(); // too big to hold back: the caller gets it as it comes, and it will not be retried
  }

  onComplete(trailers: RawHeaders | null): void {
    if (this.#settled || this.#abandoned !== undefined) return;
    const held = this.#unhold();
    if (held !== undefined) {
      this.#settle(new HeldResponse(held.status, held.rawHeaders, held.statusText, held.chunks, trailers));
      return;
    }
    this.#settled = true;
    try {
      this.#owner.complete(trailers);
    } finally {
      this.#owner.ended(this, undefined); // even if the caller's onComplete threw: it had the whole response
    }
  }

  onError(err: Error): void {
    // A held response whose body fails (the connection cut, the agent destroyed) is still the
    // server's answer: should no retry follow, the caller gets it with its body failing so, as
    // raw undici hands it over (was: the error alone, in place of the 503; an outside review).
    const held = this.#unhold();
    this.#settle(held === undefined ? err : new HeldResponse(held.status, held.rawHeaders, held.statusText, held.chunks, null, err));
  }

  /** Stops holding: the response held (its window's timer stopped), or undefined if none was. */
  #unhold(): Holding | undefined {
    const held = this.#held;
    if (held === undefined) return undefined;
    this.#held = undefined;
    this.#owner.clock.clearTimeout(held.timer);
    return held;
  }
}

/** A response being held back: what came of it so far, and the timer of its window. */
interface Holding {
  readonly status: number;
  readonly rawHeaders: RawHeaders;
  readonly resume: () => void;
  readonly statusText: string;
  readonly chunks: Buffer[];
  size: number;
  readonly timer: TimerHandle;
}
