/**
 * The gRPC adapter guards a name per address (issue 16): `svc.test` resolves, through the guard's
 * `lookup`, to 127.0.0.2, 127.0.0.3 and 127.0.0.4, real grpc-js servers on one port (a dead one has
 * none: its port is closed). One guard per call, all sharing one breaker, so each call connects
 * a channel. Counts dials per breaker key (`dialguard:dial:settled`), the calls each server
 * answered, and the calls refused.
 */
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { ChannelConnectError, GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { lookupBreaker } from '../../../src/guard/addresses.js';
import { freePort } from '../../../src/testing/local-process.js';
import { acceptAndHold } from '../../../src/testing/tcp-peers.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { dialsPerKey, lookupTo } from '../../helpers/per-address.js';
import { breakerOnManualClock } from '../../helpers/sockets.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { EchoClient, EchoServer, call, echoService, failure } from './helpers.js';

leakCheckEach();

const dials = dialsPerKey();
const servers: EchoServer[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A server on `host:port` (port 0: a free one), closed after the test. */
async function serve(host: `127.0.0.${number}`, port = 0): Promise<EchoServer> {
  const s = await new EchoServer(host).listen(port);
  servers.push(s);
  return s;
}

/** A TLS server (TEST_CERT: localhost, 127.0.0.1 and ::1, not 127.0.0.2-4) on `host:port`, answering Echo; its port and calls. */
async function serveTls(host: string, port = 0): Promise<{ port: number; calls: () => number }> {
  let served = 0;
  const server = new grpc.Server();
  server.addService(echoService, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      served++;
      cb(null, c.request);
    },
  });
  const credentials = grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(TEST_KEY), cert_chain: Buffer.from(TEST_CERT) }]);
  const bound = await new Promise<number>((resolve, reject) => server.bindAsync(`${host}:${port}`, credentials, (err, p) => (err ? reject(err) : resolve(p))));
  servers.push({ close: async () => server.forceShutdown() } as EchoServer);
  return { port: bound, calls: () => served };
}

/** One Echo call to `target` on a fresh guard (so it connects), closed after. */
async function once(target: string, options: GrpcGuardOptions, credentials = grpc.credentials.createInsecure()): Promise<void> {
  const guard = new GrpcGuard({ connectTimeout: 1_000, retry: false, keepAliveInterval: 0, ...options });
  const client = new EchoClient(target, credentials, guard.clientOptions());
  try {
    await call(client, 'Echo', 'x', { deadline: Date.now() + 3_000 });
  } finally {
    client.close();
    await guard.close();
  }
}

/** Runs `n` calls one after another; the failures, in order. */
async function calls(n: number, target: string, options: GrpcGuardOptions, before?: (i: number) => Promise<void>): Promise<unknown[]> {
  const failures: unknown[] = [];
  for (let i = 0; i < n; i++) {
    await before?.(i);
    try {
      await once(target, options);
    } catch (err) {
      failures.push(err);
    }
  }
  return failures;
}

describe('GrpcGuard: a name is guarded per address', () => {
  it('a guard whose lookup answers ENOTFOUND never gets the name refused for a guard resolving it (was: refused on the shared breaker)', async () => {
    const a = await serve('127.0.0.2');
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const broken = ((host: string, _o: unknown, cb: (err: Error) => void) =>
      queueMicrotask(() => cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host })))) as unknown as net.LookupFunction;
    const { lookup } = lookupTo(['127.0.0.2']);
    for (let i = 0; i < 3; i++) {
      await expect(once(`svc.test:${a.port}`, { breaker, lookup: broken })).rejects.toBeInstanceOf(Error);
      await once(`svc.test:${a.port}`, { breaker, lookup }); // was: UNAVAILABLE, refused
    }
    expect(a.calls.Echo).toBe(3);
  });

  it('one refusing address of three: every call is served by the live two, the dead one is dialled once then skipped, none refused', async () => {
    const a = await serve('127.0.0.2');
    const b = await serve('127.0.0.4', a.port);
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup, calls: lookups } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']); // the dead one first
    const failures = await calls(20, `svc.test:${a.port}`, { breaker, lookup });
    expect(failures).toEqual([]); // refused while 2 of 3 are alive: 0
    expect(a.calls.Echo + b.calls.Echo).toBe(20);
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1); // once, then open and skipped
    expect(breaker.state(`127.0.0.3:${a.port}`)?.state).toBe('open');
    expect(breaker.state(`svc.test:${a.port}`)?.state ?? 'closed').toBe('closed');
    expect(lookups()).toBe(20); // the guard's lookup was used, once per connect
    // A lookup is not a dial, and the pool adds no dial of its own: the name is never dialled.
    expect(dials.get(`svc.test:${a.port}`)).toBeUndefined();
    expect((dials.get(`127.0.0.2:${a.port}`) ?? 0) + (dials.get(`127.0.0.4:${a.port}`) ?? 0)).toBe(20);
  });

  it('one blackholed address of three (unprivileged: a full accept queue drops its SYNs): no call waits for it once its first dial failed, none refused', async () => {
    const a = await serve('127.0.0.2');
    const b = await serve('127.0.0.4', a.port);
    await using dead = await blackhole({ host: '127.0.0.3', port: a.port });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']);
    const options = { breaker, lookup, connectTimeout: 1_000, attemptDelay: 50 };
    expect(await calls(1, `svc.test:${a.port}`, options)).toEqual([]);
    // Its first dial runs to its own timeout beside the call, then opens it.
    expect(await eventually(() => breaker.state(dead.address)?.state, (s) => s === 'open', 3_000)).toBe('open');
    expect(await calls(15, `svc.test:${a.port}`, options)).toEqual([]);
    expect(a.calls.Echo + b.calls.Echo).toBe(16);
    expect(dials.get(dead.address)).toBe(1);
    expect((dials.get(`127.0.0.2:${a.port}`) ?? 0) + (dials.get(`127.0.0.4:${a.port}`) ?? 0)).toBe(16);
  });

  it('dns:/// targets too, and the calls carry the name as their authority', async () => {
    const a = await serve('127.0.0.2');
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2']);
    expect(await calls(3, `dns:///svc.test:${a.port}`, { breaker, lookup })).toEqual([]);
    expect(a.authorities).toEqual(Array(3).fill(`svc.test:${a.port}`));
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1);
    expect(dials.get(`127.0.0.2:${a.port}`)).toBe(3);
  });

  it('a live address dying mid-run: calls go on through the last live one, none refused while it is alive', async () => {
    const a = await serve('127.0.0.2');
    const b = await serve('127.0.0.4', a.port);
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    const failures = await calls(20, `svc.test:${a.port}`, { breaker, lookup }, async (i) => {
      if (i === 5) await a.close();
    });
    expect(failures).toEqual([]);
    expect(breaker.state(`127.0.0.2:${a.port}`)?.state).toBe('open');
    expect(breaker.state(`127.0.0.4:${a.port}`)?.state).toBe('closed');
    expect(a.calls.Echo).toBe(5);
    expect(b.calls.Echo).toBe(15);
    expect(dials.get(`127.0.0.2:${a.port}`)).toBe(6); // 5 served, then one failed dial
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1);
  });

  it('every address dead: the target is refused without a lookup or a dial, and the refusal carries each address', async () => {
    const port = await freePort();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup, calls: lookups } = lookupTo(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    const failures = await calls(5, `svc.test:${port}`, { breaker, lookup });
    expect(failures).toHaveLength(5);
    // The first call dialled all three (each refused); the next four were refused from memory.
    for (const host of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) expect(dials.get(`${host}:${port}`)).toBe(1);
    expect(lookups()).toBe(1);
    // The first: one ChannelConnectError for the target, as by name, each address's inside.
    const first = failures[0] as grpc.ServiceError & { cause?: unknown };
    expect(first.code).toBe(grpc.status.UNAVAILABLE);
    expect(first).toBeInstanceOf(ChannelConnectError);
    expect(first.details).toMatch(/ECONNREFUSED .*each of 3 addresses failed/);
    expect((first.cause as AggregateError).errors.map((e: ChannelConnectError) => (e.cause as { address?: string }).address)).toEqual([
      '127.0.0.2',
      '127.0.0.3',
      '127.0.0.4',
    ]);
    const refused = failures.slice(1) as Array<grpc.ServiceError & { cause?: unknown }>;
    for (const err of refused) {
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
      expect(err.cause).toBeInstanceOf(HostUnavailableError);
      const cause = err.cause as HostUnavailableError;
      expect(cause.host).toBe(`svc.test:${port}`);
      expect(cause.addresses?.map((x) => x.host)).toEqual([`127.0.0.2:${port}`, `127.0.0.3:${port}`, `127.0.0.4:${port}`]);
      expect(cause.addresses?.every((x) => x.state === 'open')).toBe(true);
    }
    // The name itself never failed: only its addresses did.
    expect(breaker.state(`svc.test:${port}`)?.state ?? 'closed').toBe('closed');
  });

  it('a guarded channel reports TRANSIENT_FAILURE while every address is open, and IDLE while one is not', async () => {
    const port = await freePort();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3']);
    await calls(1, `svc.test:${port}`, { breaker, lookup });
    const guard = new GrpcGuard({ breaker, lookup, retry: false, keepAliveInterval: 0 });
    const channel = guard.channel(`svc.test:${port}`, grpc.credentials.createInsecure());
    try {
      expect(channel.getConnectivityState(false)).toBe(grpc.connectivityState.TRANSIENT_FAILURE);
      breaker.reset(`127.0.0.3:${port}`);
      expect(channel.getConnectivityState(false)).toBe(grpc.connectivityState.IDLE);
    } finally {
      channel.close();
      await guard.close();
    }
  });

  it('windows ended on every address: one connect probes one address at a time, and stops at the first that is back', async () => {
    const { clock, breaker } = breakerOnManualClock(1, 10_000);
    const port = await freePort();
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']);
    const first = await calls(1, `svc.test:${port}`, { breaker, lookup });
    expect(first).toHaveLength(1);
    for (const host of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) expect(breaker.state(`${host}:${port}`)?.state).toBe('open');
    // .2 and .4 come back; .3 stays dead. Every window ends.
    await serve('127.0.0.2', port);
    await serve('127.0.0.4', port);
    clock.advance(60_000);
    dials.clear();
    const probes: string[] = [];
    const off = breaker.on('probe-granted', ({ host }) => probes.push(host));
    try {
      expect(await calls(1, `svc.test:${port}`, { breaker, lookup })).toEqual([]);
    } finally {
      off();
    }
    // .3 probed and refused, then .2 probed and served; .4 is left for a later probe.
    expect(probes).toEqual([`127.0.0.3:${port}`, `127.0.0.2:${port}`]);
    expect(dials.get(`127.0.0.4:${port}`)).toBeUndefined();
    expect(breaker.state(`127.0.0.2:${port}`)?.state).toBe('closed');
    expect(breaker.state(`127.0.0.3:${port}`)?.state).toBe('open');
  });

  it('over TLS each address is dialled with the name as SNI and checked against it: the live addresses of localhost serve, the refusing one opens alone', async () => {
    const a = await serveTls('127.0.0.2');
    const b = await serveTls('127.0.0.4', a.port);
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']);
    for (let i = 0; i < 4; i++) await once(`localhost:${a.port}`, { breaker, lookup }, grpc.credentials.createSsl(Buffer.from(TEST_CERT)));
    expect(a.calls() + b.calls()).toBe(4);
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1);
    expect(breaker.state(`127.0.0.3:${a.port}`)?.state).toBe('open');
  });

  it('over TLS a name the certificate does not cover fails as a client mistake: no address is opened', async () => {
    const a = await serveTls('127.0.0.2');
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.2']);
    for (let i = 0; i < 3; i++) {
      const err = await failure(once(`svc.test:${a.port}`, { breaker, lookup }, grpc.credentials.createSsl(Buffer.from(TEST_CERT))));
      expect(err.code).toBe(grpc.status.UNAVAILABLE);
    }
    expect(a.calls()).toBe(0);
    expect(breaker.state(`127.0.0.2:${a.port}`)?.state ?? 'closed').toBe('closed');
    expect(dials.get(`127.0.0.2:${a.port}`)).toBe(3);
  });

  it('a waitForReady call while every address is open waits, dialling nothing while they are refused, and is served once one is back', async () => {
    const port = await freePort();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 600 });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3']);
    expect(await calls(1, `svc.test:${port}`, { breaker, lookup })).toHaveLength(1); // both open now
    dials.clear();
    const guard = new GrpcGuard({ breaker, lookup, retry: false, keepAliveInterval: 0 });
    const client = new EchoClient(`svc.test:${port}`, grpc.credentials.createInsecure(), guard.clientOptions());
    try {
      const served = new Promise<Buffer>((resolve, reject) =>
        client.Echo(Buffer.from('waited'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 4_000 }, (err, r) => (err ? reject(err) : resolve(r!))),
      );
      const a = await serve('127.0.0.2', port); // back while its window runs
      expect(String(await served)).toBe('waited');
      expect(a.calls.Echo).toBe(1);
      // Each address dialled at most once per window it came out of: the probe to .2 served.
      expect(dials.get(`127.0.0.2:${port}`)).toBe(1);
      expect(dials.get(`127.0.0.3:${port}`) ?? 0).toBeLessThanOrEqual(2);
    } finally {
      client.close();
      await guard.close();
    }
  });

  it('a lookup that fails counts against the name alone: the name opens and is refused without another lookup', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    let lookups = 0;
    const lookup = ((_h: string, _o: unknown, cb: (err: Error) => void) => {
      lookups++;
      queueMicrotask(() => cb(Object.assign(new Error('getaddrinfo ENOTFOUND svc.test'), { code: 'ENOTFOUND' })));
    }) as unknown as GrpcGuardOptions['lookup'];
    const failures = await calls(3, 'svc.test:50051', { breaker, lookup });
    expect(failures).toHaveLength(3);
    expect(lookups).toBe(1);
    expect(lookupBreaker(breaker, lookup!).state('svc.test:50051')?.state).toBe('open'); // the entry its lookups count in
    expect((failures[2] as { cause?: unknown }).cause).toBeInstanceOf(HostUnavailableError);
  });

  it('an address that accepts TCP but never sends SETTINGS fails alone (the handshake runs inside its own dial): the next address serves after the attempt delay', async () => {
    const live = await serve('127.0.0.4');
    await using hold = await acceptAndHold({ host: '127.0.0.2', port: live.port });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.4']);
    const failures = await calls(1, `svc.test:${live.port}`, { breaker, lookup, connectTimeout: 1_000, attemptDelay: 50 });
    expect(failures).toEqual([]);
    expect(live.calls.Echo).toBe(1);
    // The losing dial runs to its own timeout after the call, then is recorded against its address alone.
    expect(await eventually(() => breaker.state(`127.0.0.2:${live.port}`)?.state, (s) => s === 'open', 3_000)).toBe('open');
    expect(breaker.state(`127.0.0.4:${live.port}`)?.state).toBe('closed');
    expect(hold.attempts).toBe(1);
  });

  it('its options are checked at construction, each error naming the option', () => {
    expect(() => new GrpcGuard({ perAddress: 'yes' as unknown as boolean })).toThrow(/perAddress must be a boolean/);
    expect(() => new GrpcGuard({ lookup: 'dns' as unknown as GrpcGuardOptions['lookup'] })).toThrow(/lookup/);
    expect(() => new GrpcGuard({ attemptDelay: -1 })).toThrow(/attemptDelay/);
  });

  it('perAddress: false keeps the name one entry (grpc-js resolves it)', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup, calls: lookups } = lookupTo(['127.0.0.2']);
    const err = await failure(once('svc.invalid:1', { breaker, lookup, perAddress: false }));
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(lookups()).toBe(0);
    expect(dials.get('svc.invalid:1')).toBe(1);
  });
});

describe('GrpcGuard: a breaker that is not a HostBreaker', () => {
  // Taken before: every call then failed UNAVAILABLE, "breaker.tryAdmit is not a function".
  it.each([{}, 'x', true, 42, { admit: () => {} }])('%o is a TypeError naming breaker, as in every other adapter', (value) => {
    expect(() => new GrpcGuard({ breaker: value as never })).toThrow(/breaker must be a HostBreaker or null/);
  });
});
