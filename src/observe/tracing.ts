/**
 * Tracing channels (`node:diagnostics_channel.tracingChannel`): start / end / asyncStart /
 * asyncEnd / error around a dial, one attempt of a guarded call, and a whole guarded call, which
 * is what APM tools and OpenTelemetry's Node instrumentations build spans from (undici does the
 * same for its requests). `dialguard/otel`'s `traceSpans()` turns them into spans.
 *
 * - `dialguard:call`: a whole `retry()` call: every attempt, the waits between them.
 * - `dialguard:attempt`: one attempt of it.
 * - `dialguard:dial`: one admitted dial (a refusal is no dial: it is a `dialguard:breaker:refused`
 *   event inside whatever span is current), or a name's DNS lookup (`kind: 'lookup'`).
 *
 * Costs nothing when nobody subscribes: the publishers check `hasSubscribers` first and call the
 * function directly otherwise.
 *
 * @module
 */
import { AsyncResource } from 'node:async_hooks';
import diagnosticsChannel from 'node:diagnostics_channel';
import type { Classification } from '../core/classify.js';

/** The message of a `dialguard:call` trace. `error` or `result` is set when it ends. */
export interface CallTraceMessage {
  /** What made the call: `retry`. */
  component: 'retry';
  /** Attempts made, set when the call ends. */
  attempts?: number;
  error?: unknown;
  result?: unknown;
  [key: string]: unknown;
}

/** The message of a `dialguard:attempt` trace. */
export interface AttemptTraceMessage {
  /** 1 for the first attempt. */
  attempt: number;
  error?: unknown;
  result?: unknown;
  [key: string]: unknown;
}

/** The message of a `dialguard:dial` trace. */
export interface DialTraceMessage {
  /** The breaker's key for what was dialled (`host:port`; for a name guarded per address, the address). */
  host: string;
  /** Whether the dial is the breaker's half-open probe. */
  probe: boolean;
  /**
   * `dial`, or `lookup` for the DNS lookup of a name guarded per address (run under the
   * breaker as one establishment, but not a dial: its own span, never counted as one).
   */
  kind: 'dial' | 'lookup';
  /** How the dial ended for the breaker, set when it ends. */
  outcome?: 'succeeded' | 'failed' | 'abandoned';
  /** The stage it ended in (`lookup`, `tcp`, `tls`, `handshake`). */
  phase?: string;
  error?: unknown;
  result?: unknown;
  [key: string]: unknown;
}

/** `dialguard:call`. */
export const callTrace = diagnosticsChannel.tracingChannel<CallTraceMessage>('dialguard:call');
/** `dialguard:attempt`. */
export const attemptTrace = diagnosticsChannel.tracingChannel<AttemptTraceMessage>('dialguard:attempt');
/** `dialguard:dial`. */
export const dialTrace = diagnosticsChannel.tracingChannel<DialTraceMessage>('dialguard:dial');

/** Whether anyone listens to `channel` (Node 20.13+ has `hasSubscribers` on the tracing channel; older ones on each part). */
export function traced(channel: diagnosticsChannel.TracingChannel<object>): boolean {
  const own = (channel as { hasSubscribers?: boolean }).hasSubscribers;
  if (own !== undefined) return own;
  return channel.start.hasSubscribers || channel.asyncEnd.hasSubscribers || channel.error.hasSubscribers;
}

/** Runs `run` in the async context captured when it was made (see {@link callerContext}). */
export type InCallerContext = (run: () => void) => void;

/**
 * @internal The caller's async context, captured now (at a call's start) for what the call
 * starts later (its retry loop, a resend, a redial) to run in; undefined when nobody traces calls,
 * attempts or dials (costs nothing then). Each counts: a user tracing dials alone saw a resent
 * call's redial in the trace of the call that opened the dead connection.
 */
export function callerContext(): InCallerContext | undefined {
  return traced(callTrace) || traced(attemptTrace) || traced(dialTrace) ? captureContext() : undefined;
}

/**
 * @internal The async context current now, as a function that runs what it is given in it. An
 * AsyncResource and a closure over it: `AsyncResource.bind()` gives the same, but redefines
 * properties on the bound function it makes, ~11 µs a call on Node 20 against ~0.03, and a
 * GuardedAgent took two a request while anything traced calls or dials (+48 µs of CPU a healthy
 * request, 39 % of its throughput, with no span made; an outside review).
 */
export function captureContext(): InCallerContext {
  const resource = new AsyncResource('dialguard.caller');
  return (run) => resource.runInAsyncScope(run);
}

/**
 * @internal Traces a call that failed without entering the retry loop (an adapter's fast path:
 * a refusal, a failure not worth a retry, a status the server sent): a `dialguard:call` of its
 * own, started and ended now, with `err` as its error, in the caller's context when captured.
 * Only retried calls had one, so traces of a down host showed healthy dials alone (an outside
 * review: 10 failed Http2Client calls, 1 call span).
 */
export function traceFailedCall(err: unknown, inCaller: InCallerContext | undefined): void {
  traceCallNow(() => Promise.reject(err), inCaller);
}

/** A `dialguard:call` of one attempt, started and ended by `outcome`, in the caller's context when captured. */
function traceCallNow(outcome: () => Promise<unknown>, inCaller: InCallerContext | undefined): void {
  if (!traced(callTrace)) return;
  const run = (): void => {
    callTrace.tracePromise(outcome, { component: 'retry', attempts: 1 }).catch(() => {});
  };
  if (inCaller === undefined) run();
  else inCaller(run);
}

const UNSUCCESSFUL = Symbol.for('dialguard.unsuccessfulAnswer');

/**
 * @internal A call's value that is an answer it could not get past: an undici request handed the
 * server's 429/502/503/504 once its attempts ran out. The caller gets the answer; the retry loop
 * reports the call failed (`ok: false`, this classification), and its span ends in error. Was
 * reported ok: an always-503 host showed no failed call at all, while the same 503 handed over
 * when the deadline ended the loop was an error (an outside review).
 */
export interface UnsuccessfulAnswer {
  readonly [UNSUCCESSFUL]: Classification;
}

/** @internal Marks an answer as {@link UnsuccessfulAnswer}, classified `classification`. */
export function unsuccessfulAnswer(classification: Classification): UnsuccessfulAnswer {
  return { [UNSUCCESSFUL]: classification };
}

/** @internal The classification an {@link UnsuccessfulAnswer} carries; undefined for any other value. */
export function unsuccessfulOf(value: unknown): Classification | undefined {
  return typeof value === 'object' && value !== null ? (value as Partial<UnsuccessfulAnswer>)[UNSUCCESSFUL] : undefined;
}

/**
 * @internal Traces a call that ended on its first attempt, outside the retry loop, with an
 * {@link UnsuccessfulAnswer}: a zero-length `dialguard:call` ending in error, as
 * {@link traceFailedCall} does for a failure.
 */
export function traceUnsuccessfulCall(answer: UnsuccessfulAnswer, inCaller: InCallerContext | undefined): void {
  traceCallNow(() => Promise.resolve(answer), inCaller);
}
