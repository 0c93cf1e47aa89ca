/**
 * dialguard/otel's traceSpans: the parent/child shape of a call that dials, fails once, backs
 * off and succeeds. @opentelemetry/sdk-trace-base is not a dependency here, so spans are recorded
 * by a tracer written against @opentelemetry/api alone (parents read with `trace.getSpan`).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { type Attributes, type Context, type Span, type SpanOptions, type SpanStatus, type Tracer, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { traceSpans } from '../../src/adapters/otel/index.js';
import { HostBreaker, dial, retry } from '../../src/index.js';

interface Recorded {
  name: string;
  parent: Recorded | undefined;
  attributes: Attributes;
  events: Array<{ name: string; attributes: Attributes | undefined }>;
  status: SpanStatus | undefined;
  ended: boolean;
}

class RecordingTracer implements Tracer {
  readonly spans: Recorded[] = [];
  startSpan(name: string, options?: SpanOptions, ctx?: Context): Span {
    const parentSpan = ctx === undefined ? undefined : (trace.getSpan(ctx) as (Span & { record?: Recorded }) | undefined);
    const record: Recorded = { name, parent: parentSpan?.record, attributes: { ...options?.attributes }, events: [], status: undefined, ended: false };
    this.spans.push(record);
    const span = {
      record,
      spanContext: () => ({ traceId: '0'.repeat(31) + '1', spanId: String(this.spans.length).padStart(16, '0'), traceFlags: 1 }),
      setAttribute: (k: string, v: unknown) => ((record.attributes[k] = v as never), span),
      setAttributes: (a: Attributes) => (Object.assign(record.attributes, a), span),
      addEvent: (n: string, a?: Attributes) => (record.events.push({ name: n, attributes: a }), span),
      addLink: () => span,
      addLinks: () => span,
      setStatus: (s: SpanStatus) => ((record.status = s), span),
      updateName: () => span,
      end: () => void (record.ended = true),
      isRecording: () => !record.ended,
      recordException: () => {},
    };
    return span as unknown as Span;
  }
  startActiveSpan(): never {
    throw new Error('not used');
  }
}

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

describe('traceSpans', () => {
  it('a call that dials, fails once, backs off and succeeds: call > attempt 1 > dial (failed), call > attempt 2 > dial (succeeded), the wait an event on the call', async () => {
    const tracer = new RecordingTracer();
    stop = traceSpans({ tracer });
    const breaker = new HostBreaker();
    let dials = 0;
    const refusedOnce = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });
    const value = await retry(
      () =>
        dial(
          'db.test:5432',
          async () => {
            dials++;
            if (dials === 1) throw refusedOnce;
            return 'conn';
          },
          { breaker },
        ),
      { budget: null, backoff: () => 5 },
    );
    expect(value).toBe('conn');
    const shape = tracer.spans.map((s) => `${s.parent === undefined ? '' : `${s.parent.name}#${String(s.parent.attributes['dialguard.attempt'] ?? '')} > `}${s.name}`);
    expect(shape).toEqual([
      'dialguard.call',
      'dialguard.call# > dialguard.attempt',
      'dialguard.attempt#1 > dialguard.dial',
      'dialguard.call# > dialguard.attempt',
      'dialguard.attempt#2 > dialguard.dial',
    ]);
    const [call, a1, d1, a2, d2] = tracer.spans;
    expect(tracer.spans.every((s) => s.ended)).toBe(true);
    expect(call!.attributes).toMatchObject({ 'dialguard.outcome': 'ok', 'dialguard.attempts': 2, 'dialguard.component': 'retry' });
    expect(call!.events).toEqual([{ name: 'dialguard.retry.scheduled', attributes: { 'dialguard.attempt': 2, 'dialguard.delay_ms': 5, 'error.type': 'ECONNREFUSED' } }]);
    expect(a1!.attributes).toMatchObject({ 'dialguard.attempt': 1, 'dialguard.outcome': 'error', 'dialguard.refused': false, 'error.type': 'ECONNREFUSED' });
    expect(d1!.attributes).toMatchObject({ 'server.address': 'db.test:5432', 'dialguard.outcome': 'failed', 'error.type': 'ECONNREFUSED' });
    expect(a2!.attributes).toMatchObject({ 'dialguard.attempt': 2, 'dialguard.outcome': 'ok' });
    expect(d2!.attributes).toMatchObject({ 'dialguard.outcome': 'succeeded' });
  });

  it('a refusal is an event on the attempt that was refused (no dial span), and the attempt says refused', async () => {
    const tracer = new RecordingTracer();
    stop = traceSpans({ tracer });
    const breaker = new HostBreaker();
    breaker.isolate('db.test:5432');
    await expect(retry(() => dial('db.test:5432', async () => 'conn', { breaker }), { budget: null })).rejects.toMatchObject({
      code: 'DIALGUARD_HOST_UNAVAILABLE',
    });
    expect(tracer.spans.map((s) => s.name)).toEqual(['dialguard.call', 'dialguard.attempt']);
    const attempt = tracer.spans[1]!;
    expect(attempt.attributes).toMatchObject({ 'dialguard.refused': true, 'error.type': 'DIALGUARD_HOST_UNAVAILABLE' });
    expect(attempt.events.map((e) => e.name)).toEqual(['dialguard.refused']);
  });

  it('costs nothing when nobody subscribes: no tracing channel has subscribers before traceSpans or after it stops', () => {
    const names = ['dialguard:call', 'dialguard:attempt', 'dialguard:dial'];
    const active = () => names.map((n) => diagnosticsChannel.tracingChannel(n).start.hasSubscribers || diagnosticsChannel.tracingChannel(n).asyncEnd.hasSubscribers);
    expect(active()).toEqual([false, false, false]);
    const off = traceSpans({ tracer: new RecordingTracer() });
    expect(active()).toEqual([true, true, true]);
    off();
    expect(active()).toEqual([false, false, false]);
  });
});
