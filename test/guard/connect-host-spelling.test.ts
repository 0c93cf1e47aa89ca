/**
 * `connect({ host })` with a spelling Node cannot dial that normalises to a healthy host's key: a
 * host with a colon is taken for an IPv6 literal, so `127.0.0.1:PORT` or `http://127.0.0.1`
 * reached Node, failed ENOTFOUND, and was filed under `127.0.0.1:PORT`: 17 such calls (1.7 s)
 * opened the healthy host for every client. Now a TypeError when the dial starts, which never
 * counts against the host. A spelling with one colon (`host:port`, a URL) is no IPv6 address:
 * it is refused before the breaker admits anything, so no dial is traced or counted (it was an
 * abandoned dial and a `dialguard.dial` span, for a call that opened no socket: an outside review).
 */
import { describe, expect, it } from 'vitest';
import { connect } from '../../src/guard/connect.js';
import { dialTrace } from '../../src/observe/tracing.js';
import { whileTraced } from '../helpers/tracing.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

describe('connect(): a host Node cannot dial', () => {
  it.each(['127.0.0.1:PORT', 'http://127.0.0.1', 'localhost:PORT'])('%s is a TypeError naming host; the healthy host stays closed for everyone', async (spelling) => {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const host = spelling.replace('PORT', String(peer.port));
    let dials = 0;
    await whileTraced(dialTrace, { start: () => void dials++ }, async () => {
      for (let i = 0; i < 3; i++) {
        await expect(connect({ host, port: peer.port }, { breaker })).rejects.toThrow(/host must be a name or an IP address/);
      }
    });
    expect(dials).toBe(0);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0, abandoned: 0, succeeded: 0 });
    const socket = await connect({ host: '127.0.0.1', port: peer.port }, { breaker });
    socket.destroy();
  });

  it('IPv6 literals, bare or bracketed, still dial', async () => {
    const peer = await echoPeer({ host: '::1' });
    cleanups.push(() => peer.close());
    for (const host of ['::1', '[::1]']) {
      const socket = await connect({ host, port: peer.port }, { breaker: new HostBreaker() });
      socket.destroy();
    }
  });
});

describe('connect(): options of the wrong type', () => {
  it.each([
    ['no port', { host: '127.0.0.1' }, {}, /port must be a number/],
    ['no port, a name', { host: 'localhost' }, {}, /port must be a number/],
    ['perAddress a string', { host: 'localhost', port: 1 }, { perAddress: 'no' }, /perAddress must be a boolean, got "no"/],
    ['breaker a string', { host: '127.0.0.1', port: 1 }, { breaker: 'shared' }, /breaker must be a HostBreaker or null, got "shared"/],
    ['handshake a string', { host: 'localhost', port: 1 }, { handshake: 'version' }, /handshake must be a function, got "version"/],
    ['tls a string', { host: 'localhost', port: 1 }, { tls: 'yes' }, /tls must be true, false or tls.connect options, got "yes"/],
    ['tls null', { host: 'localhost', port: 1 }, { tls: null }, /tls must be true, false or tls.connect options, got null/],
    ['tls a number', { host: '127.0.0.1', port: 1 }, { tls: 1 }, /tls must be true, false or tls.connect options, got 1/],
  ])('%s: a TypeError naming it, before any dial is admitted (was: a raw TypeError from inside, read as true, or an admitted dial; an outside review)', async (_case, target, options, message) => {
    const breaker = new HostBreaker();
    let dials = 0;
    await whileTraced(dialTrace, { start: () => void dials++ }, async () => {
      await expect(connect(target as never, { breaker, timeout: 300, ...options } as never)).rejects.toThrow(message);
    });
    expect(dials).toBe(0);
    expect(breaker.stats()).toMatchObject({ hosts: 0, abandoned: 0, failed: 0 });
  });
});

describe('connect(): option types it takes', () => {
  it('a port as a numeric string, tls false, perAddress true, a breaker of null: dialled as before', async () => {
    const peer = await echoPeer();
    cleanups.push(() => peer.close());
    const sockets = await Promise.all([
      connect({ host: '127.0.0.1', port: String(peer.port) } as never, { breaker: new HostBreaker() }),
      connect({ host: 'localhost', port: peer.port }, { breaker: new HostBreaker(), tls: false, perAddress: true }),
      connect({ host: '127.0.0.1', port: peer.port }, { breaker: null, handshake: async () => {} }),
    ]);
    for (const socket of sockets) socket.destroy();
    expect(sockets.length).toBe(3);
  });
});

