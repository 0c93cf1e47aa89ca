/**
 * One call on a guarded channel: it waits for the pool's READY channel (never queueing inside
 * grpc-js), then runs as a grpc-js call on it.
 *
 * - Refused by the breaker, or the connect failed or timed out: the call ends at once with a
 *   status saying why (see status.ts); nothing is queued behind a connect that cannot succeed.
 * - Its deadline covers the wait for a channel too: a call never outlives it.
 * - What the caller sends while it waits (messages, half-close, read requests, credentials) is
 *   kept and replayed onto the grpc-js call once there is one.
 * - Until the server answers anything, the messages are kept (up to `replayBufferSize`), so the
 *   pool can resend the call on a fresh channel when a sibling retired its own under it, or when
 *   its connection died and the method is idempotent.
 * - When the pool finds the channel dead, the call is released at once (its grpc-js call
 *   cancelled), not left to wait for a transport grpc-js would only redial for it.
 * - A wait-for-ready call (`waitForReady` in its metadata options) that could not get a channel
 *   (a failed connect, a refusal by the breaker) waits for one until its deadline instead of
 *   failing: it asks for a connect whenever grpc's reconnect backoff and the breaker allow one,
 *   and rides the channel once it is READY.
 * - A failure `retry()` would retry (see call-retry) is retried while the call can still be sent
 *   again unchanged: every attempt with the same absolute deadline, so each gets what remains of
 *   it (grpc-js sends it as `grpc-timeout`). Streaming calls too, until the server answers.
 * - A call made with `{ parent: call }` runs by the parent's deadline too and ends when the parent
 *   is cancelled, as grpc-js's flags say (see parent.ts), whatever it is doing: waiting for a
 *   channel, backing off between attempts, or riding one.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import { classify } from '../../core/classify.js';
import { CLIENT_MADE, SERVER_ANSWERED, answeredByServer, madeByClient } from '../../core/classify-grpc.js';
import { ConnectionGoneError, DeadlineExceededError } from '../../core/errors.js';
import { MAX_DURATION } from '../../core/validate.js';
import type { ConnectionPool, UseOptions } from '../../pool/connection-pool.js';
import type { Trip } from '../../pool/trip.js';
import { restartSpanningBackoff } from '../../core/restart-backoff.js';
import { reportSettled, retry, settledHeard } from '../../retry/retry.js';
import { type InCallerContext, callerContext, traceFailedCall } from '../../observe/tracing.js';
import { type CallRetry, clientMistake, finalFailure, pushbackOf, remaining, retryableStatus, worthRetrying } from './call-retry.js';
import type { PooledChannel } from './channel-connector.js';
import { SendLog, type Sent } from './send-log.js';
import { Turn, reportTurnsTo } from './turn.js';
import { PARENT_CANCELLED, deadlineUnder, followCancellation, minDeadline } from './parent.js';
import { type GuardStatus, isStatusObject, statusFor } from './status.js';
import { type ChannelSpec, type SpecTable, asGrpcSpellsIt } from './target.js';

/** grpc-js's call interface, as its channels hand it out. */
export type GrpcCall = ReturnType<grpc.ChannelInterface['createCall']>;
type MessageContext = Parameters<GrpcCall['sendMessageWithContext']>[0];
/**
 * What a grpc-js call's `getAuthContext()` returns (grpc-js 1.14 added it); `null` for an older
 * grpc-js, whose types have no such method: naming it outright failed every user's type-check
 * on grpc-js 1.10-1.13, inside the peer range (an outside review).
 */
type AuthContextOf<C> = C extends { getAuthContext(): infer R } ? R : null;
type ServerSurfaceCall = Parameters<grpc.ChannelInterface['createCall']>[3];

/** What a call needs from its guard. */
export interface CallHost {
  readonly pool: ConnectionPool<PooledChannel>;
  /** Whether `key` has a READY channel now (a call then waits for nothing). */
  ready(key: string): boolean;
  /**
   * The client's own configuration's failure of `key`'s last connect, while grpc's reconnect
   * backoff after it runs (a call then fails at once with it, as on a grpc-js channel in
   * TRANSIENT_FAILURE); undefined otherwise.
   */
  mistake(key: string): unknown;
  readonly specs: SpecTable;
  readonly clock: Clock;
  readonly replayBufferSize: number;
  idempotent(method: string): boolean;
  /**
   * The pool's options of an idempotent call's first attempt: it may be sent again after its
   * channel died under it at most `retry.maxAttempts - 1` times (never with retries off).
   */
  readonly idempotentUse: UseOptions;
  /** How calls are retried; undefined: not at all (and the pool sends no call again that may have run). */
  readonly retry: CallRetry | undefined;
  /**
   * Asks for a connection to `spec`'s target: at once, or once grpc's reconnect backoff and the
   * breaker allow a dial (for a wait-for-ready call).
   */
  reconnect(spec: ChannelSpec): void;
  /** Calls `listener` whenever the standing of `key`'s channel may have changed; returns the stopper. */
  onChange(key: string, listener: () => void): () => void;
  /** Whether the guard was closed (a wait for a channel then ends: the pool says how). */
  readonly closed: boolean;
  /** Whether the breaker refuses `spec`'s host now. */
  refused(spec: ChannelSpec): boolean;
}

/**
 * The client channel a call was made on, as the call sees it: closed by its client
 * (`client.close()`), and told of the calls that wait for a connection (for one, a retry, or a
 * READY channel), so that closing it ends them as grpc-js ends its own.
 */
export interface CallOwner {
  readonly closed: boolean;
  waiting(call: GuardedCall): void;
  done(call: GuardedCall): void;
}

/** No channel of a client's own (a call made directly, as tests and benches do): never closed. */
const UNOWNED: CallOwner = { closed: false, waiting: () => {}, done: () => {} };

/** The status grpc-js ends a call with when its channel closed before the call was sent. */
function channelClosedStatus(): grpc.StatusObject {
  // The guard's own: never sent (CLIENT_MADE lets classify say so).
  return { code: grpc.status.UNAVAILABLE, details: 'Channel closed before call started', metadata: new grpc.Metadata(), [CLIENT_MADE]: true } as grpc.StatusObject;
}

/**
 * The status a call grpc-js retried itself ends with: as grpc-js gave it, but for its "Channel
 * closed before call started" (its last attempt found the guard had closed the dead channel),
 * which would tell the caller, and any classifier, that nothing was sent: it is the loss of the
 * connection an earlier attempt rode, as a dialguard status whose cause says so.
 */
function selfRetriedStatus(received: grpc.StatusObject, target: string, connectionId: number): grpc.StatusObject {
  return received.details.startsWith('Channel closed before call started') ? statusFor(new ConnectionGoneError(target, connectionId)) : received;
}

const OK = grpc.status.OK;
/**
 * The pool's options of a call that is not idempotent, or of a retry's attempt (the retry's
 * attempts count its every send: the pool sends none again that may have run).
 */
const NOT_IDEMPOTENT: UseOptions = Object.freeze({ idempotent: false });
const READY = grpc.connectivityState.READY;
let callNumbers = 0;

/** The grpc-js `Call` a {@link GuardedChannel} hands out. */
export class GuardedCall implements GrpcCall {
  readonly #host: CallHost;
  readonly #spec: ChannelSpec;
  readonly #owner: CallOwner;
  /** Told to its owner as waiting for a connection (see CallOwner): told again when it ends. */
  #waiting = false;
  readonly #method: string;
  /** The caller's deadline, or the parent's when that is earlier (see parent.ts). */
  readonly #deadline: grpc.Deadline;
  readonly #authority: string | null | undefined;
  readonly #parent: ServerSurfaceCall;
  readonly #flags: number | null | undefined;
  /** Stops listening for the parent's cancellation; set from start() until the call ends. */
  #unfollow: (() => void) | undefined;
  readonly #number = ++callNumbers;
  #listener: grpc.InterceptingListener | undefined;
  #metadata: grpc.Metadata | undefined;
  #credentials: grpc.CallCredentials | undefined;
  /** What the caller sent: queued while no grpc-js call takes it, kept while it may be resent. */
  readonly #sent: SendLog;
  #halfClosed = false;
  #readPending = false;
  #turn: Turn | undefined;
  /**
   * An earlier turn's grpc-js call may have reached the server: it ended with anything but
   * grpc-js's own word that it never left, or was let go before it ended. The current turn is
   * judged when the call fails (see #fail).
   */
  #reached = false;
  #lastStatus: grpc.StatusObject | undefined;
  #timer: TimerHandle | undefined;
  #started = false;
  /** Wall-clock ms when the call started (grpc deadlines are wall-clock). */
  #startedAt = 0;
  /** When the call started on the host's clock: a retry loop's `elapsed` counts from it. */
  #startedOnClock = 0;
  /** Aborts the retry loop (its backoff) when the call ends otherwise; made when one starts. */
  #retrying: AbortController | undefined;
  /** The caller's context, when someone traces calls: a call that fails unretried traces its span there. */
  #inCaller: InCallerContext | undefined;
  /**
   * The status the last ride ended with, for the code the pool's promise continues with. A ride's
   * promise fulfils with no value: V8 looks up `then` on any object a promise is resolved with,
   * and resolving the ride and then the pool's promise with the status cost about 1.5 µs a call
   * on a busy channel (a CPU profile of bench/grpc's healthy lane: the two resolve lines were its
   * hottest in dialguard's files).
   */
  #rideStatus: grpc.StatusObject | undefined;
  /** Stops a wait-for-ready call's wait for a READY channel; set while it waits. */
  #stopWaiting: (() => void) | undefined;
  #done = false;
  /**
   * The pool's handles on this call, made once per call: `ride()` takes the work and its
   * settlers as functions, and a ride costs no promise (see ConnectionPool.ride).
   */
  /** Set while #fail waits for grpc-js's own status of a call whose connection died under it. */
  #ownStatus: NodeJS.Immediate | undefined;
  readonly #board = (trip: Trip<PooledChannel>): void => this.#ride(trip);
  /** The first attempt's ride ended: read here in one step (see #run). */
  readonly #ridden = (): void => {
    const status = this.#rideStatus!;
    if (status.code !== OK) {
      // The server's non-OK answer: decided a microtask later, off the grpc-js status callback.
      queueMicrotask(() => this.#retryOrFail(status));
      return;
    }
    this.#host.retry?.budget?.deposit();
    this.#end(status);
  };
  /**
   * The first attempt's ride failed. Decided a microtask later: the pool may be releasing every
   * ride of a dead channel, which is still in its slot until the release is over.
   */
  readonly #rideFailed = (err: unknown, resent = 0): void => queueMicrotask(() => this.#retryOrFail(err, resent));

  constructor(
    host: CallHost,
    spec: ChannelSpec,
    method: string,
    deadline: grpc.Deadline,
    authority: string | null | undefined,
    parent: ServerSurfaceCall,
    flags: number | null | undefined,
    owner: CallOwner = UNOWNED,
  ) {
    this.#host = host;
    this.#spec = spec;
    this.#owner = owner;
    this.#method = method;
    // No parent (the usual case): nothing to do.
    const own = parent == null ? deadline : deadlineUnder(deadline, parent, flags);
    // The service config's timeout for the method bounds the call as grpc-js bounds it, from now.
    const bound = spec.methodTimeout === undefined ? undefined : spec.methodTimeout(method);
    this.#deadline = bound === undefined ? own : minDeadline(own, Date.now() + bound);
    this.#authority = authority;
    this.#parent = parent;
    this.#flags = flags;
    this.#sent = new SendLog(host.replayBufferSize);
  }

  start(metadata: grpc.Metadata, listener: grpc.InterceptingListener): void {
    if (this.#started) return;
    this.#started = true;
    const now = Date.now();
    this.#startedAt = now;
    this.#startedOnClock = this.#host.clock.now();
    this.#inCaller = callerContext();
    this.#listener = listener;
    this.#metadata = metadata;
    if (this.#done) {
      // Cancelled before it started: grpc-js still reports the status to the listener.
      const status = this.#lastStatus!;
      process.nextTick(() => listener.onReceiveStatus(status));
      return;
    }
    this.#spec.calls++;
    const parent = this.#parent;
    if (parent != null) {
      // Cancelled as a caller's cancel() is: never resent, whatever the call is doing (#end stops this).
      this.#unfollow = followCancellation(parent, this.#flags, () => this.cancelWithStatus(grpc.status.CANCELLED, PARENT_CANCELLED));
    }
    const deadline = this.#deadline;
    // Not after now, or NaN (an Invalid Date): expired, as grpc-js reads it. Unchecked, NaN ran
    // the call with no deadline timer, and grpc-js threw it uncaught when the call started.
    if (!((deadline instanceof Date ? deadline.getTime() : deadline) > now)) {
      process.nextTick(() => this.#expire());
      return;
    }
    // A wait for a channel ends by the deadline. With a READY channel there is no wait: grpc-js
    // enforces the deadline on its call, and a failed ride arms this if the pool goes back.
    if (!this.#host.ready(this.#spec.key)) {
      this.#armDeadline();
      this.#wait();
      // The last connect failed on this client's own configuration (a wrong CA or server name,
      // not an HTTP/2 server) and grpc's reconnect backoff runs: fail as that connect did,
      // dialling nothing. Each call dialled before: a TLS handshake per call on the server (an
      // outside review: 249 connections in 3 s where plain grpc-js made 3).
      const mistake = this.#host.mistake(this.#spec.key);
      if (mistake !== undefined) {
        this.#rideFailed(mistake);
        return;
      }
    }
    this.#run();
  }

  /**
   * Runs the first attempt (again, for a wait-for-ready call that waited for a channel): the ride
   * as the pool settles it, read here in one step (a status other than OK is the attempt's
   * failure, as {@link GuardedCall.#attempt} makes it for a retry), so a healthy call pays for no
   * promise at all.
   */
  #run(): void {
    this.#host.pool.ride(this.#spec.key, this.#board, this.#host.idempotent(this.#method) ? this.#host.idempotentUse : NOT_IDEMPOTENT, this.#ridden, this.#rideFailed);
  }

  /** Whether the call waits for a channel rather than fail on `err` (wait-for-ready, never sent, no channel to be had). */
  #waitsFor(err: unknown): boolean {
    if (this.#metadata?.getOptions().waitForReady !== true || !this.#sent.resendable || isStatusObject(err) || this.#owner.closed) return false;
    const kind = classify(err).kind;
    return kind === 'dial' || kind === 'refused';
  }

  /**
   * Waits for a READY channel (until the deadline, which #armDeadline enforces), asking for a
   * connect whenever one may start; then runs the call on it. Looks again on every change of the
   * channel's standing, on a later tick (never inside the pool's or the connector's own work).
   */
  #awaitReady(): void {
    this.#armDeadline();
    this.#wait();
    const key = this.#spec.key;
    let queued = false;
    const look = (): void => {
      queued = false;
      if (this.#done || this.#stopWaiting === undefined) return;
      if (this.#host.ready(key) || this.#host.closed) {
        this.#stopWaiting();
        this.#stopWaiting = undefined;
        this.#run();
        return;
      }
      this.#host.reconnect(this.#spec);
    };
    const onChange = (): void => {
      if (queued) return;
      queued = true;
      process.nextTick(look);
    };
    this.#stopWaiting = this.#host.onChange(key, onChange);
    onChange();
  }

  /**
   * One attempt: a ride on the pool's channel (which may itself go back for a fresh one). A ride
   * the server answered settles the pool's side as done, whatever the status: the pool never
   * reads a server's answer as a dead connection or a request to send again. The attempt then
   * fails with that status unless it is OK.
   */
  #attempt(): Promise<grpc.StatusObject> {
    return new Promise<unknown>((resolve, reject) => this.#host.pool.ride(this.#spec.key, this.#board, NOT_IDEMPOTENT, resolve, reject)).then(() => {
      const status = this.#rideStatus!;
      return status.code === OK ? status : Promise.reject(status);
    });
  }

  /**
   * The first attempt failed with `err`: retries it if `retry()` would, else ends the call.
   * `resent`: how many times the pool sent it again in that attempt, spent from the attempts.
   */
  #retryOrFail(err: unknown, resent = 0): void {
    if (this.#done) return;
    if (this.#waitsFor(err)) {
      this.#awaitReady();
      return;
    }
    const policy = this.#host.retry;
    const idempotent = this.#host.idempotent(this.#method);
    const left = remaining(this.#deadline);
    const maxAttempts = policy === undefined ? 0 : policy.maxAttempts - resent;
    if (policy === undefined || maxAttempts <= 1 || !this.#sent.resendable || left <= 0 || this.#owner.closed || !worthRetrying(err, idempotent, policy.statuses)) {
      policy?.budget?.deposit();
      this.#fail(err);
      return;
    }
    this.#wait();
    const controller = new AbortController();
    this.#retrying = controller;
    let last = err;
    // The wait the server asked for (grpc-retry-pushback-ms) before the retry now being decided.
    let pushback: number | undefined;
    const statuses = policy.statuses;
    const backoff = policy.backoff;
    const paced = (n: number, previous: number, random: () => number): number => pushback ?? (backoff ?? restartSpanningBackoff)(n, previous, random);
    // In the caller's async context when someone traces calls: the first attempt's failure comes
    // from the channel's events, in the context of whichever call opened that channel, and the
    // loop's spans (call, attempts, their dials) went into that caller's trace, under its ended
    // span (an outside review: 25 of 25 calls resent after a peer was killed).
    const loop = (): void => {
      retry(
        (attempt) => {
          if (attempt.number === 1) return Promise.reject(err);
          return this.#attempt().catch((e: unknown) => {
            last = e;
            throw e;
          });
        },
        {
          // The same deadline as the call's, on the retry loop's clock. One past the longest timer
          // (~24.8 days; grpc-js takes deadlines thousands of years away) bounds nothing a retry
          // loop of a few attempts could reach: none. Passed on, a deadline over 10 years away
          // read as a Date.now() mix-up, a RangeError that ended the call (an outside review).
          deadline: Number.isFinite(left) && left <= MAX_DURATION ? policy.clock.now() + left : undefined,
          // The whole call: connecting, every attempt and the backoff between them (seed 003).
          start: this.#startedOnClock,
          maxAttempts,
          backoff: paced,
          budget: policy.budget,
          clock: policy.clock,
          idempotent,
          signal: controller.signal,
          shutdown: policy.shutdown,
          // Never once the server has answered, or more was sent than could be kept, nor after a
          // connect the client's own TLS configuration failed.
          // A status in retryableStatusCodes the server sent an idempotent method, before
          // committing the call (resendable), is retried. A status the server sent is paced by its
          // pushback, whichever rule retries it (a relayed EOF's UNAVAILABLE is retried by the
          // default rule): a veto (negative or malformed) ends the call, a wait is waited.
          retryable: (e, classification, attempt) => {
            pushback = undefined;
            if (!this.#sent.resendable || this.#owner.closed || clientMistake(e)) return false;
            // Its dials opened the host: the call stops, as every other call to it is refused now,
            // instead of waiting out a backoff longer than the breaker's window to probe after each
            // (with maxAttempts 6: 6 connects where 3 opened it; the undici adapter's twin, an
            // outside review). Its last attempt ends as retries running out.
            if (classification.kind === 'dial' && attempt.number < maxAttempts && this.#host.refused(this.#spec)) return false;
            if (isStatusObject(e) && answeredByServer(e)) {
              const asked = pushbackOf(e);
              if (asked === null) return false;
              pushback = asked;
            }
            return retryableStatus(e, idempotent, statuses) ? true : undefined;
          },
        },
      ).then(
        (status) => this.#end(status),
        (e: unknown) => this.#fail(finalFailure(e, last, remaining(this.#deadline) <= 0)),
      );
    };
    const inCaller = this.#inCaller;
    if (inCaller === undefined) loop();
    else inCaller(loop);
  }

  sendMessageWithContext(context: MessageContext, message: Buffer): void {
    if (this.#done) {
      // The call is over; a writer waiting on this callback must not wait forever, nor be called
      // back inside its own write.
      const callback = context.callback;
      if (callback !== undefined) process.nextTick(callback);
      return;
    }
    const sent = this.#sent.record(context, message);
    const turn = this.#turn;
    // Past the replay buffer on a call under way: it can never be sent again, so its ride never
    // goes back for a fresh channel (boarding one only to fail there would blame that channel,
    // and release every call riding it).
    if (turn !== undefined && !this.#sent.resendable) turn.trip?.commit();
    if (turn?.active === true && !turn.ended && !turn.replaying) turn.call.sendMessageWithContext(sent.context, message);
    else this.#sent.queue(sent); // no call yet, or behind a resend's replay
  }

  startRead(): void {
    if (this.#done) return;
    this.#readPending = true;
    const turn = this.#turn;
    if (turn?.active === true && !turn.ended) turn.call.startRead();
  }

  halfClose(): void {
    if (this.#done || this.#halfClosed) return;
    this.#halfClosed = true;
    const turn = this.#turn;
    if (turn?.active === true && !turn.ended && !turn.replaying) turn.call.halfClose(); // else after the replay
  }

  cancelWithStatus(code: grpc.status, details: string): void {
    if (this.#done) return;
    this.#sent.commit(); // never resent after the caller gave up
    const turn = this.#turn;
    if (turn?.active === true && !turn.ended) {
      // Its status comes back through the ride.
      turn.call.cancelWithStatus(code, details);
      return;
    }
    // Waiting for a channel, or for a retry: end now (a connect attempt carries on for its other
    // waiters).
    const status = { code, details, metadata: new grpc.Metadata() };
    if (!this.#started) {
      this.#done = true;
      this.#lastStatus = status;
      return;
    }
    this.#end(status);
  }

  /**
   * Its client closed the channel: a call not under way on a connection (waiting for one, for a
   * retry, or for a READY channel) ends now with UNAVAILABLE, as grpc-js ends its own; one under
   * way finishes, and is never tried again.
   */
  channelClosed(): void {
    const turn = this.#turn;
    if (this.#done || (turn?.active === true && !turn.ended)) return;
    this.#end(channelClosedStatus());
  }

  /** Tells the owner this call waits for a connection, once. */
  #wait(): void {
    if (this.#waiting) return;
    this.#waiting = true;
    this.#owner.waiting(this);
  }

  getPeer(): string {
    // Before a channel takes it, the target as grpc-js's own call answers (`dns:` before a bare
    // host:port; it was the bare target: an outside review, r138).
    return this.#turn?.call.getPeer() ?? asGrpcSpellsIt(this.#spec.target);
  }

  getCallNumber(): number {
    return this.#number;
  }

  setCredentials(credentials: grpc.CallCredentials): void {
    this.#credentials = credentials;
    this.#turn?.call.setCredentials(credentials);
  }

  getAuthContext(): AuthContextOf<GrpcCall> {
    return this.#turn?.call.getAuthContext() ?? null;
  }

  /**
   * Runs the call on the leased channel, and ends the ride (`trip.end`) once it ended OK or the
   * server answered (the status is in #rideStatus), or failed otherwise, with its status.
   */
  #ride(trip: Trip<PooledChannel>): void {
    if (this.#done) {
      this.#rideStatus = this.#lastStatus;
      trip.end(true);
      return;
    }
    const previous = this.#turn;
    if (previous !== undefined) {
      this.#armDeadline();
      // Going back for a fresh channel: only a call that can be sent again unchanged.
      previous.active = false;
      if (!previous.ended) this.#reached = true; // cut before its status came: it may have run
      if (!previous.ended) previous.call.cancelWithStatus(grpc.status.CANCELLED, 'dialguard: resent on another channel');
      if (!this.#sent.rewind()) {
        // Committed to the old channel (the server answered, or too much was sent to keep, the
        // last of it during this wait). The call ends with the old channel's status; this one,
        // fresh, did nothing wrong: ended as done (a failure here would read as its own death,
        // and release every call riding it).
        this.#rideStatus = this.#lastStatus ?? statusFor(new ConnectionGoneError(this.#spec.target, previous.connectionId));
        trip.commit();
        trip.end(true);
        return;
      }
    }
    const pooled = trip.connection;
    if (this.#owner.closed) {
      // Its client closed the channel while the call waited for this one: never sent.
      this.#end(channelClosedStatus());
      this.#rideStatus = this.#lastStatus;
      trip.end(true);
      return;
    }
    if (pooled.closed || pooled.channel.getConnectivityState(false) !== READY) {
      // It left READY after the pool handed it out: retire it now, and go back as never sent.
      pooled.retireIfNotReady?.();
      trip.end(false, channelClosedStatus());
      return;
    }
    // The parent is already honoured by this call (its deadline is in #deadline, its cancellation
    // followed since start()). Handed to grpc-js as well, each ride would add a listener to the
    // parent that grpc-js never removes.
    const call = pooled.channel.createCall(this.#method, this.#deadline, this.#authority, null, this.#flags);
    const turn = new Turn(this, call, pooled, trip.id, trip);
    this.#turn = turn;
    if (this.#credentials !== undefined) call.setCredentials(this.#credentials);
    // The caller's own metadata, as a raw grpc-js channel would get it. grpc-js only sets and
    // removes its own headers on it (encodings), so a resend may reuse it as it is.
    call.start(this.#metadata!, turn);
    this.#sent.started();
    if (!this.#sent.resendable) trip.commit(); // already past the replay buffer: see sendMessageWithContext
    const queued = this.#sent.take();
    if (queued !== undefined && queued.length > 1) {
      // A resend of several messages: grpc-js takes one write at a time (the next after the
      // last one's callback; until its inner call exists it holds a single pending message, and
      // each write overwrote the one before: the server ran the call on the last message only).
      turn.replaying = true;
      this.#replay(turn, queued, 0);
    } else {
      if (queued !== undefined) call.sendMessageWithContext(queued[0]!.context, queued[0]!.message);
      if (this.#halfClosed) call.halfClose();
    }
    if (this.#readPending) call.startRead();
  }

  /**
   * Sends `list[index]` on `turn`'s call, and the rest one write callback at a time; then what
   * the caller wrote meanwhile (queued behind the replay), then the half-close if it came.
   */
  #replay(turn: Turn, list: readonly Sent[], index: number): void {
    if (!turn.active || turn.ended) return;
    if (index === list.length) {
      const more = this.#sent.take();
      if (more !== undefined) {
        this.#replay(turn, more, 0);
        return;
      }
      turn.replaying = false;
      if (this.#halfClosed) turn.call.halfClose();
      return;
    }
    const sent = list[index]!;
    const written = sent.context.callback;
    const context = {
      ...sent.context,
      callback: (err?: Error | null) => {
        written?.(err as Error); // the caller's own callback runs once, whichever send it was
        this.#replay(turn, list, index + 1);
      },
    };
    turn.call.sendMessageWithContext(context, sent.message);
  }

  static {
    reportTurnsTo({
      metadata: (call, turn, metadata) => {
        turn.answered = true;
        turn.trip?.commit(); // the pool never sends it again, whatever ends the ride
        if (!turn.active) return;
        call.#sent.commit(); // the server answered: committed to this channel
        call.#listener!.onReceiveMetadata(metadata);
      },
      message: (call, turn, message) => {
        turn.answered = true;
        turn.trip?.commit();
        if (!turn.active) return;
        call.#sent.commit(); // the server answered: committed to this channel
        call.#readPending = false;
        call.#listener!.onReceiveMessage(message);
      },
      status: (call, turn, received) => call.#settle(turn, received),
    });
  }

  /** `turn`'s grpc-js call delivered `received`: settles the ride with it (see #ride). */
  #settle(turn: Turn, received: grpc.StatusObject): void {
    turn.ended = true;
    if (this.#ownStatus !== undefined && turn.active) {
      // Awaited by #fail: grpc-js's own status for the connection that died under the call.
      clearImmediate(this.#ownStatus);
      this.#ownStatus = undefined;
      turn.settle(true);
      this.#fail(received);
      return;
    }
    // A trailers-only reply, or a status after the server's headers on a transport still
    // open, is the server's answer, whatever its details say: final, never resent, and no
    // proof the connection died (only the transport says that: see ChannelConnector.watch).
    const trailersOnly = received.code !== OK && answeredByServer(received);
    if (trailersOnly) turn.answered = true;
    // Not grpc-js's own words for a stream reset or a dropped connection: those it makes when no
    // status came (a server killed after its headers), often before the transport is heard
    // closed, and were read as the server's answer (application, the host alive: a ServerSet
    // failed idempotent calls plain grpc-js failed over, and kept the dead server first; an
    // outside review, r145).
    const fromServer = trailersOnly || (turn.answered && received.code !== OK && !turn.pooled.tracker.transportClosed && !resetByTransport(received));
    // grpc-js retried the call itself (its service config's retryPolicy or hedgingPolicy): a
    // status it made says nothing of its earlier attempts, any of which may have run. The call
    // is committed (the pool sends it nowhere again, the guard's retries leave it): was "never
    // sent" whenever grpc-js's last attempt found the guard had closed the dead channel ("Channel
    // closed before call started"), and a handler that had run was sent again, 4 times under a
    // policy of 2, even for a method not idempotent with `retry: false` (an outside review).
    const selfRetried = this.#spec.selfRetrying && turn.active && received.code !== OK && !fromServer;
    if (selfRetried) this.#sent.commit();
    // Made by grpc-js with nothing of a response seen: its details may say it never left.
    const status = fromServer
      ? { ...received, [SERVER_ANSWERED]: true }
      : selfRetried
        ? selfRetriedStatus(received, this.#spec.target, turn.connectionId)
        : turn.answered
          ? received
          : { ...received, [CLIENT_MADE]: true };
    if (turn.active) this.#lastStatus = status;
    // A turn may have reached the server unless grpc-js said it never left (the pool then goes
    // back as never sent): only such turns leave a call "not sent" when it fails (see #fail).
    if (!this.#reached && (status.code === OK || !madeByClient(status) || !classify(status).notSent)) this.#reached = true;
    if (status.code === OK) {
      // Nothing left to decide: the caller hears now, the pool's bookkeeping follows (and
      // a retry loop this attempt runs in settles with it, as a success). Settled however
      // the caller's callback ends: one that throws (uncaught, as with raw grpc-js) must not
      // strand the ride, which would hold its lease and the channel until close() gave up on it.
      this.#rideStatus = status;
      // A retried call's loop settles with this attempt and ends the call itself (see
      // #retryOrFail), so its caller hears after the loop, and its dialguard:call trace, ended:
      // heard here, the call span outlived the caller's own (an outside review).
      if (this.#retrying !== undefined) {
        turn.settle(true);
        return;
      }
      try {
        if (turn.active) this.#end(status, true);
      } finally {
        turn.settle(true);
      }
      return;
    }
    if (fromServer || (turn.active && !this.#sent.resendable)) {
      // The ride's transport did its job: the attempt fails with the status, and only a retry
      // of an idempotent method may send it again, when the server relayed a transport
      // failure of its own (`rpc error: EOF`; see classify). A call committed to this channel
      // (the server answered, or more was sent than kept) that failed with it ends with the
      // status grpc-js gave ("Connection dropped"), as it would alone: going back could not
      // resend it, and only cost a dial whose error would then be reported in its place.
      this.#rideStatus = status;
      turn.settle(true);
      return;
    }
    // The pool may go back for a fresh channel: that wait ends by the deadline too.
    this.#armDeadline();
    turn.settle(false, status);
  }

  /** The call failed for good (a dial failed, the breaker refused, the channel died, retries ran out). */
  #fail(err: unknown): void {
    const turn = this.#turn;
    if (err instanceof ConnectionGoneError && turn !== undefined && turn.answered && err.connectionId === turn.connectionId) {
      // The call the server answered lost its connection. The caller gets grpc-js's own status
      // for it, in its words ("read ECONNRESET"), as with grpc-js alone, not the pool's release
      // ("connection #1 ... is gone"): already in (#settle kept it), or awaited until the next
      // turn of the event loop (grpc-js ends a call on a dead transport within this one).
      if (turn.ended && this.#lastStatus !== undefined) {
        this.#fail(this.#lastStatus);
        return;
      }
      if (turn.active && !turn.ended) {
        this.#ownStatus ??= setImmediate(() => {
          this.#ownStatus = undefined;
          if (!this.#done) this.#fail(statusFor(err));
        });
        return;
      }
    }
    if (turn !== undefined) turn.active = false;
    const status = isStatusObject(err) ? err : statusFor(err, err instanceof DeadlineExceededError ? grpc.status.DEADLINE_EXCEEDED : grpc.status.UNAVAILABLE);
    // Sent once, the call may have run at the server, whatever its last attempt met (a resend's
    // refused connect): its status never says it was not sent. It did, and an outer retry of a
    // non-idempotent wrapper ran the handler twice (an outside review). A grpc-js call that
    // itself said it never left does not count: a call started on a channel whose server died
    // in the same tick, resent to a refused connect, was told "maybe sent" though the pool knew
    // better, and a ServerSet could not send a POST to the live server (an outside review, r145).
    const reached = this.#reached || (turn !== undefined && !turn.ended);
    this.#end(reached && madeByClient(status) ? ({ ...status, [CLIENT_MADE]: false } as grpc.StatusObject) : status);
    // The caller has its answer. A grpc-js call on a dead transport ends on its own within the same
    // turn of the event loop; one that has not by then (its channel was dropped for a sibling's
    // failure) is cancelled, so nothing keeps running unheard.
    if (turn !== undefined && !turn.ended) setImmediate(cancelIfRunning, turn);
  }

  /** Ends the call at its deadline if it is still waiting for a channel then. */
  #armDeadline(): void {
    if (this.#done || this.#timer !== undefined) return;
    const left = remaining(this.#deadline);
    if (!Number.isFinite(left)) return;
    // A timer set past 2^31-1 ms fires at once: a longer deadline is waited out in steps.
    const step = Math.min(Math.max(0, left), MAX_DURATION);
    this.#timer = this.#host.clock.setTimeout(() => {
      this.#timer = undefined;
      if (step < left) this.#armDeadline();
      else this.#expire();
    }, step);
  }

  /** The deadline passed. A grpc-js call under way reports it itself; a wait for a channel ends here. */
  #expire(): void {
    this.#timer = undefined;
    const turn = this.#turn;
    if (this.#done || (turn !== undefined && turn.active && !turn.ended)) return;
    const at = this.#deadline instanceof Date ? this.#deadline.getTime() : this.#deadline;
    const err = new DeadlineExceededError(Math.max(0, at - this.#startedAt), 0, {
      cause: new Error(`no READY channel to ${this.#spec.target} within the deadline`),
    });
    this.#end(statusFor(err, grpc.status.DEADLINE_EXCEEDED));
  }

  /**
   * Ends the call with `status`. `fromRide`: the current attempt's own outcome, which a retry loop
   * running it settles with on its own (aborting it would report a success as a failure). The
   * caller hears on a later tick, never inside a call of its own (`cancel()`).
   */
  #end(status: GuardStatus, fromRide = false): void {
    if (this.#done) return;
    this.#done = true;
    if (this.#waiting) this.#owner.done(this);
    if (!fromRide) this.#retrying?.abort(status);
    this.#stopWaiting?.();
    this.#stopWaiting = undefined;
    if (this.#unfollow !== undefined) {
      this.#unfollow();
      this.#unfollow = undefined;
    }
    if (this.#timer !== undefined) {
      this.#host.clock.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#sent.clear();
    if (this.#turn !== undefined) this.#turn.active = false;
    this.#lastStatus = status;
    this.#spec.calls--;
    this.#host.specs.forgetIfUnused(this.#spec);
    // A call that never entered the retry loop is reported here, as the loop reports its own, so
    // every call is heard once (undici's adapter does the same): only retried calls were, and
    // the call.duration histogram saw none of the rest (an outside review). Built only when heard.
    if (this.#retrying === undefined && this.#started && settledHeard()) {
      const ok = status.code === OK;
      reportSettled({ ok, attempts: 1, elapsed: this.#host.clock.now() - this.#startedOnClock, ...(ok ? {} : { error: status, classification: classify(status) }) });
    }
    // Its span too, when it failed (the loop traces those it takes; one that succeeds at once is
    // traced as its dial alone).
    if (this.#retrying === undefined && this.#started && status.code !== OK) traceFailedCall(status, this.#inCaller);
    const listener = this.#listener!;
    if (fromRide) listener.onReceiveStatus(status);
    else process.nextTick(() => listener.onReceiveStatus(status));
  }
}

function cancelIfRunning(turn: Turn): void {
  if (!turn.ended) turn.call.cancelWithStatus(grpc.status.UNAVAILABLE, 'dialguard: the call was released');
}

/**
 * Whether `status` is in grpc-js's own words for a stream that ended with no status from the
 * server: a reset (`Call cancelled`, `Stream refused by server`, `Received RST_STREAM with code
 * N...`) or a dropped connection (`Connection dropped`, a socket's ECONNRESET or ETIMEDOUT). A
 * server whose handler sends one of these as its status is read as a reset too: the safe reading
 * (transient, maybe sent; retried only when idempotent).
 */
export function resetByTransport(status: { readonly code: number; readonly details: string }): boolean {
  const { code, details } = status;
  if (details.startsWith('Received RST_STREAM with code ')) return true;
  if (code === grpc.status.CANCELLED) return details === 'Call cancelled';
  if (code !== grpc.status.UNAVAILABLE) return false;
  return details === 'Connection dropped' || details === 'Stream refused by server' || /^(read|write) (ECONNRESET|ETIMEDOUT)$/.test(details);
}
