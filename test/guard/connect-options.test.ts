/**
 * connect()'s options around per-address guarding, on real loopback sockets: which path a target
 * takes (a name per address, a name as one entry, an IP literal, no breaker, a disabled one),
 * which resolver and resolver options are used, what SNI a TLS dial sends, and how a protocol
 * handshake ends the dial. Dials are counted per breaker key on the public diagnostics channel.
 */
import dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { addressesReachedKept, sharedBreaker } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { echoPeer, listenOn } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { dialsPerKey, lookupTo } from '../helpers/per-address.js';
import { breakerOnManualClock } from '../helpers/sockets.js';

leakCheckEach();

const dials = dialsPerKey();

/** A TLS listener on 127.0.0.2 that records the SNI each ClientHello carried (and completes no handshake). */
async function sniRecorder(): Promise<{ port: number; names: Array<string | undefined>; hellos: () => number; close: () => Promise<void> }> {
  const names: Array<string | undefined> = [];
  let hellos = 0;
  const server = tls.createServer({
    SNICallback: (servername, cb) => {
      names.push(servername);
      cb(new Error('no certificate here'));
    },
  });
  server.on('connection', () => hellos++);
  server.on('tlsClientError', () => {});
  const port = await listenOn(server, '127.0.0.2', 0);
  return { port, names, hellos: () => hellos, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('connect: which path a target takes', () => {
  it('an invalid port is a rejected promise, never a throw', async () => {
    let p: Promise<net.Socket> | undefined;
    expect(() => {
      p = connect({ host: 'svc.test', port: 70_000 });
    }).not.toThrow();
    await expect(p).rejects.toThrow(/port/);
  });

  it('perAddress: false makes a name one breaker entry, resolved by Node through the lookup given', async () => {
    await using peer = await echoPeer({ host: '127.0.0.2' });
    const { breaker } = breakerOnManualClock();
    const { lookup, calls } = lookupTo(['127.0.0.2']);
    const socket = await connect({ host: 'svc.test', port: peer.port }, { breaker, perAddress: false, socket: { lookup } });
    socket.destroy();
    expect(calls()).toBe(1);
    expect([...dials]).toEqual([[`svc.test:${peer.port}`, 1]]);
    expect(breaker.state(`127.0.0.2:${peer.port}`)).toBeUndefined();
  });

  it("perAddress: false: the dial learns the address its socket connected to, where a sibling stalled in TCP finds the evidence that it is up", async () => {
    await using peer = await echoPeer({ host: '127.0.0.2' });
    const { breaker } = breakerOnManualClock();
    const { lookup } = lookupTo(['127.0.0.2']);
    const kept = addressesReachedKept();
    const socket = await connect({ host: 'svc.test', port: peer.port }, { breaker, perAddress: false, socket: { lookup } });
    socket.destroy();
    expect(addressesReachedKept()).toBe(Math.min(kept + 1, 1_024));
  });

  it("perAddress: false names the stalled phase: a lookup that never answers is 'lookup', a dial after its answer is 'tcp'", async () => {
    await using hole = await blackhole({ host: '127.0.0.3' });
    const { breaker } = breakerOnManualClock(10);
    const never = (() => {}) as unknown as net.LookupFunction;
    const stalled = await connect({ host: 'svc.test', port: hole.port }, { breaker, perAddress: false, timeout: 150, socket: { lookup: never } }).catch((e: unknown) => e);
    expect(stalled).toBeInstanceOf(ConnectTimeoutError);
    expect(stalled).toMatchObject({ phase: 'lookup', host: `svc.test:${hole.port}` });
    const { lookup } = lookupTo([hole.host]);
    const held = await connect({ host: 'svc.test', port: hole.port }, { breaker, perAddress: false, timeout: 150, socket: { lookup } }).catch((e: unknown) => e);
    expect(held).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tcp' });
  });

  it('a name without a lookup option is resolved with dns.lookup, per address and as one entry', async () => {
    await using peer = await echoPeer({ host: '127.0.0.1' });
    const { breaker } = breakerOnManualClock();
    (await connect({ host: 'localhost', port: peer.port }, { breaker, timeout: 2_000 })).destroy();
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(1);
    expect(dials.get(`localhost:${peer.port}`)).toBeUndefined(); // the lookup is not a dial
    (await connect({ host: 'localhost', port: peer.port }, { breaker, timeout: 2_000, perAddress: false })).destroy();
    expect(dials.get(`localhost:${peer.port}`)).toBe(1); // one entry: the name
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(1);
  });

  it('breaker: null dials a name with no breaker at all (the shared one learns nothing)', async () => {
    await using peer = await echoPeer({ host: '127.0.0.2' });
    const { lookup, calls } = lookupTo(['127.0.0.2']);
    (await connect({ host: 'nobreaker.test', port: peer.port }, { breaker: null, socket: { lookup } })).destroy();
    expect(calls()).toBe(1);
    expect(sharedBreaker().state(`nobreaker.test:${peer.port}`)).toBeUndefined();
    expect(sharedBreaker().state(`127.0.0.2:${peer.port}`)).toBeUndefined();
  });

  it('a disabled breaker (failureThreshold 0) guards nothing per address: Node resolves the name in one dial', async () => {
    await using peer = await echoPeer({ host: '127.0.0.2' });
    const breaker = new HostBreaker({ failureThreshold: 0 });
    const { lookup } = lookupTo(['127.0.0.2']);
    (await connect({ host: 'svc.test', port: peer.port }, { breaker, socket: { lookup } })).destroy();
    expect([...dials]).toEqual([[`svc.test:${peer.port}`, 1]]);
  });

  it('an IP literal is its own single entry: one dial, no lookup', async () => {
    await using peer = await echoPeer({ host: '127.0.0.2' });
    const { breaker } = breakerOnManualClock();
    for (let i = 0; i < 2; i++) (await connect({ host: '127.0.0.2', port: peer.port }, { breaker })).destroy();
    expect([...dials]).toEqual([[`127.0.0.2:${peer.port}`, 2]]);
    expect(breaker.stats().hosts).toBe(1);
  });

  it('the timeout is checked for a name too, naming the option', async () => {
    await expect(connect({ host: 'svc.test', port: 80 }, { timeout: 0 })).rejects.toThrow(/timeout/);
  });
});

describe('connect: the resolver a name is resolved with', () => {
  it('lookup, family and hints from the tls options win over the socket options; the socket options serve otherwise', async () => {
    const seen: Array<[string, unknown]> = [];
    const recording = (who: string) =>
      ((_h: string, options: unknown, cb: (err: Error) => void) => {
        seen.push([who, options]);
        queueMicrotask(() => cb(Object.assign(new Error('not found'), { code: 'ENOTFOUND' })));
      }) as unknown as net.LookupFunction;
    const { breaker } = breakerOnManualClock(100);
    const socket = { lookup: recording('socket'), family: 6, hints: 0 };
    const tlsOptions = { lookup: recording('tls'), family: 4, hints: dns.ADDRCONFIG } as tls.ConnectionOptions;
    await expect(connect({ host: 'svc.test', port: 443 }, { breaker, tls: tlsOptions, socket })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(connect({ host: 'svc.test', port: 443 }, { breaker, socket })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(connect({ host: 'svc.test', port: 443 }, { breaker, tls: {}, socket: { lookup: recording('socket'), family: 6, hints: dns.V4MAPPED } })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(seen).toEqual([
      ['tls', { all: true, family: 4, hints: dns.ADDRCONFIG }],
      ['socket', { all: true, family: 6, hints: 0 }],
      ['socket', { all: true, family: 6, hints: dns.V4MAPPED }],
    ]);
  });
});

describe('connect: a lookup at the top level', () => {
  it('is a TypeError naming socket.lookup, for a name and an IP alike (was: ignored, the system resolver asked)', async () => {
    const lookup = (() => {}) as unknown as net.LookupFunction;
    const { breaker } = breakerOnManualClock(100);
    for (const host of ['svc.test', '127.0.0.1']) {
      await expect(connect({ host, port: 443 }, { breaker, lookup } as never)).rejects.toThrow(/socket: \{ lookup \}/);
    }
    expect(breaker.stats().hosts).toBe(0); // nothing was admitted
  });
});

describe('connect: TLS to a name, and protocol handshakes', () => {
  it('SNI carries the name when dialling its addresses, or the servername given; an IP literal sends none; tls: false is plain TCP', async () => {
    const sni = await sniRecorder();
    try {
      const { breaker } = breakerOnManualClock(100);
      const { lookup } = lookupTo(['127.0.0.2']);
      const attempt = (host: string, opts: Parameters<typeof connect>[1]): Promise<unknown> =>
        connect({ host, port: sni.port }, { breaker, timeout: 2_000, ...opts }).then(
          (s) => s.destroy(),
          (e: unknown) => e,
        );
      await attempt('svc.test', { tls: true, socket: { lookup } });
      await attempt('svc.test', { tls: { servername: 'other.test' }, socket: { lookup } });
      await attempt('svc.test', { tls: true, perAddress: false, socket: { lookup } });
      await attempt('127.0.0.2', { tls: true });
      expect(sni.names).toEqual(['svc.test', 'other.test', 'svc.test']);
      expect(sni.hellos()).toBe(4);
    } finally {
      await sni.close();
    }
    await using peer = await echoPeer({ host: '127.0.0.2' });
    const { breaker } = breakerOnManualClock();
    const { lookup } = lookupTo(['127.0.0.2']);
    const plain = await connect({ host: 'svc.test', port: peer.port }, { breaker, tls: false, socket: { lookup } });
    expect(plain).not.toBeInstanceOf(tls.TLSSocket);
    plain.destroy();
  });

  it('a protocol handshake that succeeds hands over the socket, counted as a success', async () => {
    await using peer = await echoPeer();
    const { breaker } = breakerOnManualClock();
    const handshake = (socket: net.Socket): Promise<void> =>
      new Promise((resolve) => {
        socket.once('data', () => resolve());
        socket.write('hello');
      });
    const socket = await connect({ host: peer.host, port: peer.port }, { breaker, handshake, timeout: 2_000 });
    expect(socket.destroyed).toBe(false);
    socket.destroy();
    expect(breaker.stats()).toMatchObject({ succeeded: 1, failed: 0 });
  });

  it('a peer that answered before the handshake failed is alive: the caller gets the error, the host is not counted', async () => {
    await using peer = await echoPeer();
    const { breaker } = breakerOnManualClock(1);
    const bad = new Error('unexpected preface');
    const handshake = (socket: net.Socket): Promise<void> =>
      new Promise((_resolve, reject) => {
        socket.once('data', () => reject(bad));
        socket.write('hello');
      });
    await expect(connect({ host: peer.host, port: peer.port }, { breaker, handshake, timeout: 2_000 })).rejects.toBe(bad);
    expect(breaker.state(peer.address)).toMatchObject({ state: 'closed', failures: 0 });
  });
});
