/**
 * dialguard/otel: OpenTelemetry metrics for everything dialguard does in this process, through
 * `@opentelemetry/api` (an optional peer dependency).
 *
 * Instruments are fed from dialguard's diagnostics channels, so nothing is measured (and the
 * refusal path stays a map lookup) until {@link instrument} subscribes. No attribute ever carries
 * an unbounded value: no host, address, target, connection id or request id; only closed sets
 * (an outcome, a failure kind, a breaker state, a component).
 *
 * | instrument | kind | attributes |
 * |---|---|---|
 * | `dialguard.breaker.opened` | counter | `reopened`: true/false |
 * | `dialguard.breaker.closed` | counter | |
 * | `dialguard.breaker.refused` | counter | `state`: open/half-open |
 * | `dialguard.dials` | counter | `outcome`: succeeded/failed/abandoned |
 * | `dialguard.dial.duration` | histogram, ms | `outcome`, `phase`: lookup/tcp/tls/handshake/other |
 * | `dialguard.lookups` | counter | `outcome` (a name's DNS lookup under the breaker: not a dial) |
 * | `dialguard.lookup.duration` | histogram, ms | `outcome` |
 * | `dialguard.connections.opened` / `.closed` / `.gone` | counter | |
 * | `dialguard.retries` | counter | `kind`: the failure kind that caused it (a retry loop's scheduled retries and a pool's immediate resends, `dialguard:pool:resent`) |
 * | `dialguard.retry_budget.refused` | counter | |
 * | `dialguard.call.duration` | histogram, ms | `component`: retry/http2, `outcome`: ok/error, `kind` |
 *
 * @module
 */
import { type Attributes, type Meter, type MeterProvider, metrics } from '@opentelemetry/api';
import type { Unsubscribe } from '../../core/events.js';
import type { FailureKind } from '../../core/classify.js';
import { subscribe } from '../../observe/channels.js';
import { SharedFeeds } from './shared-feed.js';

export { type TraceSpansOptions, traceSpans } from './tracing.js';

/** Options of {@link instrument}. */
export interface InstrumentOptions {
  /** The meter to create instruments on. Default `meterProvider.getMeter('dialguard')`. */
  meter?: Meter;
  /** Where to get the meter from. Default the global provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider;
}

const PHASES = new Set(['lookup', 'tcp', 'tls', 'handshake']);
const KINDS = new Set<string>(['refused', 'dial', 'connection', 'timeout', 'stream', 'cancelled', 'application', 'unknown']);

/** A failure kind, or `unknown` for anything outside the closed set (labels stay bounded). */
function kindLabel(kind: FailureKind | undefined): string {
  return kind !== undefined && KINDS.has(kind) ? kind : 'unknown';
}

/** The meters being fed, one feed each however often {@link instrument} is called. */
const meters = new SharedFeeds<Meter>();

/**
 * Creates dialguard's instruments and feeds them from every breaker, dial, pool, retry loop and
 * HTTP/2 client in the process. Returns the function that stops feeding them.
 *
 * A meter is fed once however often it is instrumented (two modules that each call
 * `instrument()` on the global provider counted every event twice): each call returns its own
 * stop, and the feeding ends when every caller has stopped.
 */
export function instrument(options: InstrumentOptions = {}): Unsubscribe {
  const meter = options.meter ?? (options.meterProvider ?? metrics.getMeterProvider()).getMeter('dialguard');
  return meters.hold(meter, feedMeter);
}

/** Creates the instruments on `meter` and subscribes them; returns the function that unsubscribes. */
function feedMeter(meter: Meter): () => void {
  const counter = (name: string, description: string) => meter.createCounter(name, { description });
  const opened = counter('dialguard.breaker.opened', 'Hosts the breaker opened after repeated failed dials');
  const closed = counter('dialguard.breaker.closed', 'Hosts closed again by a successful probe');
  const refused = counter('dialguard.breaker.refused', 'Dials refused without I/O because the host was open');
  const dials = counter('dialguard.dials', 'Dials by outcome');
  const dialDuration = meter.createHistogram('dialguard.dial.duration', {
    description: 'Time to establish a connection (TCP, TLS and protocol handshake), or to give up',
    unit: 'ms',
  });
  const lookups = counter('dialguard.lookups', 'DNS lookups of names guarded per address, by outcome (not dials)');
  const lookupDuration = meter.createHistogram('dialguard.lookup.duration', { description: 'Time to resolve a name guarded per address, or to give up', unit: 'ms' });
  const connOpened = counter('dialguard.connections.opened', 'Pooled connections opened');
  const connClosed = counter('dialguard.connections.closed', 'Pooled connections closed');
  const connGone = counter('dialguard.connections.gone', 'Pooled connections found dead (their requests released)');
  const retries = counter('dialguard.retries', 'Retries scheduled, by the kind of failure that caused them');
  const budgetRefused = counter('dialguard.retry_budget.refused', 'Retries refused by the retry budget');
  const callDuration = meter.createHistogram('dialguard.call.duration', {
    description: 'Whole-call latency: connect, every attempt and the backoff between them',
    unit: 'ms',
  });

  const add = (c: { add(v: number, a?: Attributes): void }, attributes?: Attributes): void => c.add(1, attributes);
  const stops: Unsubscribe[] = [
    subscribe('dialguard:breaker:opened', (e) => add(opened, { reopened: e.reopened })),
    subscribe('dialguard:breaker:closed', () => add(closed)),
    subscribe('dialguard:breaker:refused', (e) => add(refused, { state: e.state === 'open' ? 'open' : 'half-open' })),
    subscribe('dialguard:dial:settled', (e) => {
      const outcome = e.outcome;
      add(dials, { outcome });
      dialDuration.record(e.duration, { outcome, phase: PHASES.has(e.phase) ? e.phase : 'other' });
    }),
    subscribe('dialguard:lookup:settled', (e) => {
      add(lookups, { outcome: e.outcome });
      lookupDuration.record(e.duration, { outcome: e.outcome });
    }),
    subscribe('dialguard:pool:opened', () => add(connOpened)),
    subscribe('dialguard:pool:closed', () => add(connClosed)),
    subscribe('dialguard:pool:gone', () => add(connGone)),
    subscribe('dialguard:retry:scheduled', (e) => add(retries, { kind: kindLabel(e.kind) })),
    // The pool's immediate resends are retries too, inside one attempt of any loop above it.
    subscribe('dialguard:pool:resent', (e) => add(retries, { kind: kindLabel(e.kind) })),
    subscribe('dialguard:retry:budget-exhausted', () => add(budgetRefused)),
    subscribe('dialguard:retry:settled', (e) =>
      callDuration.record(e.elapsed, { component: 'retry', outcome: e.ok ? 'ok' : 'error', kind: e.ok ? 'none' : kindLabel(e.kind) }),
    ),
    subscribe('dialguard:http2:settled', (e) =>
      callDuration.record(e.latency, { component: 'http2', outcome: e.ok ? 'ok' : 'error', kind: e.ok ? 'none' : kindLabel(e.kind) }),
    ),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
