import { once, getEventListeners } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError } from '../../src/core/errors.js';
import { connect, openSocket } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { echoPeer, listenOn } from '../../src/testing/tcp-peers.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';

leakCheckEach();

// What connect() hands over, and how it names what it is doing: its listeners gone from the
// socket it returns, SNI set from a host name (never from an IP), brackets taken off an IPv6
// literal, and the lookup phase told apart from the TCP one.

const EVENTS = ['error', 'connect', 'lookup', 'secureConnect', 'close', 'end', 'data', 'timeout'] as const;

function listenerCounts(socket: net.Socket): Record<string, number> {
  return Object.fromEntries(EVENTS.map((e) => [e, socket.listenerCount(e)]));
}

/** A `lookup` for `net.connect` that answers every name with `address`, or never when undefined. */
function lookupTo(address: string | undefined): net.LookupFunction {
  return ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (address === undefined) return; // a resolver that never answers
    const family = net.isIP(address);
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as net.LookupFunction;
}

/** A TLS server on 127.0.0.1 that records the SNI each client sent (false: none). */
async function sniPeer(): Promise<{ port: number; names: Array<string | false>; close: () => Promise<void> }> {
  const names: Array<string | false> = [];
  const server = tls.createServer({ cert: TEST_CERT, key: TEST_KEY }, (socket) => {
    names.push(socket.servername ?? false);
    socket.end();
  });
  server.on('tlsClientError', () => {});
  const port = await listenOn(server, '127.0.0.1', 0);
  return { port, names, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe('connect: what the caller is handed', () => {
  it('a plain socket carries no listener of connect(): the same counts as a socket net.connect opened', async () => {
    await using peer = await echoPeer();
    const raw = net.connect({ host: peer.host, port: peer.port });
    await once(raw, 'connect');
    const guarded = await connect({ host: peer.host, port: peer.port }, { breaker: null });
    try {
      expect(listenerCounts(guarded)).toEqual(listenerCounts(raw));
      expect(guarded.listenerCount('error')).toBe(0); // a later error is the caller's to handle, not swallowed
    } finally {
      raw.destroy();
      guarded.destroy();
    }
  });

  it('a TLS socket likewise: the same counts as one tls.connect opened', async () => {
    const peer = await sniPeer();
    try {
      const raw = tls.connect({ host: '127.0.0.1', port: peer.port, ca: TEST_CERT });
      raw.on('error', () => {});
      await once(raw, 'secureConnect');
      const baseline = listenerCounts(raw);
      raw.destroy();
      const guarded = await connect({ host: '127.0.0.1', port: peer.port }, { breaker: null, tls: { ca: TEST_CERT } });
      guarded.on('error', () => {}); // each carries exactly the one error listener this test added
      expect(listenerCounts(guarded)).toEqual(baseline);
      guarded.destroy();
    } finally {
      await peer.close();
    }
  });

  it("leaves no listener on the dial's own signal once the socket is handed over", async () => {
    await using peer = await echoPeer();
    const controller = new AbortController();
    const permit = new HostBreaker().admit(peer.address);
    const socket = await openSocket({ host: peer.host, port: peer.port }, {}, { signal: controller.signal, permit, phase: 'tcp' });
    permit.succeeded();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    controller.abort(new Error('after the handover')); // must not destroy the caller's socket
    expect(socket.destroyed).toBe(false);
    socket.destroy();
  });
});

describe('connect: TLS server name', () => {
  it('sends the host name as SNI, none for an IP address, and an explicit servername as given', async () => {
    const peer = await sniPeer();
    const breaker = new HostBreaker();
    try {
      const byName = await connect(
        { host: 'localhost', port: peer.port },
        { breaker, tls: { ca: TEST_CERT }, socket: { lookup: lookupTo('127.0.0.1') } },
      );
      const byIp = await connect({ host: '127.0.0.1', port: peer.port }, { breaker, tls: { ca: TEST_CERT } });
      const explicit = await connect(
        { host: '127.0.0.1', port: peer.port },
        { breaker, tls: { ca: TEST_CERT, servername: 'api.test', checkServerIdentity: () => undefined } },
      );
      // The client can finish its handshake before the server has read its last flight.
      expect(await eventually(() => peer.names.length, (n) => n === 3)).toBe(3);
      for (const s of [byName, byIp, explicit]) s.destroy();
      expect(peer.names).toEqual(['localhost', false, 'api.test']);
    } finally {
      await peer.close();
    }
  });

  it('tls: true verifies the peer with the default trust store: a self-signed peer fails the dial, not the host', async () => {
    const peer = await sniPeer();
    const breaker = new HostBreaker();
    try {
      await expect(connect({ host: '127.0.0.1', port: peer.port }, { breaker, tls: true })).rejects.toMatchObject({
        code: expect.stringMatching(/SELF_SIGNED|UNABLE_TO_VERIFY|CERT/),
      });
      // It presented a certificate: alive. The client's trust store is the client's failure.
      expect(breaker.state(`127.0.0.1:${peer.port}`)?.failures).toBe(0);
      expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 1 });
    } finally {
      await peer.close();
    }
  });
});

describe('connect: addresses and phases', () => {
  it('takes the brackets off an IPv6 literal and files it under the same key', async () => {
    await using peer = await echoPeer({ host: '::1' });
    const breaker = new HostBreaker();
    const socket = await connect({ host: '[::1]', port: peer.port }, { breaker });
    expect(socket.remoteAddress).toBe('::1');
    expect(breaker.stats().succeeded).toBe(1);
    expect(breaker.state(`[::1]:${peer.port}`)).toBeDefined();
    socket.destroy();
  });

  it("a resolver that never answers times out in phase 'lookup'; once it answers, the stall is 'tcp'", async () => {
    await using peer = await blackhole();
    const breaker = new HostBreaker();
    const stuck = connect({ host: 'stuck.test', port: peer.port }, { breaker, timeout: 150, socket: { lookup: lookupTo(undefined) } });
    await expect(stuck).rejects.toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'lookup' });
    // A resolver answering synchronously (a cache) does so inside net.connect(), before any
    // 'lookup' listener could be attached: the phase must move on all the same.
    const resolved = connect({ host: 'dark.test', port: peer.port }, { breaker, timeout: 150, socket: { lookup: lookupTo(peer.host) } });
    const err = await resolved.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectTimeoutError);
    expect(err).toMatchObject({ phase: 'tcp' });
    // A lookup given among the TLS options is watched the same way.
    const viaTls = await connect({ host: 'dark.test', port: peer.port }, { breaker, timeout: 150, tls: { lookup: lookupTo(peer.host) } }).catch(
      (e: unknown) => e,
    );
    expect(viaTls).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tcp' });
  });

  it("the system resolver's answer moves the phase on too", async () => {
    await using peer = await blackhole();
    const breaker = new HostBreaker();
    // 'localhost' goes through dns.lookup (asynchronous); pin the family to the peer's.
    const err = await connect({ host: 'localhost', port: peer.port }, { breaker, timeout: 150, socket: { family: 4 } }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tcp' });
  });
});
