/**
 * A grpc-js interceptor that retries unary calls with dialguard's `retry()`.
 *
 * - Every attempt gets the REMAINING time of the caller's deadline (grpc-js sends it to the server
 *   as `grpc-timeout`), never a fresh one, and the call ends by that deadline whatever happens.
 * - What is retried is `retry()`'s rule on the status, read by `classify`: a failure the server
 *   never saw (a failed or timed-out connect, a refused stream) for any call; one it may have
 *   seen (a connection that died under the call) only for a method declared idempotent. A
 *   refusal by the breaker ends the call at once; a status the server chose to send is final.
 * - Retries are jittered and drawn from a retry budget, so a fleet cannot multiply an outage.
 *
 * Streaming calls pass through untouched: a stream cannot be replayed once the caller has seen
 * part of it. Interceptors given as call options replace the client's, this one included.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import type { Schedule } from '../../core/backoff.js';
import type { Clock } from '../../core/clock.js';
import { DeadlineExceededError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../core/errors.js';
import { type RetryBudget, sharedRetryBudget } from '../../retry/budget.js';
import { retry } from '../../retry/retry.js';
import { remaining } from './guarded-call.js';
import { isStatusObject, statusFor } from './status.js';

/** How the interceptor retries. */
export interface RetryInterceptorSettings {
  maxAttempts: number;
  backoff?: Schedule | undefined;
  budget?: RetryBudget | null | undefined;
  clock: Clock;
  idempotent(method: string): boolean;
  /**
   * Whether no other interceptor runs below this one. Each attempt then gets the caller's metadata
   * as it is (grpc-js only sets and removes its own headers on it); otherwise each gets a copy, so
   * an interceptor that adds a header adds it once per attempt. Default false.
   */
  alone?: boolean;
}

/** grpc-js's intercepting call, as `NextCall` returns it. */
type NextCallResult = ReturnType<grpc.NextCall>;

/** What one successful attempt received. */
interface Received {
  metadata: grpc.Metadata | undefined;
  message: unknown;
  status: grpc.StatusObject | undefined;
}

/** The status grpc-js reports for a call its caller cancelled. */
const CANCELLED_ON_CLIENT = 'Cancelled on client';

/** The interceptor; see the module docs. */
export function retryInterceptor(settings: RetryInterceptorSettings): grpc.Interceptor {
  return (options, nextCall) => {
    const method = options.method_definition;
    if (method.requestStream || method.responseStream || settings.maxAttempts <= 1) return new grpc.InterceptingCall(nextCall(options));
    return new UnaryRetry(options, nextCall, settings).call;
  };
}

/** One unary call and its attempts. */
class UnaryRetry {
  readonly call: grpc.InterceptingCall;
  readonly #options: grpc.InterceptorOptions;
  readonly #nextCall: grpc.NextCall;
  readonly #settings: RetryInterceptorSettings;
  /** The call grpc-js made for this interceptor: attempt 1 runs on it. */
  readonly #first: NextCallResult;
  #metadata: grpc.Metadata | undefined;
  #listener: grpc.InterceptingListener | undefined;
  #message: unknown;
  #current: NextCallResult | undefined;
  #last: Received | undefined;
  #controller: AbortController | undefined;
  readonly #budget: RetryBudget | null;
  #started = false;
  #cancelled = false;
  #delivered = false;

  constructor(options: grpc.InterceptorOptions, nextCall: grpc.NextCall, settings: RetryInterceptorSettings) {
    this.#options = options;
    this.#nextCall = nextCall;
    this.#settings = settings;
    this.#budget = settings.budget === undefined ? sharedRetryBudget() : settings.budget;
    this.#first = nextCall(options);
    // The requester never calls `next`: the attempts run on calls of their own (the first on
    // #first), and what they receive reaches the caller's listener once the loop has decided.
    this.call = new grpc.InterceptingCall(this.#first, {
      start: (metadata, listener) => {
        this.#metadata = metadata;
        this.#listener = listener;
      },
      sendMessage: (message) => {
        this.#message = message;
      },
      halfClose: () => this.#run(),
      cancel: () => this.#cancel(),
    });
  }

  /**
   * Runs attempt 1 at once; only a failure enters `retry()`, which is handed that outcome as its
   * own first attempt (classified, counted, backed off from, exactly as if it had run it). A call
   * that succeeds first time so costs no retry machinery, only its deposit in the budget.
   */
  #run(): void {
    if (this.#cancelled || this.#started) return;
    this.#started = true;
    const { clock } = this.#settings;
    const left = remaining(this.#options.deadline ?? Infinity);
    const deadline = Number.isFinite(left) ? clock.now() + Math.max(0, left) : undefined;
    this.#attempt(this.#first, this.#metadataForAttempt(), (received, status) => {
      if (status.code === grpc.status.OK) {
        this.#budget?.deposit();
        this.#deliver(received, status);
        return;
      }
      if (this.#cancelled) return this.#deliver(this.#last, this.#statusOf(undefined));
      // Past the deadline nothing more can be tried: attempt 1's own status is the answer.
      if (deadline !== undefined && clock.now() >= deadline) return this.#deliver(this.#last, status);
      this.#retry(status, deadline);
    });
  }

  /** Attempts 2 and on, by `retry()`; `first` is how attempt 1 failed. */
  #retry(first: grpc.StatusObject, deadline: number | undefined): void {
    const controller = new AbortController();
    this.#controller = controller;
    const { maxAttempts, backoff, budget, clock } = this.#settings;
    retry(
      (attempt) => {
        if (attempt.number === 1) return Promise.reject(first);
        // The remaining deadline, as grpc-js wants it: wall-clock milliseconds.
        const left = attempt.remaining;
        const call = this.#nextCall({ ...this.#options, deadline: Number.isFinite(left) ? Date.now() + left : Infinity });
        const onAbort = (): void => call.cancelWithStatus(grpc.status.CANCELLED, CANCELLED_ON_CLIENT);
        attempt.signal.addEventListener('abort', onAbort, { once: true });
        return new Promise<Received>((resolve, reject) =>
          this.#attempt(call, this.#metadataForAttempt(), (received, status) => {
            attempt.signal.removeEventListener('abort', onAbort);
            if (status.code === grpc.status.OK) resolve(received);
            else reject(status);
          }),
        );
      },
      {
        deadline,
        maxAttempts,
        backoff,
        budget,
        clock,
        idempotent: this.#settings.idempotent(this.#options.method_definition.path),
        signal: controller.signal,
      },
    ).then(
      (received) => this.#deliver(received, received.status!),
      (err: unknown) => this.#deliver(this.#last, this.#statusOf(err)),
    );
  }

  #metadataForAttempt(): grpc.Metadata {
    return this.#settings.alone === true ? this.#metadata! : this.#metadata!.clone();
  }

  /** Runs one attempt on `call`; `done` hears what it received and how it ended. */
  #attempt(call: NextCallResult, metadata: grpc.Metadata, done: (received: Received, status: grpc.StatusObject) => void): void {
    this.#current = call;
    const got: Received = { metadata: undefined, message: undefined, status: undefined };
    call.start(metadata, {
      onReceiveMetadata: (md) => {
        got.metadata = md;
      },
      onReceiveMessage: (message) => {
        got.message = message;
      },
      onReceiveStatus: (status) => {
        got.status = status;
        this.#last = got;
        done(got, status);
      },
    });
    call.sendMessage(this.#message);
    call.halfClose();
  }

  /** The status the caller sees when the loop ends with `err`. */
  #statusOf(err: unknown): grpc.StatusObject {
    if (this.#cancelled) return { code: grpc.status.CANCELLED, details: CANCELLED_ON_CLIENT, metadata: new grpc.Metadata() };
    if (isStatusObject(err)) return err;
    // Out of attempts or of budget: the last attempt's own status is the answer.
    if (err instanceof RetriesExhaustedError || err instanceof RetryBudgetExhaustedError) {
      const last = this.#last?.status;
      if (last !== undefined) return last;
    }
    if (err instanceof DeadlineExceededError) return statusFor(err, grpc.status.DEADLINE_EXCEEDED);
    return statusFor(err);
  }

  #deliver(received: Received | undefined, status: grpc.StatusObject): void {
    if (this.#delivered) return;
    this.#delivered = true;
    const listener = this.#listener!;
    const ok = status.code === grpc.status.OK;
    if (received?.metadata !== undefined && (ok || received.status === status)) listener.onReceiveMetadata(received.metadata);
    if (ok) listener.onReceiveMessage(received?.message ?? null);
    listener.onReceiveStatus(status);
  }

  /** The caller cancelled: stop the loop and the attempt under way. */
  #cancel(): void {
    if (this.#cancelled || this.#delivered) return;
    this.#cancelled = true;
    if (!this.#started) {
      // Cancelled before it was sent: end the unused call, and answer here.
      this.#first.cancelWithStatus(grpc.status.CANCELLED, CANCELLED_ON_CLIENT);
      if (this.#listener !== undefined) this.#deliver(undefined, this.#statusOf(undefined));
      return;
    }
    // Ends the backoff or the attempt under way; the loop (or attempt 1) then reports CANCELLED.
    this.#controller?.abort(new Error(CANCELLED_ON_CLIENT));
    this.#current?.cancelWithStatus(grpc.status.CANCELLED, CANCELLED_ON_CLIENT);
  }
}
