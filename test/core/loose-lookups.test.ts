/**
 * A DNS lookup is not a dial. connect() to a name guarded per address resolves it under the
 * breaker as one establishment, then dials an address: that used to publish two
 * `dialguard:dial:settled` events (the lookup under the name's key, then the address), so
 * `dialguard.dials` counted two dials for one connect. The lookup is now published on
 * `dialguard:lookup:settled`, traced with `kind: 'lookup'`, counted as `dialguard.lookups`.
 * Real sockets on loopback (an echo peer on 127.0.0.1), a lookup that answers with it.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type net from 'node:net';
import { MeterProvider, MetricReader, type SumMetricData } from '@opentelemetry/sdk-metrics';
import { afterEach, describe, expect, it } from 'vitest';
import { instrument } from '../../src/adapters/otel/index.js';
import { connect } from '../../src/guard/connect.js';
import type { DialEvents, LookupEvents } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { CHANNELS, subscribe } from '../../src/observe/channels.js';
import { type DialTraceMessage, dialTrace } from '../../src/observe/tracing.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';

class TestReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Answers any name with 127.0.0.1. */
const toLoopback = ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
  queueMicrotask(() => (options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4)));
}) as unknown as net.LookupFunction;

const stops: Array<() => void> = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

/** One connect to `name` on the peer's port, through the lookup above; the socket closed at once. */
async function connectOnce(name: string, port: number): Promise<void> {
  const socket = await connect({ host: name, port }, { breaker: new HostBreaker(), socket: { lookup: toLoopback } });
  socket.destroy();
}

describe('a name lookup is not a dial', () => {
  it('one connect to a name publishes one dial (the address) and one lookup (the name), each on its own channel', async () => {
    await using peer = await echoPeer();
    const dials: Array<DialEvents['settled']> = [];
    const lookups: Array<LookupEvents['settled']> = [];
    stops.push(subscribe('dialguard:dial:settled', (e) => void dials.push(e)));
    stops.push(subscribe('dialguard:lookup:settled', (e) => void lookups.push(e)));
    await connectOnce('svc-lookup.test', peer.port);
    expect(dials.map((e) => [e.host, e.outcome])).toEqual([[`127.0.0.1:${peer.port}`, 'succeeded']]);
    expect(lookups.map((e) => [e.host, e.outcome, e.phase])).toEqual([[`svc-lookup.test:${peer.port}`, 'succeeded', 'lookup']]);
    expect(CHANNELS).toContain('dialguard:lookup:settled');
  });

  it('the dial trace tells them apart: kind lookup for the name, kind dial for the address', async () => {
    await using peer = await echoPeer();
    const ended: DialTraceMessage[] = [];
    const handlers = {
      start() {},
      end() {},
      asyncStart() {},
      asyncEnd: (m: unknown) => void ended.push(m as DialTraceMessage),
      error() {},
    };
    dialTrace.subscribe(handlers);
    stops.push(() => dialTrace.unsubscribe(handlers));
    await connectOnce('svc-trace.test', peer.port);
    expect(ended.map((m) => [m.kind, m.host])).toEqual([
      ['lookup', `svc-trace.test:${peer.port}`],
      ['dial', `127.0.0.1:${peer.port}`],
    ]);
  });

  it('dialguard.dials counts the one dial; dialguard.lookups the one lookup', async () => {
    await using peer = await echoPeer();
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    stops.push(instrument({ meterProvider: provider }));
    await connectOnce('svc-metrics.test', peer.port);
    const { resourceMetrics } = await reader.collect();
    const metrics = new Map(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.descriptor.name, m]));
    const sum = (name: string): number => ((metrics.get(name) as SumMetricData | undefined)?.dataPoints ?? []).reduce((a, p) => a + (p.value as number), 0);
    expect(sum('dialguard.dials')).toBe(1);
    expect(sum('dialguard.lookups')).toBe(1);
    await provider.shutdown();
  });

  it('connect() with perAddress: false is one dial, Node resolving inside it: no lookup event', async () => {
    await using peer = await echoPeer();
    let dials = 0;
    let lookups = 0;
    const onDial = (): void => void dials++;
    const onLookup = (): void => void lookups++;
    diagnosticsChannel.subscribe('dialguard:dial:settled', onDial);
    diagnosticsChannel.subscribe('dialguard:lookup:settled', onLookup);
    stops.push(() => diagnosticsChannel.unsubscribe('dialguard:dial:settled', onDial));
    stops.push(() => diagnosticsChannel.unsubscribe('dialguard:lookup:settled', onLookup));
    const socket = await connect({ host: 'svc-one.test', port: peer.port }, { breaker: new HostBreaker(), perAddress: false, socket: { lookup: toLoopback } });
    socket.destroy();
    expect([dials, lookups]).toEqual([1, 0]);
  });
});
