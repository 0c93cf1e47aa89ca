/**
 * A name whose service config picks `round_robin` keeps its balancing under the guard: grpc-js
 * resolves the name and spreads calls over its addresses, as it does alone. Per address (the
 * default for DNS names), each address was a channel of its own and the first READY one carried
 * every call: 41 calls and 0 where grpc-js alone split them 21 and 20.
 *
 * The name's two addresses (127.0.0.1 and 127.0.0.2, a headless service's) come from dns.lookup
 * patched in this process for `svc.test` only; TXT resolution is off, so nothing leaves loopback.
 */
import dns from 'node:dns';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { CountingRelay, EchoClient, EchoServer, call, countingRelay } from './helpers.js';

const cleanup = leakCheckEach();
const NAME = 'svc.test';
const ADDRESSES = [
  { address: '127.0.0.1', family: 4 },
  { address: '127.0.0.2', family: 4 },
];

type Lookup = typeof dns.lookup;
const realLookup = dns.lookup;
const realPromisesLookup = dns.promises.lookup;
afterEach(() => {
  (dns as { lookup: Lookup }).lookup = realLookup;
  (dns.promises as { lookup: typeof realPromisesLookup }).lookup = realPromisesLookup;
});

/** `svc.test` resolves to both addresses, in this process (callback and promise forms). */
function resolveName(): void {
  (dns as { lookup: unknown }).lookup = (host: string, options: unknown, callback?: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
    const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
    if (host !== NAME) return (realLookup as (...args: unknown[]) => void)(host, options, callback);
    process.nextTick(() => (all ? cb(null, ADDRESSES) : cb(null, ADDRESSES[0]!.address, 4)));
  };
  (dns.promises as { lookup: unknown }).lookup = async (host: string, options?: { all?: boolean }) => {
    if (host !== NAME) return realPromisesLookup(host, options as dns.LookupAllOptions);
    return options?.all === true ? ADDRESSES : ADDRESSES[0];
  };
}

async function servers(): Promise<[EchoServer, EchoServer]> {
  const a = await new EchoServer('127.0.0.1').listen(0);
  const b = new EchoServer('127.0.0.2');
  await b.listen(a.port);
  cleanup.push(() => a.close());
  cleanup.push(() => b.close());
  return [a, b];
}

describe('grpc guard: a round_robin service config', () => {
  it('spreads calls over the name\'s addresses as grpc-js does alone (was: every call on one)', async () => {
    resolveName();
    const [a, b] = await servers();
    const options = {
      'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
      'grpc.service_config_disable_resolution': 1,
    };
    const guard = new GrpcGuard({ breaker: new HostBreaker(), connectTimeout: 1_000, closeTimeout: 100 });
    const client = new EchoClient(`dns:///${NAME}:${a.port}`, grpc.credentials.createInsecure(), guard.clientOptions(options));
    cleanup.push(() => guard.close());
    cleanup.push(() => client.close());
    for (let i = 0; i < 40; i++) expect(String(await call(client, 'Echo', `c${i}`))).toBe(`c${i}`);
    expect(a.calls.Echo + b.calls.Echo).toBe(40);
    // round_robin alternates once both subchannels are READY; a few early calls may go to the first.
    expect(Math.min(a.calls.Echo, b.calls.Echo)).toBeGreaterThanOrEqual(10);
  });

  // An outside review: under round_robin one channel holds a connection per backend. A call cut by
  // one backend's death was read as the whole channel's, so every call riding it was released:
  // non-idempotent calls the healthy backends were serving failed UNAVAILABLE ("connection #N
  // ... is gone"); plain grpc-js keeps the channel READY and serves them. Over a rolling restart
  // of 3 backends: 85-94 failed calls where grpc-js alone failed 40-49.
  it('one backend dies under held calls: only its own calls fail; the other backend\'s are served, on the same channel', async () => {
    const [a, b] = await servers();
    // Relays on 127.0.0.3 and .4 (one port) in front of them: a relay's reset is a backend's death (RST).
    const ra = await countingRelay({ host: '127.0.0.1', port: a.port }, '127.0.0.3');
    const rb = new CountingRelay({ host: '127.0.0.2', port: a.port }, '127.0.0.4');
    rb.port = ra.port;
    await rb.listen();
    cleanup.push(() => ra.close(), () => rb.close());
    const options = { 'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) };
    const guard = new GrpcGuard({ breaker: new HostBreaker(), connectTimeout: 1_000, closeTimeout: 100 });
    const client = new EchoClient(`ipv4:127.0.0.3:${ra.port},127.0.0.4:${ra.port}`, grpc.credentials.createInsecure(), guard.clientOptions(options));
    cleanup.push(() => guard.close());
    cleanup.push(() => client.close());
    for (let i = 0; i < 10; i++) await call(client, 'Echo', `warm${i}`); // both subchannels READY
    expect(Math.min(a.calls.Echo, b.calls.Echo)).toBeGreaterThan(0);
    const held = Array.from({ length: 8 }, (_, i) =>
      call(client, 'Hold', `h${i}`, { deadline: Date.now() + 5_000 }).then(
        () => 'ok',
        (err: grpc.ServiceError) => `failed ${err.code}: ${err.details}`,
      ),
    );
    for (let i = 0; i < 100 && a.calls.Hold + b.calls.Hold < 8; i++) await new Promise((r) => setTimeout(r, 10));
    const onA = a.calls.Hold;
    const onB = b.calls.Hold;
    expect(onA + onB).toBe(8);
    expect(Math.min(onA, onB)).toBeGreaterThan(0);
    await ra.resetConnections(); // a's connection dies (RST): its held calls are cut
    await new Promise((r) => setTimeout(r, 100));
    b.releaseHeld();
    const outcomes = await Promise.all(held);
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(onB); // was 0: b's calls were released with the channel
    expect(outcomes.filter((o) => o !== 'ok')).toHaveLength(onA);
    expect(guard.stats()).toMatchObject({ opened: 1, gone: 0 }); // the same channel serves on
    expect(String(await call(client, 'Echo', 'after'))).toBe('after');
    expect(a.calls.Hold + b.calls.Hold).toBe(8); // nothing sent twice
  });
});
