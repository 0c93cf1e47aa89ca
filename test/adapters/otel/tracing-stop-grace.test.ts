/**
 * traceSpans() after its own review:
 * - stopped while an attempt's work never settles (it ignores its signal; the call ended at its
 *   deadline), it stayed on the channels for good, so every later call in the process built trace
 *   messages for nobody. Past STOP_GRACE the spans still open end as 'unfinished' and it leaves;
 * - a call made inside another call's open attempt (a user's retry() around a client that
 *   retries) nests under that attempt, one trace, as before the parenting fix split it off.
 */
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { STOP_GRACE, traceSpans } from '../../../src/adapters/otel/tracing.js';
import { attemptTrace, callTrace, traced } from '../../../src/observe/tracing.js';
import { retry } from '../../../src/retry/retry.js';

afterEach(() => vi.useRealTimers());

function sdk(): { provider: BasicTracerProvider; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  return { provider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }), exporter };
}

describe('traceSpans: stop and nesting', () => {
  it('stopped with an attempt that never settles: after STOP_GRACE its spans end as unfinished and the channels have no subscriber left', async () => {
    const { provider, exporter } = sdk();
    const stop = traceSpans({ tracer: provider.getTracer('t') });
    const outcome = await retry(() => new Promise(() => {}), { timeout: 30, maxAttempts: 1, budget: null }).catch((e: Error) => e.name);
    expect(outcome).toBe('DeadlineExceededError');
    vi.useFakeTimers();
    stop();
    expect(traced(attemptTrace)).toBe(true); // still waiting for the attempt's own end
    vi.advanceTimersByTime(STOP_GRACE);
    expect([traced(callTrace), traced(attemptTrace)]).toEqual([false, false]); // was true for good
    const unfinished = exporter.getFinishedSpans().filter((s) => s.attributes['dialguard.outcome'] === 'unfinished');
    expect(unfinished.map((s) => s.name)).toEqual(['dialguard.attempt']);
    await provider.shutdown();
  });

  it('a retry() inside another retry()’s attempt nests under that attempt, in one trace', async () => {
    const { provider, exporter } = sdk();
    const stop = traceSpans({ tracer: provider.getTracer('t') });
    await retry(() => retry(async () => 'x', { budget: null }), { budget: null });
    stop();
    const spans = exporter.getFinishedSpans();
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const parentName = (s: ReadableSpan): string => byId.get(s.parentSpanContext?.spanId ?? '')?.name ?? '(root)';
    expect(spans.map((s) => `${s.name} <- ${parentName(s)}`).sort()).toEqual([
      'dialguard.attempt <- dialguard.call',
      'dialguard.attempt <- dialguard.call',
      'dialguard.call <- (root)',
      'dialguard.call <- dialguard.attempt',
    ]);
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
    await provider.shutdown();
  });
});
