/**
 * Why a channel failed to connect, in grpc-js's own words.
 *
 * A grpc-js channel reports only its state (TRANSIENT_FAILURE), never the error behind it. Its
 * picker, though, fails a call at once with that error in the details
 * (`No connection established. Last error: connect ECONNREFUSED ...`). One local call with no
 * wait-for-ready reads it: no I/O, answered within a millisecond or two.
 *
 * @module
 */
import os from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { CLIENT_MADE } from '../../core/classify-grpc.js';
import { type Clock, type TimerHandle, unrefTimer } from '../../core/clock.js';

/** The brand {@link ChannelConnectError} checks: it survives two copies of dialguard and grpc-js's copying. */
const kChannelConnect = Symbol.for('dialguard.grpc.ChannelConnectError');

/**
 * Establishing a channel failed (refused, reset, a TLS or name-resolution failure): the status a
 * raw grpc-js call would have failed with. Shaped like a grpc-js `ServiceError` (numeric `code`
 * UNAVAILABLE, `details`, `metadata`), so `classify` reads it the same way (a dial, not sent) and
 * existing grpc error handling keeps working.
 *
 * `cause` is the failure itself when the adapter saw it: a TLS handshake's error as Node raised
 * it (`DEPTH_ZERO_SELF_SIGNED_CERT`, `ERR_TLS_CERT_ALTNAME_INVALID`, an alert), so the breaker
 * can tell a client's mistake from a dead host. Otherwise the failure grpc-js quoted, rebuilt as
 * Node would have thrown it where the text allows (`connect ECONNREFUSED 127.0.0.1:50051` becomes
 * an Error with `code` `ECONNREFUSED`, `syscall` `connect`, `address` and `port`); undefined when
 * grpc-js quoted none.
 *
 * A call that fails this way rejects with grpc-js's own `ServiceError`, built by grpc-js from the
 * status: it carries this class's brand, `target` and `cause`, so `err instanceof
 * ChannelConnectError` holds for it too.
 */
export class ChannelConnectError extends Error {
  /** Checks the brand rather than the prototype chain: true for grpc-js's ServiceError of a failed connect too. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[kChannelConnect] === true;
  }

  /** The grpc status code, UNAVAILABLE. */
  readonly code: grpc.status;
  readonly details: string;
  readonly metadata: grpc.Metadata;
  /** The channel's target. */
  readonly target: string;

  /**
   * @param cause - the failure as seen (see the class docs); default: the one grpc-js quoted in
   *   `status.details`.
   */
  constructor(target: string, status: grpc.StatusObject, cause: unknown = quotedCause(status.details)) {
    super(`${status.code} ${grpc.status[status.code]}: ${status.details}`, cause === undefined ? undefined : { cause });
    this.name = 'ChannelConnectError';
    this.code = status.code;
    this.details = status.details;
    this.metadata = status.metadata;
    this.target = target;
  }

  /**
   * The status a call that failed this way ends with: grpc-js's own words, the brand (grpc-js
   * copies it onto the `ServiceError`, with `target` and `cause`).
   */
  toStatus(): grpc.StatusObject & { target: string; cause?: unknown; [kChannelConnect]: true; [CLIENT_MADE]: true } {
    return {
      code: this.code,
      details: this.details,
      metadata: this.metadata.clone(),
      target: this.target,
      ...(this.cause === undefined ? {} : { cause: this.cause }),
      [kChannelConnect]: true,
      [CLIENT_MADE]: true, // the guard's own connect failed: nothing was sent
    };
  }
}
Object.defineProperty(ChannelConnectError.prototype, kChannelConnect, { value: true });
Object.defineProperty(ChannelConnectError.prototype, CLIENT_MADE, { value: true }); // see toStatus

/**
 * A kind of connect failure that is the client's own, marked on the failure's cause (an object
 * grpc-js copies onto the `ServiceError` it builds, so the mark survives it).
 */
function causeMark(): { mark<T>(cause: T): T; on(err: ChannelConnectError): boolean } {
  const marked = new WeakSet<object>();
  return {
    mark(cause) {
      if (typeof cause === 'object' && cause !== null) marked.add(cause);
      return cause;
    },
    on(err) {
      const cause: unknown = err.cause;
      return typeof cause === 'object' && cause !== null && marked.has(cause);
    },
  };
}

/** Causes of connects to a peer that is not an HTTP/2 server: see {@link notHttp2}. */
const NOT_HTTP2 = causeMark();
/** Causes of connects the client's own identity check refused: see {@link clientVerdict}. */
const CLIENT_VERDICT = causeMark();

/**
 * Marks `cause` as the failure of a connect whose peer answered at the HTTP/2 layer (it sent
 * bytes after TCP and any TLS) but never completed HTTP/2's handshake: an HTTP/1.1 server's reply
 * to the preface, say, from a client aimed at the wrong port. Returns `cause`.
 */
export function markNotHttp2<T>(cause: T): T {
  return NOT_HTTP2.mark(cause);
}

/**
 * Whether `err` (a {@link ChannelConnectError}, or grpc-js's copy of one) failed because the
 * peer is not an HTTP/2 server: trying again meets the same server and fails the same way.
 */
export function notHttp2(err: ChannelConnectError): boolean {
  if (NOT_HTTP2.on(err)) return true;
  // Per address: every address that failed, failed so.
  const cause: unknown = err.cause;
  return cause instanceof AggregateError && cause.errors.length > 0 && cause.errors.every((e) => e instanceof ChannelConnectError && notHttp2(e));
}

/**
 * Marks `cause` as the failure of a connect whose certificate the client's own
 * `checkServerIdentity` refused (it returned or threw an Error: a pin that does not match). It
 * carries no code Node would give a certificate verdict, and grpc-js words it UNAVAILABLE, yet
 * the same check refuses the same certificate on every connect. Returns `cause`.
 */
export function markClientVerdict<T>(cause: T): T {
  return CLIENT_VERDICT.mark(cause);
}

/** Whether `err` (a {@link ChannelConnectError}, or grpc-js's copy of one) failed on the client's own identity check. */
export function clientVerdict(err: ChannelConnectError): boolean {
  return CLIENT_VERDICT.on(err);
}

/** A system error grpc-js quoted as text: `connect ECONNREFUSED 127.0.0.1:1`, `getaddrinfo ENOTFOUND name`. */
const SYSTEM_ERROR = /^(connect|getaddrinfo|read|write) (E[A-Z]{3,}|EAI_[A-Z]+)(?: (.+))?$/;

/**
 * The failure quoted after `Last error:` in grpc-js's details, as an Error (a system error's
 * `code`, `syscall`, `address`/`port` or `hostname` restored); undefined when nothing is quoted.
 */
export function quotedCause(details: string): Error | undefined {
  const quoted = /Last error: (?:Error: )?(.*?)(?:\. Resolution note:.*)?$/s.exec(details)?.[1]?.trim();
  if (quoted === undefined || quoted === '' || quoted === 'null') return undefined;
  const err = new Error(quoted) as Error & Record<string, unknown>;
  const sys = SYSTEM_ERROR.exec(quoted);
  if (sys !== null) {
    const [, syscall, code, where] = sys as unknown as [string, string, string, string | undefined];
    err.code = code;
    err.syscall = syscall;
    const errno = (os.constants.errno as Record<string, number | undefined>)[code];
    if (errno !== undefined) err.errno = -errno;
    if (where !== undefined && syscall === 'getaddrinfo') err.hostname = where;
    else if (where !== undefined) {
      const at = /^\[?([^\]]*?)\]?:(\d+)$/.exec(where);
      if (at !== null) {
        err.address = at[1];
        err.port = Number(at[2]);
      }
    }
  }
  return err;
}

const PROBE_METHOD = '/dialguard.ConnectProbe/LastError';

/**
 * How long to wait for grpc-js to fail the probe, ms: it does so a turn or two of the event loop
 * after the call starts; a channel that left TRANSIENT_FAILURE meanwhile queues it instead.
 */
const PROBE_WAIT = 50;

/**
 * The status a call on `channel` (in TRANSIENT_FAILURE) fails with, or a generic UNAVAILABLE if
 * none comes within {@link PROBE_WAIT} ms. The caller closes the channel afterwards, which ends a
 * probe still queued.
 */
export function lastError(channel: grpc.Channel, clock: Clock): Promise<grpc.StatusObject> {
  const fallback: grpc.StatusObject = {
    code: grpc.status.UNAVAILABLE,
    details: 'No connection established',
    metadata: new grpc.Metadata(),
  };
  return new Promise((resolve) => {
    let timer: TimerHandle | undefined;
    const done = (status: grpc.StatusObject): void => {
      if (timer === undefined) return;
      clock.clearTimeout(timer);
      timer = undefined;
      resolve(status);
    };
    timer = unrefTimer(clock.setTimeout(() => done(fallback), PROBE_WAIT));
    try {
      const call = channel.createCall(PROBE_METHOD, Infinity, undefined, null, 0);
      call.start(new grpc.Metadata(), {
        onReceiveMetadata: () => {},
        onReceiveMessage: () => {},
        onReceiveStatus: (s) => done(s.code === grpc.status.UNAVAILABLE ? s : fallback),
      });
      call.halfClose();
    } catch {
      done(fallback);
    }
  });
}
