/**
 * dialguard/otel's traceSpans over real loopback sockets, recorded by OpenTelemetry's own SDK
 * (a BasicTracerProvider exporting to an InMemorySpanExporter):
 *
 * - stopping while a call is in flight ends none of its spans early and leaves none open: each
 *   ends with its real outcome when its call, attempt or dial does;
 * - a socket dialled under a call carries that call's async context into all its later events,
 *   where the call's spans have ended: a call started there is parented by OpenTelemetry's active
 *   span (a root span without a context manager), and a dial or an event there goes on the
 *   innermost dialguard span still open, never on the ended dial.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { type Context, type ContextManager, ROOT_CONTEXT, type Span, SpanStatusCode, type Tracer, context, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { traceSpans } from '../../../src/adapters/otel/index.js';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { Http2Client } from '../../../src/http2/client.js';
import { freePort } from '../../../src/testing/local-process.js';
import { EchoClient, call as grpcCall, echoServer } from '../grpc/helpers.js';
import { HostBreaker, connect, dial, retry } from '../../../src/index.js';
import { blackhole, echoPeer } from '../../../src/testing/index.js';
import { eventually } from '../../helpers/eventually.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A real SDK tracer whose finished spans land in `exporter`; `started` counts spans started. */
function sdkTracer(): { tracer: Tracer; exporter: InMemorySpanExporter; started: () => number } {
  const exporter = new InMemorySpanExporter();
  let started = 0;
  const counting = { onStart: () => void started++, onEnd: () => {}, forceFlush: async () => {}, shutdown: async () => {} };
  const provider = new BasicTracerProvider({ spanProcessors: [counting, new SimpleSpanProcessor(exporter)] });
  cleanups.push(() => provider.shutdown());
  return { tracer: provider.getTracer('dialguard-test'), exporter, started: () => started };
}

/** A context manager on AsyncLocalStorage, as @opentelemetry/context-async-hooks registers one. */
class AlsContextManager implements ContextManager {
  readonly #als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.#als.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#als.disable();
    return this;
  }
}

/** Each span's parent among `spans`, by its real parent span context. */
function parents(spans: ReadableSpan[]): (s: ReadableSpan) => ReadableSpan | undefined {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  return (s) => (s.parentSpanContext === undefined ? undefined : byId.get(s.parentSpanContext.spanId));
}

/** The first 'data' on `socket` (written `x` to an echo peer), `then` run in that event's handler. */
function onEcho<T>(socket: net.Socket, then: () => T): Promise<Awaited<T>> {
  return new Promise((resolve, reject) => {
    socket.once('data', () => {
      try {
        Promise.resolve(then()).then(resolve, reject);
      } catch (err) {
        reject(err);
      }
    });
    socket.write('x');
  });
}

const once = { maxAttempts: 1, budget: null } as const;

describe('traceSpans: stopped while a call is in flight', () => {
  it('every span started ends, with its real outcome, when its call, attempt or dial does; nothing new is traced; then it leaves the channels (was: 3 started, 0 ended)', async () => {
    const { tracer, exporter, started } = sdkTracer();
    const peer = await blackhole();
    cleanups.push(() => peer.close());
    const stop = traceSpans({ tracer });
    cleanups.push(stop);
    const breaker = new HostBreaker();
    const call = retry((a) => connect({ host: peer.host, port: peer.port }, { breaker, timeout: 300, signal: a.signal }), once).then(
      (socket) => {
        socket.destroy();
        throw new Error('a blackhole accepted a connection');
      },
      (err: unknown) => err,
    );
    expect(await eventually(started, (n) => n === 3)).toBe(3); // call > attempt > dial, the SYN unanswered
    stop();
    // Stopped: a call made now gets no span, though the first still runs.
    expect(await retry(async () => 'value', once)).toBe('value');
    expect(exporter.getFinishedSpans()).toEqual([]); // none ended early
    const error = (await call) as { code?: string };
    expect(error.code).toBeTypeOf('string');
    expect(started()).toBe(3);
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['dialguard.dial', 'dialguard.attempt', 'dialguard.call']); // each child before its parent
    const [d, a, c] = spans as [ReadableSpan, ReadableSpan, ReadableSpan];
    const parentOf = parents(spans);
    expect([parentOf(d), parentOf(a), parentOf(c)]).toEqual([a, c, undefined]);
    expect(d.attributes).toMatchObject({ 'server.address': peer.host, 'server.port': peer.port, 'dialguard.outcome': 'failed', 'dialguard.phase': 'tcp' });
    expect(d.attributes['error.type']).toBeTypeOf('string');
    expect(a.attributes).toMatchObject({ 'dialguard.outcome': 'error', 'dialguard.refused': false });
    expect(c.attributes).toMatchObject({ 'dialguard.outcome': 'error', 'dialguard.attempts': 1, 'error.type': error.code });
    // Real durations: the dial ran its 300 ms timeout, well past the stop.
    expect(d.duration[0] * 1_000 + d.duration[1] / 1e6).toBeGreaterThanOrEqual(250);
    // The last span ended: no channel keeps a subscriber (tracing costs nothing again).
    await new Promise((resolve) => setImmediate(resolve));
    const names = ['dialguard:call', 'dialguard:attempt', 'dialguard:dial'];
    const subscribed = (n: string) => {
      const ch = diagnosticsChannel.tracingChannel(n);
      return ch.start.hasSubscribers || ch.asyncEnd.hasSubscribers || ch.error.hasSubscribers;
    };
    expect(names.map(subscribed)).toEqual([false, false, false]);
  });
});

describe('traceSpans: parents in a socket event of a connection dialled under an earlier call', () => {
  /**
   * A connection dialled by a call under `request-1`, then, in that socket's 'data' handler, a
   * second call under the application's own active span `handle-message` (a trace of its own).
   */
  async function secondCallFromSocketEvent(tracer: Tracer): Promise<{ request: Span; handler: Span }> {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const stop = traceSpans({ tracer });
    cleanups.push(stop);
    const breaker = new HostBreaker();
    const request = tracer.startSpan('request-1', {}, ROOT_CONTEXT);
    const socket = await context.with(trace.setSpan(ROOT_CONTEXT, request), () => retry(() => connect({ host: peer.host, port: peer.port }, { breaker }), once));
    cleanups.push(() => socket.destroy());
    request.end();
    const handler = tracer.startSpan('handle-message', {}, ROOT_CONTEXT);
    const second = await onEcho(socket, () =>
      context.with(trace.setSpan(ROOT_CONTEXT, handler), () => retry(() => connect({ host: peer.host, port: peer.port }, { breaker }), once)),
    );
    second.destroy();
    handler.end();
    return { request, handler };
  }

  /** The two calls' spans, each call's attempt and dial checked to be its own. */
  function calls(spans: ReadableSpan[]): [ReadableSpan, ReadableSpan] {
    const parentOf = parents(spans);
    const found = spans.filter((s) => s.name === 'dialguard.call');
    expect(found).toHaveLength(2);
    for (const call of found) {
      const attempt = spans.find((s) => s.name === 'dialguard.attempt' && parentOf(s) === call);
      expect(attempt).toBeDefined();
      expect(spans.filter((s) => s.name === 'dialguard.dial' && parentOf(s) === attempt)).toHaveLength(1);
    }
    return found as [ReadableSpan, ReadableSpan];
  }

  it('with a context manager: the second call is a child of the active handle-message, in its trace (was: of request-1\'s ended dial)', async () => {
    context.setGlobalContextManager(new AlsContextManager());
    cleanups.push(() => context.disable());
    const { tracer, exporter } = sdkTracer();
    const { request, handler } = await secondCallFromSocketEvent(tracer);
    const spans = exporter.getFinishedSpans();
    const parentOf = parents(spans);
    const [first, second] = calls(spans);
    expect(parentOf(first)?.spanContext().spanId).toBe(request.spanContext().spanId);
    expect(parentOf(second)?.name).toBe('handle-message');
    expect(second.spanContext().traceId).toBe(handler.spanContext().traceId);
    expect(second.spanContext().traceId).not.toBe(request.spanContext().traceId);
    expect(spans.filter((s) => s.spanContext().traceId === handler.spanContext().traceId).map((s) => s.name).sort()).toEqual([
      'dialguard.attempt',
      'dialguard.call',
      'dialguard.dial',
      'handle-message',
    ]);
  });

  it('without a context manager: the second call is a root span of a trace of its own (was: a child of the first call\'s ended dial)', async () => {
    const { tracer, exporter } = sdkTracer();
    await secondCallFromSocketEvent(tracer);
    const spans = exporter.getFinishedSpans();
    const parentOf = parents(spans);
    const [first, second] = calls(spans);
    expect(parentOf(first)).toBeUndefined(); // no context manager: context.with carried nothing
    expect(second.parentSpanContext).toBeUndefined();
    expect(second.spanContext().traceId).not.toBe(first.spanContext().traceId);
  });

  it('inside a call still in flight, a dial and a refusal made in a socket event of a connection it dialled go on its open attempt, not on the ended dial', async () => {
    const { tracer, exporter } = sdkTracer();
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const stop = traceSpans({ tracer });
    cleanups.push(stop);
    const breaker = new HostBreaker();
    breaker.isolate('isolated.test:5432');
    const value = await retry(async () => {
      const socket = await connect({ host: peer.host, port: peer.port }, { breaker });
      try {
        // The connect's dial span has ended; its socket's events still run in its async context.
        return await onEcho(socket, async () => {
          await expect(dial('isolated.test:5432', async () => 'never', { breaker })).rejects.toMatchObject({ code: 'DIALGUARD_HOST_UNAVAILABLE' });
          return dial('other.test:5432', async () => 'conn', { breaker });
        });
      } finally {
        socket.destroy();
      }
    }, once);
    expect(value).toBe('conn');
    const spans = exporter.getFinishedSpans();
    const parentOf = parents(spans);
    const call = spans.find((s) => s.name === 'dialguard.call')!;
    const attempt = spans.find((s) => s.name === 'dialguard.attempt')!;
    expect(parentOf(attempt)).toBe(call);
    const dials = spans.filter((s) => s.name === 'dialguard.dial');
    expect(dials.map((s) => [s.attributes['server.address'], s.attributes['server.port'], parentOf(s)?.name])).toEqual([
      [peer.host, peer.port, 'dialguard.attempt'],
      ['other.test', 5432, 'dialguard.attempt'], // was: a child of the ended dial above
    ]);
    expect(attempt.events.map((e) => [e.name, e.attributes?.['server.address'], e.attributes?.['server.port']])).toEqual([['dialguard.refused', 'isolated.test', 5432]]); // was: lost on the ended dial
    for (const d of dials) expect(d.events).toEqual([]);
  });
});

describe('traceSpans: a GuardedAgent call retried on a kept-alive socket', () => {
  // An outside review: the first attempt's 503 arrives from the socket's events, in the context of
  // the request that opened the socket; retry()'s call span, started there, went under that
  // earlier request's span, into its trace (6 of 6 runs with request()).
  it("each retried call's span is its caller's span's child, in its trace, not the span of the request that opened the socket", async () => {
    context.setGlobalContextManager(new AlsContextManager());
    cleanups.push(() => context.disable());
    const { tracer, exporter } = sdkTracer();
    cleanups.push(traceSpans({ tracer }));
    const { createServer } = await import('node:http');
    const { GuardedAgent, forFetch } = await import('../../../src/adapters/undici/index.js');
    const { request } = await import('undici');
    let failed = false;
    const server = createServer((req, res) => {
      if (req.url === '/flaky' && !failed) {
        failed = true;
        res.writeHead(503).end('busy');
      } else res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    cleanups.push(() => server.closeAllConnections());
    const origin = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const agent = new GuardedAgent({ breaker: new HostBreaker(), connectTimeout: 1_000, backoff: () => 20, timeout: 3_000 });
    cleanups.push(() => agent.close());
    const get = async (path: string, how: 'fetch' | 'request'): Promise<void> => {
      if (how === 'fetch') await (await fetch(`${origin}${path}`, { dispatcher: forFetch(agent) })).text();
      else await (await request(`${origin}${path}`, { dispatcher: agent })).body.text();
    };
    const under = (name: string, run: () => Promise<void>): Promise<Span> =>
      tracer.startActiveSpan(name, async (span) => {
        await run();
        span.end();
        return span;
      });
    const a = await under('A', () => get('/ok', 'fetch')); // opens the kept-alive socket
    for (const how of ['fetch', 'request'] as const) {
      failed = false;
      exporter.reset();
      const b = await under(`B-${how}`, () => get('/flaky', how)); // 503 on a kept-alive socket, then 200
      const spans = await eventually(() => exporter.getFinishedSpans(), (all) => all.some((s) => s.name === 'dialguard.call'));
      const call = spans.find((s) => s.name === 'dialguard.call')!;
      expect({ how, trace: call.spanContext().traceId, parent: call.parentSpanContext?.spanId }).toEqual({ how, trace: b.spanContext().traceId, parent: b.spanContext().spanId }); // was A's
      expect(call.spanContext().traceId).not.toBe(a.spanContext().traceId);
    }
  });
});

describe('traceSpans: error.type of a call the caller ended', () => {
  it("an AbortSignal's DOMException is named (TimeoutError, AbortError), not by its legacy numeric code ('23', '20'; an outside review)", async () => {
    const { tracer, exporter } = sdkTracer();
    const stop = traceSpans({ tracer });
    cleanups.push(stop);
    const never = (a: { signal: AbortSignal }) => new Promise<never>((_, reject) => a.signal.addEventListener('abort', () => reject(a.signal.reason)));
    const ac = new AbortController();
    const aborted = retry(never, { signal: ac.signal }).catch((e: unknown) => e);
    ac.abort();
    const timedOut = retry(never, { signal: AbortSignal.timeout(5) }).catch((e: unknown) => e);
    expect([((await aborted) as Error).name, ((await timedOut) as Error).name]).toEqual(['AbortError', 'TimeoutError']);
    const calls = await eventually(
      () => exporter.getFinishedSpans().filter((s) => s.name === 'dialguard.call'),
      (spans) => spans.length === 2,
    );
    expect(calls.map((s) => s.attributes['error.type']).sort()).toEqual(['AbortError', 'TimeoutError']);
  });
});

describe('traceSpans: error.type of an attempt the server answered with a retryable status', () => {
  it('an undici attempt that got a 503 (held for the retry) is HTTP_503, as retry:scheduled says (was: ERROR with no error.type; an outside review)', async () => {
    const { tracer, exporter } = sdkTracer();
    const stop = traceSpans({ tracer });
    cleanups.push(stop);
    let n = 0;
    const server = http.createServer((_req, res) => {
      res.statusCode = ++n === 1 ? 503 : 200;
      res.setHeader('retry-after', '0');
      res.end('x');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const agent = new GuardedAgent({ breaker: new HostBreaker(), backoff: () => 0, budget: null });
    cleanups.push(() => agent.close());
    const res = await request(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`, { dispatcher: agent });
    await res.body.text();
    expect(res.statusCode).toBe(200);
    const attempts = await eventually(
      () => exporter.getFinishedSpans().filter((s) => s.name === 'dialguard.attempt'),
      (spans) => spans.length === 2,
    );
    const first = attempts.find((s) => s.attributes['dialguard.attempt'] === 1)!;
    expect(first.attributes['error.type']).toBe('HTTP_503');
    expect(first.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'HTTP_503' });
  });
});

describe('traceSpans: a call that fails without entering the retry loop has its call span', () => {
  const calls = (exporter: InMemorySpanExporter, n: number): Promise<ReadableSpan[]> =>
    eventually(
      () => exporter.getFinishedSpans().filter((s) => s.name === 'dialguard.call'),
      (spans) => spans.length >= n,
    );

  it('Http2Client: a refused port with retry off, then a host its breaker refuses: one ERROR span each (was: none; an outside review)', async () => {
    const { tracer, exporter } = sdkTracer();
    cleanups.push(traceSpans({ tracer }));
    const port = await freePort();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const client = new Http2Client({ breaker, retry: false });
    cleanups.push(() => client.close());
    for (let i = 0; i < 2; i++) await client.request(`http://127.0.0.1:${port}/`).catch(() => {});
    const spans = await calls(exporter, 2);
    expect(spans.map((s) => [s.status.code, s.attributes['error.type'], s.attributes['dialguard.outcome']])).toEqual([
      [SpanStatusCode.ERROR, 'ECONNREFUSED', 'error'],
      [SpanStatusCode.ERROR, 'DIALGUARD_HOST_UNAVAILABLE', 'error'],
    ]);
  });

  it('GrpcGuard: a status the server sent to a call not retried (was: none)', async () => {
    const { tracer, exporter } = sdkTracer();
    cleanups.push(traceSpans({ tracer }));
    const server = await echoServer();
    cleanups.push(() => server.close());
    server.failNext = { count: 1, code: grpc.status.UNAVAILABLE, details: 'upstream down' };
    const guard = new GrpcGuard({ breaker: new HostBreaker(), retry: false });
    cleanups.push(() => guard.close());
    const client = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanups.push(() => client.close());
    await grpcCall(client, 'Echo').catch(() => {});
    const [span] = await calls(exporter, 1);
    expect([span!.status.code, span!.attributes['error.type']]).toEqual([SpanStatusCode.ERROR, String(grpc.status.UNAVAILABLE)]);
  });

  it('undici: a call its signal ended before any retry (was: none, only its dial span)', async () => {
    const { tracer, exporter } = sdkTracer();
    cleanups.push(traceSpans({ tracer }));
    const held: net.Socket[] = [];
    const hold = net.createServer((s) => void held.push(s.on('error', () => {})));
    await new Promise<void>((resolve) => hold.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => hold.close(() => resolve())));
    cleanups.push(() => held.forEach((s) => s.destroy()));
    const agent = new GuardedAgent({ breaker: new HostBreaker() });
    cleanups.push(() => agent.destroy());
    await request(`http://127.0.0.1:${(hold.address() as net.AddressInfo).port}/`, { dispatcher: agent, signal: AbortSignal.timeout(50) }).catch(() => {});
    const [span] = await calls(exporter, 1);
    expect([span!.status.code, span!.attributes['error.type']]).toEqual([SpanStatusCode.ERROR, 'TimeoutError']);
  });
});

describe('traceSpans: an undici call handed a 503 once no retry could follow', () => {
  it('ends its call span in error, HTTP_503, as the same 503 handed over at its deadline does (was: OK; an outside review)', async () => {
    const { tracer, exporter } = sdkTracer();
    cleanups.push(traceSpans({ tracer }));
    const server = http.createServer((_req, res) => {
      res.statusCode = 503;
      res.setHeader('retry-after', '0');
      res.end('busy');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const origin = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    for (const maxAttempts of [3, 1]) {
      const agent = new GuardedAgent({ breaker: new HostBreaker(), backoff: () => 0, budget: null, maxAttempts });
      cleanups.push(() => agent.close());
      const res = await request(`${origin}/`, { dispatcher: agent });
      expect(res.statusCode).toBe(503);
      await res.body.text();
    }
    const calls = await eventually(
      () => exporter.getFinishedSpans().filter((s) => s.name === 'dialguard.call'),
      (spans) => spans.length === 2,
    );
    expect(calls.map((s) => [s.status.code, s.attributes['error.type'], s.attributes['dialguard.outcome'], s.attributes['dialguard.attempts']])).toEqual([
      [SpanStatusCode.ERROR, 'HTTP_503', 'error', 3],
      [SpanStatusCode.ERROR, 'HTTP_503', 'error', 1],
    ]);
  });
});
