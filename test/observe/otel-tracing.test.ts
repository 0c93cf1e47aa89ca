/**
 * dialguard/otel's traceSpans, recorded by OpenTelemetry's own SDK (@opentelemetry/sdk-trace-base:
 * a BasicTracerProvider exporting to an InMemorySpanExporter): the parent/child shape of a call
 * that dials, fails once, backs off and succeeds, read from the spans' real parent span contexts.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { traceSpans } from '../../src/adapters/otel/index.js';
import { HostBreaker, dial, retry } from '../../src/index.js';

let stop: (() => void) | undefined;
let provider: BasicTracerProvider | undefined;
afterEach(async () => {
  stop?.();
  stop = undefined;
  await provider?.shutdown();
  provider = undefined;
});

/** A real SDK tracer whose finished spans land in the returned exporter. */
function sdkTracer(): { tracer: Tracer; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { tracer: provider.getTracer('dialguard-test'), exporter };
}

/** An OpenTelemetry HrTime as ms. */
function hrMs([seconds, nanos]: readonly [number, number]): number {
  return seconds * 1_000 + nanos / 1e6;
}

describe('traceSpans', () => {
  it('asked twice for one tracer, one call is one set of spans (was two); it traces on until every caller stopped', async () => {
    const { tracer, exporter } = sdkTracer();
    const first = traceSpans({ tracer });
    const second = traceSpans({ tracer });
    stop = second;
    const call = (): Promise<string> => retry(() => dial('db.test:1', async () => 'conn', { breaker: null }), { budget: null });
    await call();
    const names = (): string[] => exporter.getFinishedSpans().map((sp) => sp.name).sort();
    expect(names()).toEqual(['dialguard.attempt', 'dialguard.call', 'dialguard.dial']);
    first();
    first(); // again: harmless, and not the second caller's stop
    await call();
    expect(names()).toHaveLength(6); // still traced, once
    second();
    stop = undefined;
    await call();
    expect(names()).toHaveLength(6); // nobody traces now
  });

  it('asked twice with no tracer before an SDK registers the global provider, then registered: one set of spans a call (was two: the proxy hands out a new tracer each time; an outside review)', async () => {
    const { exporter } = sdkTracer();
    const first = traceSpans();
    const second = traceSpans();
    try {
      expect(trace.setGlobalTracerProvider(provider!)).toBe(true);
      await retry(() => dial('db.test:1', async () => 'conn', { breaker: null }), { budget: null });
      expect(exporter.getFinishedSpans().map((sp) => sp.name).sort()).toEqual(['dialguard.attempt', 'dialguard.call', 'dialguard.dial']);
    } finally {
      first();
      second();
      trace.disable();
    }
  });

  it('a call that dials, fails once, backs off and succeeds: call > attempt 1 > dial (failed), call > attempt 2 > dial (succeeded), the wait an event on the call', async () => {
    const { tracer, exporter } = sdkTracer();
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
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(5); // every span ended (only ended spans are exported)
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const parentOf = (s: ReadableSpan) => (s.parentSpanContext === undefined ? undefined : byId.get(s.parentSpanContext.spanId));
    const childrenOf = (p: ReadableSpan) => spans.filter((s) => parentOf(s) === p);
    // One trace, one root: the call.
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
    const roots = spans.filter((s) => parentOf(s) === undefined);
    expect(roots.map((s) => s.name)).toEqual(['dialguard.call']);
    const call = roots[0]!;
    // call > attempt 1 > dial (failed); call > attempt 2 > dial (succeeded).
    const attempts = childrenOf(call).sort((x, y) => Number(x.attributes['dialguard.attempt']) - Number(y.attributes['dialguard.attempt']));
    expect(attempts.map((s) => `${s.name}#${String(s.attributes['dialguard.attempt'])}`)).toEqual(['dialguard.attempt#1', 'dialguard.attempt#2']);
    const [a1, a2] = attempts as [ReadableSpan, ReadableSpan];
    expect(childrenOf(a1).map((s) => s.name)).toEqual(['dialguard.dial']);
    expect(childrenOf(a2).map((s) => s.name)).toEqual(['dialguard.dial']);
    const d1 = childrenOf(a1)[0]!;
    const d2 = childrenOf(a2)[0]!;
    // The wait between them: the second attempt starts after the first ended, and the backoff is an event on the call.
    expect(hrMs(a2.startTime)).toBeGreaterThanOrEqual(hrMs(a1.endTime));
    expect(call.attributes).toMatchObject({ 'dialguard.outcome': 'ok', 'dialguard.attempts': 2, 'dialguard.component': 'retry' });
    expect(call.events.map((e) => ({ name: e.name, attributes: e.attributes }))).toEqual([
      { name: 'dialguard.retry.scheduled', attributes: { 'dialguard.attempt': 2, 'dialguard.delay_ms': 5, 'error.type': 'ECONNREFUSED' } },
    ]);
    expect(a1.attributes).toMatchObject({ 'dialguard.attempt': 1, 'dialguard.outcome': 'error', 'dialguard.refused': false, 'error.type': 'ECONNREFUSED' });
    expect(a1.status.code).toBe(SpanStatusCode.ERROR);
    expect(d1.attributes).toMatchObject({ 'server.address': 'db.test', 'server.port': 5432, 'dialguard.outcome': 'failed', 'error.type': 'ECONNREFUSED' });
    expect(d1.status.code).toBe(SpanStatusCode.ERROR);
    expect(a2.attributes).toMatchObject({ 'dialguard.attempt': 2, 'dialguard.outcome': 'ok' });
    expect(d2.attributes).toMatchObject({ 'dialguard.outcome': 'succeeded' });
    expect(call.status.code).not.toBe(SpanStatusCode.ERROR);
    // Each child ended before its parent (the exporter receives spans as they end): none is left open.
    for (const child of [a1, a2, d1, d2]) expect(spans.indexOf(child)).toBeLessThan(spans.indexOf(parentOf(child)!));
    expect(hrMs(a1.startTime)).toBeGreaterThanOrEqual(hrMs(call.startTime) - 1); // the SDK anchors times to the ms
  });

  it('a refusal is an event on the attempt that was refused (no dial span), and the attempt says refused', async () => {
    const { tracer, exporter } = sdkTracer();
    stop = traceSpans({ tracer });
    const breaker = new HostBreaker();
    breaker.isolate('db.test:5432');
    await expect(retry(() => dial('db.test:5432', async () => 'conn', { breaker }), { budget: null })).rejects.toMatchObject({
      code: 'DIALGUARD_HOST_UNAVAILABLE',
    });
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name).sort()).toEqual(['dialguard.attempt', 'dialguard.call']);
    const call = spans.find((s) => s.name === 'dialguard.call')!;
    const attempt = spans.find((s) => s.name === 'dialguard.attempt')!;
    expect(attempt.parentSpanContext?.spanId).toBe(call.spanContext().spanId);
    expect(attempt.attributes).toMatchObject({ 'dialguard.refused': true, 'error.type': 'DIALGUARD_HOST_UNAVAILABLE' });
    expect(attempt.events.map((e) => e.name)).toEqual(['dialguard.refused']);
  });

  it('two subscriptions (two tracer providers) each get every span, each ended once', async () => {
    const first = sdkTracer();
    const firstProvider = provider!;
    const second = sdkTracer();
    const stopFirst = traceSpans({ tracer: first.tracer });
    const stopSecond = traceSpans({ tracer: second.tracer });
    try {
      const breaker = new HostBreaker();
      await retry(() => dial('db.test:5432', async () => 'conn', { breaker }), { budget: null });
    } finally {
      stopFirst();
      stopSecond();
    }
    for (const { exporter } of [first, second]) {
      const names = exporter.getFinishedSpans().map((s) => s.name).sort();
      expect(names).toEqual(['dialguard.attempt', 'dialguard.call', 'dialguard.dial']); // was: all three in one, none in the other
      for (const s of exporter.getFinishedSpans()) expect(s.ended).toBe(true);
    }
    await firstProvider.shutdown();
  });

  it('costs nothing when nobody subscribes: no tracing channel has subscribers before traceSpans or after it stops', () => {
    const names = ['dialguard:call', 'dialguard:attempt', 'dialguard:dial'];
    const active = () => names.map((n) => diagnosticsChannel.tracingChannel(n).start.hasSubscribers || diagnosticsChannel.tracingChannel(n).asyncEnd.hasSubscribers);
    expect(active()).toEqual([false, false, false]);
    const off = traceSpans({ tracer: sdkTracer().tracer });
    expect(active()).toEqual([true, true, true]);
    off();
    expect(active()).toEqual([false, false, false]);
  });

  for (const where of ['onStart', 'onEnd'] as const) {
    it(`a span processor whose ${where} throws is contained: the call goes on, one process warning (was: an uncaught exception from inside the call)`, async () => {
      const processor = {
        onStart: () => {
          if (where === 'onStart') throw new Error(`${where} blew up`);
        },
        onEnd: () => {
          if (where === 'onEnd') throw new Error(`${where} blew up`);
        },
        forceFlush: async () => {},
        shutdown: async () => {},
      };
      provider = new BasicTracerProvider({ spanProcessors: [processor] });
      stop = traceSpans({ tracerProvider: provider });
      const warnings: string[] = [];
      const uncaught: unknown[] = [];
      const onWarning = (w: Error): void => void warnings.push(w.message);
      const onUncaught = (err: unknown): void => void uncaught.push(err);
      process.on('warning', onWarning);
      process.on('uncaughtException', onUncaught);
      try {
        for (let i = 0; i < 3; i++) expect(await retry(async () => 'value', { budget: null })).toBe('value');
        await new Promise((resolve) => setImmediate(resolve));
        expect(uncaught).toEqual([]);
        expect(warnings.filter((m) => m.includes(`${where} blew up`))).toHaveLength(1);
      } finally {
        process.off('warning', onWarning);
        process.off('uncaughtException', onUncaught);
      }
    });
  }
});
