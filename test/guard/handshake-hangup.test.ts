/**
 * connect() with a protocol handshake, and a peer that hangs up cleanly (FIN, no error) while it
 * runs (an outside review, r133): a handshake that waits for the answer and does not listen for
 * the close waited out the whole timeout, and the dial failed as `ConnectTimeoutError` stalled
 * in 'handshake' (a TLS terminator in front of a dead memcached: 2 s a dial, where a reset failed
 * in 20 ms). Now the dial fails at the hang-up with `TransportClosedError` (`handshake: true`),
 * counted as the host's failure, unless the peer sent something first (then it answered: alive).
 */
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { TransportClosedError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import type { DialContext } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';

/** A peer on 127.0.0.1 that, 20 ms after accepting (after TLS, with `secure`), writes `first` (if any) and ends. */
async function hangingUp(first?: string, secure = false): Promise<{ port: number; close: () => Promise<void> }> {
  const onSocket = (s: net.Socket): void => {
    s.on('error', () => {});
    s.resume(); // reads what comes, so it sees the client's end and closes
    setTimeout(() => (first === undefined ? s.end() : s.end(first)), 20);
  };
  const server = secure ? tls.createServer({ key: TEST_KEY, cert: TEST_CERT }, onSocket) : net.createServer(onSocket);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A memcached-style `version` handshake that waits for a full line and never listens for the close. */
function waitsForALine(socket: net.Socket, ctx: DialContext): Promise<void> {
  return new Promise((resolve) => {
    let got = '';
    socket.on('data', (d: Buffer) => {
      got += String(d);
      if (got.includes('\r\n')) resolve();
    });
    ctx.signal.addEventListener('abort', () => resolve(), { once: true });
    socket.write('version\r\n');
  });
}

describe('connect(): the peer hangs up during the handshake', () => {
  it.each([
    ['TCP', false],
    ['TLS', true],
  ])('%s: fails at the hang-up with TransportClosedError, counted against the host (was: the whole timeout)', async (_name, secure) => {
    const peer = await hangingUp(undefined, secure);
    const breaker = new HostBreaker();
    try {
      const t0 = performance.now();
      const err = await connect(
        { host: '127.0.0.1', port: peer.port },
        { breaker, timeout: 2_000, handshake: waitsForALine, ...(secure ? { tls: { ca: TEST_CERT, servername: 'localhost' } } : {}) },
      ).then(
        (s) => {
          s.destroy();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(performance.now() - t0).toBeLessThan(1_000);
      expect(err).toBeInstanceOf(TransportClosedError);
      expect((err as TransportClosedError).handshake).toBe(true);
      expect(breaker.stats().failed).toBe(1);
    } finally {
      await peer.close();
    }
  });

  it('a peer that answered part of it before hanging up is alive: not counted', async () => {
    const peer = await hangingUp('VERSI');
    const breaker = new HostBreaker();
    try {
      const err = await connect({ host: '127.0.0.1', port: peer.port }, { breaker, timeout: 2_000, handshake: waitsForALine }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransportClosedError);
      expect(breaker.stats().failed).toBe(0);
    } finally {
      await peer.close();
    }
  });
});
