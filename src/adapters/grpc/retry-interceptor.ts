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
import type { RetryBudget } from '../../retry/budget.js';
import { type RetryAttempt, retry } from '../../retry/retry.js';
import { remaining } from './guarded-call.js';
import { isStatusObject, statusFor } from './status.js';

/** How the interceptor retries. */
export interface RetryInterceptorSettings {
  maxAttempts: number;
  backoff?: Schedule | undefined;
  budget?: RetryBudget | null | undefined;
  clock: Clock;
  idempotent(method: string): boolean;
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
  #cancelled = false;
  #delivered = false;

  constructor(options: grpc.InterceptorOptions, nextCall: grpc.NextCall, settings: RetryInterceptorSettings) {
    this.#options = options;
    this.#nextCall = nextCall;
    this.#settings = settings;
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

  #run(): void {
    if (this.#cancelled || this.#controller !== undefined) return;
    const controller = new AbortController();
    this.#controller = controller;
    const left = remaining(this.#options.deadline ?? Infinity);
    const { maxAttempts, backoff, budget, clock } = this.#settings;
    retry((attempt) => this.#attempt(attempt), {
      timeout: Number.isFinite(left) ? Math.max(0, left) : undefined,
      maxAttempts,
      backoff,
      budget,
      clock,
      idempotent: this.#settings.idempotent(this.#options.method_definition.path),
      signal: controller.signal,
    }).then(
      (received) => this.#deliver(received, received.status!),
      (err: unknown) => this.#deliver(this.#last, this.#statusOf(err)),
    );
  }

  /** One attempt: resolves with what it received when OK, rejects with its status otherwise. */
  #attempt(attempt: RetryAttempt): Promise<Received> {
    let call: NextCallResult;
    if (attempt.number === 1) {
      call = this.#first;
    } else {
      // The remaining deadline, as grpc-js wants it: wall-clock milliseconds.
      const left = attempt.remaining;
      call = this.#nextCall({ ...this.#options, deadline: Number.isFinite(left) ? Date.now() + left : Infinity });
    }
    this.#current = call;
    return new Promise<Received>((resolve, reject) => {
      const got: Received = { metadata: undefined, message: undefined, status: undefined };
      const onAbort = (): void => call.cancelWithStatus(grpc.status.CANCELLED, CANCELLED_ON_CLIENT);
      attempt.signal.addEventListener('abort', onAbort, { once: true });
      call.start(this.#metadata!.clone(), {
        onReceiveMetadata: (metadata) => {
          got.metadata = metadata;
        },
        onReceiveMessage: (message) => {
          got.message = message;
        },
        onReceiveStatus: (status) => {
          attempt.signal.removeEventListener('abort', onAbort);
          got.status = status;
          this.#last = got;
          if (status.code === grpc.status.OK) resolve(got);
          else reject(status);
        },
      });
      call.sendMessage(this.#message);
      call.halfClose();
    });
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
    if (this.#controller === undefined) {
      // Cancelled before it was sent: end the unused call, and answer here.
      this.#first.cancelWithStatus(grpc.status.CANCELLED, CANCELLED_ON_CLIENT);
      if (this.#listener !== undefined) this.#deliver(undefined, this.#statusOf(undefined));
      return;
    }
    this.#controller.abort(new Error(CANCELLED_ON_CLIENT));
    this.#current?.cancelWithStatus(grpc.status.CANCELLED, CANCELLED_ON_CLIENT);
  }
}
