/**
 * Spans from dialguard's tracing channels: a `dialguard.call` span for a guarded call, a
 * `dialguard.attempt` span for each of its attempts, and a `dialguard.dial` span for each dial,
 * each a child of the one it ran inside (a dial made by an attempt is that attempt's child).
 * Refusals, backoff waits and breaker transitions are span events on the span they happened in.
 *
 * Attributes are bounded: the host dialled (`server.address`, `server.port`), an outcome, an error code, the
 * attempt number and whether the breaker refused.
 *
 * Parents: a span's parent is the innermost dialguard span of this subscription still open where
 * it starts (a call made inside another call's attempt nests under that attempt), found through
 * an AsyncLocalStorage bound to the channels' `start`, so the shape holds whatever context manager
 * the application runs. An ended one is skipped: a socket dialled under a call carries that
 * call's async context into all its later events, and a call started from them belongs to the
 * application's trace, not the ended dial's. When none is open, the parent is the span active in
 * OpenTelemetry's context (none, or no context manager: a root span). Events go on that same
 * innermost open span, or nowhere.
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
import { attemptTrace, callTrace, dialTrace, unsuccessfulOf } from '../../observe/tracing.js';
import { SharedFeeds } from './shared-feed.js';

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

/**
 * An error's code, when it has a short string or number one (bounded: never a message), else
 * `HTTP_<status>` for one carrying an HTTP `statusCode`. A
 * DOMException (an AbortSignal's reason) goes by its name: its numeric `code` is a legacy one
 * ('20' for AbortError, '23' for TimeoutError) that tells a reader of the span nothing.
 */
/**
 * A breaker key (`host:port`, `[v6]:port`) as OpenTelemetry's `server.address` (the host name or
 * address alone) and `server.port`. The key whole was given as the address: a backend read
 * `127.0.0.1:46824` as a host name (an outside review). A key without a port stays whole.
 *
 * @internal Exported for its test.
 */
export function serverAttributes(key: string): Attributes {
  const colon = key.lastIndexOf(':');
  const port = Number(key.slice(colon + 1));
  if (colon <= 0 || !/^\d{1,5}$/.test(key.slice(colon + 1)) || port > 65_535) return { 'server.address': key };
  const host = key.slice(0, colon);
  if (host.startsWith('[') && host.endsWith(']')) return { 'server.address': host.slice(1, -1), 'server.port': port };
  return host.includes(':') ? { 'server.address': key } : { 'server.address': host, 'server.port': port };
}

function codeOf(err: unknown): string | undefined {
  if (err instanceof DOMException) return err.name;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.length <= 64) return code;
  if (typeof code === 'number') return String(code);
  // An answer an attempt failed on (a 502/503 held for a retry): its status, as `classify` names
  // it and retry:scheduled reports it (was: ERROR with no error.type; an outside review).
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (Number.isInteger(status) && (status as number) >= 100 && (status as number) <= 599) return `HTTP_${status as number}`;
  return undefined;
}

/**
 * How long a stopped {@link traceSpans} waits for the spans still open to end on their own, ms:
 * past it they end as 'unfinished' (an attempt whose work ignores its signal may never settle).
 */
export const STOP_GRACE = 10_000;

/**
 * One span of this subscription, as the AsyncLocalStorage carries it into everything started
 * inside it. `span` is dropped when the span ends (an ended holder keeps no span alive in the
 * async context of a socket it dialled); `up` is the holder it started inside, within one call.
 */
interface Holder {
  span: Span | undefined;
  readonly up: Holder | undefined;
}

/** The innermost holder in `holder`'s chain whose span has not ended. */
function open(holder: Holder | undefined): Holder | undefined {
  let h = holder;
  while (h !== undefined && h.span === undefined) h = h.up;
  return h;
}

/**
 * Turns every dialguard call, attempt and dial in the process into spans on `tracer`. Returns
 * the function that stops. Nothing is traced (and nothing costs anything) until this is called.
 *
 * Stopping starts no new span and adds no more events, but ends none early: a span already
 * started when `stop` is called still ends when its call, attempt or dial does, with its real
 * outcome, so every span started is ended. Until the last of them has ended, this subscription
 * stays on the channels' `asyncEnd` (through which they end), for at most {@link STOP_GRACE} ms:
 * then the spans still open (work that never settles) end with `dialguard.outcome: 'unfinished'`
 * and it leaves the channels, so that no traced call pays for tracing nobody does. Spans that end
 * after the tracer provider was shut down are dropped by it: let calls in flight settle first.
 */
export function traceSpans(options: TraceSpansOptions = {}): Unsubscribe {
  // One subscription per tracer however often it is asked for (each call had its own, and
  // every span came out once per call: an outside review). A provider's own tracer is keyed by
  // the provider: before an SDK registers, the global provider hands out a new proxy tracer on
  // each getTracer(), and two traceSpans() made every span twice once it did (an outside review).
  const given = options.tracer;
  if (given !== undefined) return tracers.hold(given, () => traceOn(given));
  const provider = options.tracerProvider ?? trace.getTracerProvider();
  return tracers.hold(provider, () => traceOn(provider.getTracer('dialguard')));
}

/** The tracers (or providers) being fed, one subscription each however often {@link traceSpans} is called. */
const tracers = new SharedFeeds<object>();

/** Subscribes `tracer` to every traced call, attempt and dial (see {@link traceSpans}); returns the stop. */
function traceOn(tracer: Tracer): () => void {
  const current = new AsyncLocalStorage<Holder>();
  // The innermost of ours still open around it (ended ones skipped), else OpenTelemetry's active span.
  const parentOf = (own: Span | undefined) => (own === undefined ? context.active() : trace.setSpan(context.active(), own));
  // This subscription's holder for each traced message: its own, not a field of the message,
  // which every other traceSpans() (another tracer provider) would overwrite.
  const holders = new WeakMap<object, Holder>();
  // Spans started and not yet ended: stopping waits for them (a while) before leaving the channels.
  const live = new Set<Holder>();
  let stopped = false;
  const leaves: Array<() => void> = []; // leaving the channels' handlers (kept until `live` is 0)
  const stops: Array<() => void> = []; // starting no more spans or events
  const leave = (): void => {
    for (const off of leaves.splice(0)) off();
  };
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
    const startSpan = (message: Traced): Holder | undefined => {
      const outer = current.getStore();
      // Ended holders are left out of a new chain, so chains stay as short as the spans open
      // around them (a client that redials from its last socket's events links no history).
      const up = open(outer);
      try {
        const span = tracer.startSpan(typeof name === 'string' ? name : name(message), { attributes: begin(message) }, parentOf(up?.span));
        const holder: Holder = { span, up };
        holders.set(message, holder);
        live.add(holder);
        return holder;
      } catch (err) {
        contained(err);
        return outer; // no span: what runs inside nests in the one around it
      }
    };
    channel.start.bindStore(current, startSpan as (message: unknown) => Holder);
    const handlers = {
      start: () => {},
      end: () => {},
      asyncStart: () => {},
      error: () => {},
      asyncEnd: (message: unknown) => {
        const m = message as Traced;
        const holder = holders.get(m);
        const span = holder?.span;
        if (span === undefined) return;
        holders.delete(m);
        holder!.span = undefined; // ended: no parent, no event target from now on
        try {
          span.setAttributes(finish(m));
          // An answer the call could not get past (a 503 after its last attempt) ends it in error too.
          const answer = m.error === undefined ? unsuccessfulOf(m.result) : undefined;
          if (m.error !== undefined || answer !== undefined) {
            const code = answer === undefined ? codeOf(m.error) : answer.code;
            span.setStatus({ code: SpanStatusCode.ERROR, ...(code === undefined ? {} : { message: code }) });
            if (code !== undefined) span.setAttribute('error.type', code);
          } else {
            span.setStatus({ code: SpanStatusCode.OK });
          }
          span.end();
        } catch (err) {
          contained(err);
        } finally {
          live.delete(holder!);
          // Stopped, and that was the last span in flight: leave (after this publish is over).
          if (stopped && live.size === 0) queueMicrotask(leave);
        }
      },
    };
    channel.subscribe(handlers);
    leaves.push(() => channel.unsubscribe(handlers));
    stops.push(() => channel.start.unbindStore(current));
  };

  hook(
    callTrace,
    'dialguard.call',
    (m) => ({ 'dialguard.component': String(m.component) }),
    (m) => ({ 'dialguard.outcome': m.error === undefined && unsuccessfulOf(m.result) === undefined ? 'ok' : 'error', 'dialguard.attempts': Number(m.attempts ?? 0) }),
  );
  hook(
    attemptTrace,
    'dialguard.attempt',
    (m) => ({ 'dialguard.attempt': Number(m.attempt) }),
    (m) => ({ 'dialguard.outcome': m.error === undefined && unsuccessfulOf(m.result) === undefined ? 'ok' : 'error', 'dialguard.refused': m.error instanceof HostUnavailableError }),
  );
  hook(
    dialTrace,
    (m) => (m.kind === 'lookup' ? 'dialguard.lookup' : 'dialguard.dial'), // a name's DNS lookup is not a dial
    (m) => ({ ...serverAttributes(String(m.host)), 'dialguard.probe': m.probe === true }),
    (m) => ({ 'dialguard.outcome': String(m.outcome ?? 'failed'), 'dialguard.phase': String(m.phase ?? 'tcp') }),
  );

  // Events on the innermost dialguard span still open (a refusal has no dial span of its own).
  const event = (name: string, attributes: Attributes): void => {
    try {
      open(current.getStore())?.span?.addEvent(name, attributes);
    } catch (err) {
      contained(err);
    }
  };
  stops.push(
    subscribe('dialguard:breaker:refused', (e) => event('dialguard.refused', { ...serverAttributes(e.host), 'dialguard.state': e.state })),
    subscribe('dialguard:breaker:opened', (e) => event('dialguard.breaker.opened', { ...serverAttributes(e.host), 'dialguard.reopened': e.reopened })),
    subscribe('dialguard:breaker:closed', (e) => event('dialguard.breaker.closed', serverAttributes(e.host))),
    subscribe('dialguard:breaker:probe-granted', (e) => event('dialguard.breaker.probe', serverAttributes(e.host))),
    subscribe('dialguard:retry:scheduled', (e) =>
      event('dialguard.retry.scheduled', { 'dialguard.attempt': e.attempt, 'dialguard.delay_ms': e.delay, 'error.type': e.code ?? e.kind }),
    ),
  );
  return unsubscriber(() => {
    if (stopped) return;
    stopped = true;
    for (const stop of stops.splice(0)) stop();
    if (live.size === 0) {
      leave();
      return;
    }
    const grace = setTimeout(() => {
      for (const holder of live) {
        const span = holder.span;
        holder.span = undefined;
        try {
          span?.setAttributes({ 'dialguard.outcome': 'unfinished' });
          span?.end();
        } catch (err) {
          contained(err);
        }
      }
      live.clear();
      leave();
    }, STOP_GRACE);
    grace.unref();
    leaves.push(() => clearTimeout(grace)); // the last span ended first
  });
}
