/**
 * Spans from dialguard's tracing channels: a `dialguard.call` span for a guarded call, a
 * `dialguard.attempt` span for each of its attempts, and a `dialguard.dial` span for each dial,
 * each a child of the one it ran inside (a dial made by an attempt is that attempt's child).
 * Refusals, backoff waits and breaker transitions are span events on the span they happened in.
 *
 * Attributes are bounded: the host dialled (`server.address`), an outcome, an error code, the
 * attempt number and whether the breaker refused. Parents come from an AsyncLocalStorage bound to
 * the channels' `start`, so the shape holds whatever context manager the application runs; a
 * call's own parent is the span active in OpenTelemetry's context when it starts.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import diagnosticsChannel from 'node:diagnostics_channel';
import { type Attributes, type Span, SpanStatusCode, type Tracer, type TracerProvider, context, trace } from '@opentelemetry/api';
import { type Unsubscribe, unsubscriber } from '../../core/events.js';
import { HostUnavailableError } from '../../core/errors.js';
import { subscribe } from '../../observe/channels.js';
import { thrownText } from '../../core/validate.js';
import { attemptTrace, callTrace, dialTrace } from '../../observe/tracing.js';

/** Options of {@link traceSpans}. */
export interface TraceSpansOptions {
  /** The tracer to start spans on. Default `tracerProvider.getTracer('dialguard')`. */
  tracer?: Tracer;
  /** Where to get the tracer from. Default the global provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
}

interface Traced {
  error?: unknown;
  [key: string]: unknown;
}

/** An error's code, when it has a short string or number one (bounded: never a message). */
function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.length <= 64) return code;
  if (typeof code === 'number') return String(code);
  return undefined;
}

/**
 * Turns every dialguard call, attempt and dial in the process into spans on `tracer`. Returns
 * the function that stops. Nothing is traced (and nothing costs anything) until this is called.
 */
export function traceSpans(options: TraceSpansOptions = {}): Unsubscribe {
  const tracer = options.tracer ?? (options.tracerProvider ?? trace.getTracerProvider()).getTracer('dialguard');
  const current = new AsyncLocalStorage<Span>();
  const parent = () => {
    const span = current.getStore();
    return span === undefined ? context.active() : trace.setSpan(context.active(), span);
  };
  const stops: Array<() => void> = [];
  // This subscription's span for each traced message: its own, not a field of the message,
  // which every other traceSpans() (another tracer provider) would overwrite.
  const spans = new WeakMap<object, Span>();
  // The tracer (its span processors, exporters) is user code run inside every traced call: a
  // throw there is contained and reported once per subscription. Uncontained, node's
  // diagnostics_channel rethrew it on the next tick, an uncaught exception from inside a dial.
  let warned = false;
  const contained = (err: unknown): undefined => {
    if (!warned) {
      warned = true;
      process.emitWarning(`dialguard: traceSpans: the tracer threw (contained; reported once): ${thrownText(err)}`);
    }
    return undefined;
  };

  const hook = (
    channel: diagnosticsChannel.TracingChannel<object>,
    name: string | ((message: Traced) => string),
    begin: (message: Traced) => Attributes,
    finish: (message: Traced) => Attributes,
  ): void => {
    const startSpan = (message: Traced): Span | undefined => {
      try {
        const span = tracer.startSpan(typeof name === 'string' ? name : name(message), { attributes: begin(message) }, parent());
        spans.set(message, span);
        return span;
      } catch (err) {
        return contained(err);
      }
    };
    channel.start.bindStore(current, startSpan as (message: unknown) => Span);
    const handlers = {
      start: () => {},
      end: () => {},
      asyncStart: () => {},
      error: () => {},
      asyncEnd: (message: unknown) => {
        const m = message as Traced;
        const span = spans.get(m);
        if (span === undefined) return;
        spans.delete(m);
        try {
          span.setAttributes(finish(m));
          if (m.error !== undefined) {
            const code = codeOf(m.error);
            span.setStatus({ code: SpanStatusCode.ERROR, ...(code === undefined ? {} : { message: code }) });
            if (code !== undefined) span.setAttribute('error.type', code);
          } else {
            span.setStatus({ code: SpanStatusCode.OK });
          }
          span.end();
        } catch (err) {
          contained(err);
        }
      },
    };
    channel.subscribe(handlers);
    stops.push(() => {
      channel.unsubscribe(handlers);
      channel.start.unbindStore(current);
    });
  };

  hook(
    callTrace,
    'dialguard.call',
    (m) => ({ 'dialguard.component': String(m.component) }),
    (m) => ({ 'dialguard.outcome': m.error === undefined ? 'ok' : 'error', 'dialguard.attempts': Number(m.attempts ?? 0) }),
  );
  hook(
    attemptTrace,
    'dialguard.attempt',
    (m) => ({ 'dialguard.attempt': Number(m.attempt) }),
    (m) => ({ 'dialguard.outcome': m.error === undefined ? 'ok' : 'error', 'dialguard.refused': m.error instanceof HostUnavailableError }),
  );
  hook(
    dialTrace,
    (m) => (m.kind === 'lookup' ? 'dialguard.lookup' : 'dialguard.dial'), // a name's DNS lookup is not a dial
    (m) => ({ 'server.address': String(m.host), 'dialguard.probe': m.probe === true }),
    (m) => ({ 'dialguard.outcome': String(m.outcome ?? 'failed'), 'dialguard.phase': String(m.phase ?? 'tcp') }),
  );

  // Events on whatever dialguard span is current (a refusal has no dial span of its own).
  const event = (name: string, attributes: Attributes): void => {
    try {
      current.getStore()?.addEvent(name, attributes);
    } catch (err) {
      contained(err);
    }
  };
  stops.push(
    subscribe('dialguard:breaker:refused', (e) => event('dialguard.refused', { 'server.address': e.host, 'dialguard.state': e.state })),
    subscribe('dialguard:breaker:opened', (e) => event('dialguard.breaker.opened', { 'server.address': e.host, 'dialguard.reopened': e.reopened })),
    subscribe('dialguard:breaker:closed', (e) => event('dialguard.breaker.closed', { 'server.address': e.host })),
    subscribe('dialguard:breaker:probe-granted', (e) => event('dialguard.breaker.probe', { 'server.address': e.host })),
    subscribe('dialguard:retry:scheduled', (e) =>
      event('dialguard.retry.scheduled', { 'dialguard.attempt': e.attempt, 'dialguard.delay_ms': e.delay, 'error.type': e.code ?? e.kind }),
    ),
  );
  return unsubscriber(() => {
    for (const stop of stops.splice(0)) stop();
  });
}
