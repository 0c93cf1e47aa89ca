/**
 * ChannelConnector keeps each target's standing (live channel, connects under way, grpc's
 * reconnect backoff) while anyone may ask for it. A failed target nobody calls again is kept only
 * for its backoff, then forgotten: a process meeting many short-lived failing targets (pods that
 * come and go) must not keep one standing per target for good. Real refused connects on loopback.
 */
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { ChannelConnector } from '../../../src/adapters/grpc/channel-connector.js';
import { SpecTable } from '../../../src/adapters/grpc/target.js';
import type { DialContext } from '../../../src/guard/dial.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ManualClock } from '../../../src/testing/manual-clock.js';

/** A loopback port nothing listens on. */
async function refusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function context(): DialContext {
  return { signal: new AbortController().signal, permit: new HostBreaker({ failureThreshold: 0 }).admit('127.0.0.1'), phase: 'tcp' };
}

describe('ChannelConnector: the standing of targets nobody calls again', () => {
  it('100 refused targets: kept while their backoff runs, forgotten once it is over and a new target comes', async () => {
    const port = await refusedPort();
    const clock = new ManualClock(0);
    const specs = new SpecTable({});
    const connector = new ChannelConnector(specs, clock);
    const credentials = grpc.credentials.createInsecure();
    const keys = Array.from({ length: 100 }, (_, i) => specs.acquire(`127.0.1.${i + 1}:${port}`, credentials, undefined).key);
    const failures = await Promise.allSettled(keys.map((key) => connector.connect(key, context())));
    expect(failures.every((f) => f.status === 'rejected')).toBe(true);
    expect(connector.standings).toBe(100); // each backing off: the next asker must wait it out
    clock.advance(60_000); // past a first failure's backoff (grpc's 1 s, ±20 %)
    const next = specs.acquire(`127.0.2.1:${port}`, credentials, undefined).key;
    await connector.connect(next, context()).catch(() => undefined);
    expect(connector.standings).toBe(1); // was 101, and one more for every failing target met
  });
});
