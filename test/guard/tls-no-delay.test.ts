/**
 * A TLS dial has Nagle's algorithm off, as a plain one does and as undici's own connector does
 * (an outside review, r121): `tls.connect()` ignores the `noDelay` option `net.connect()` takes,
 * so every socket dialguard dialled over TLS kept Nagle on, and each HTTPS request with a
 * streamed body through a GuardedAgent waited ~44 ms for the server's delayed ACK (raw undici
 * 1-2 ms; 20 calls 882 ms against 53). Read from the socket's own flag, what `setNoDelay()` sets
 * and Node applies at connect; a caller's `socket: { noDelay: false }` still wins.
 */
import tls from 'node:tls';
import type net from 'node:net';
import { Agent, request } from 'undici';
import diagnosticsChannel from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { echoPeer, listenOn } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

/** Whether Nagle's algorithm is off on `socket` (Node keeps it in a symbol-keyed field). */
function noDelay(socket: net.Socket): boolean {
  const key = Object.getOwnPropertySymbols(socket).find((s) => s.description === 'kSetNoDelay');
  if (key === undefined) throw new Error('this Node keeps no kSetNoDelay on its sockets');
  return (socket as unknown as Record<symbol, unknown>)[key] === true;
}

/** A TLS server on 127.0.0.1 answering every request `ok` over HTTP/1.1. */
async function httpsPeer(): Promise<{ port: number }> {
  const server = tls.createServer({ cert: TEST_CERT, key: TEST_KEY }, (socket) => {
    socket.on('data', () => socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok'));
    socket.on('error', () => {});
  });
  const port = await listenOn(server, '127.0.0.1', 0);
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port };
}

describe('connect(): Nagle off on every socket it dials', () => {
  it('over TLS, as over plain TCP and as undici dials', async () => {
    const { port } = await httpsPeer();
    const secure = await connect({ host: '127.0.0.1', port }, { breaker: null, tls: { ca: TEST_CERT } });
    cleanups.push(() => secure.destroy());
    expect(noDelay(secure)).toBe(true);
    await using peer = await echoPeer();
    const plain = await connect({ host: peer.host, port: peer.port }, { breaker: null });
    cleanups.push(() => plain.destroy());
    expect(noDelay(plain)).toBe(true);
  });

  it("keeps the caller's own socket: { noDelay: false }", async () => {
    const { port } = await httpsPeer();
    const secure = await connect({ host: '127.0.0.1', port }, { breaker: null, tls: { ca: TEST_CERT }, socket: { noDelay: false } });
    cleanups.push(() => secure.destroy());
    expect(noDelay(secure)).toBe(false);
  });

  it('a GuardedAgent over https: Nagle off on its connection, as on raw undici’s', async () => {
    const { port } = await httpsPeer();
    const sockets: net.Socket[] = [];
    const onConnected = (message: unknown): void => {
      sockets.push((message as { socket: net.Socket }).socket);
    };
    diagnosticsChannel.subscribe('undici:client:connected', onConnected);
    cleanups.push(() => diagnosticsChannel.unsubscribe('undici:client:connected', onConnected));
    const raw = new Agent({ connect: { ca: TEST_CERT } });
    const guarded = new GuardedAgent({ breaker: new HostBreaker(), tls: { ca: TEST_CERT } });
    cleanups.push(() => raw.destroy(), () => guarded.destroy());
    for (const dispatcher of [raw, guarded]) {
      const res = await request(`https://127.0.0.1:${port}/`, { dispatcher });
      await res.body.text();
    }
    expect(sockets.map(noDelay)).toEqual([true, true]);
  });
});
