/**
 * A dial whose request gave up runs on to its bounded end; the socket it brings goes to the next
 * live request queued for the same origin, as Node's agent hands a queued request a freed socket.
 * Was: destroyed, and a fresh dial made for that request (a whole handshake more). `maxSockets: 1`,
 * a TLS server whose handshake starts 400 ms after accept, A aborted at 100 ms, B queued behind it.
 * Raw `https.Agent` in the same test; connections and requests counted at the server.
 */
import https from 'node:https';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** A TLS server whose handshake starts 400 ms after each accept. */
async function slowHandshake(): Promise<{ port: number; connections: () => number; requests: () => number }> {
  let connections = 0;
  let requests = 0;
  const held = new Set<net.Socket>();
  const tlsServer = https.createServer({ cert: TEST_CERT, key: TEST_KEY }, (_req, res) => {
    requests++;
    res.end('ok');
  });
  tlsServer.on('tlsClientError', () => {});
  const server = net.createServer((socket) => {
    connections++;
    held.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => held.delete(socket));
    socket.pause();
    const timer = setTimeout(() => {
      if (!socket.destroyed) tlsServer.emit('connection', socket);
      socket.resume();
    }, 400);
    socket.once('close', () => clearTimeout(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of held) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { port: (server.address() as net.AddressInfo).port, connections: () => connections, requests: () => requests };
}

function get(agent: https.Agent, port: number, signal?: AbortSignal): Promise<{ outcome: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = https.get({ host: 'localhost', port, path: '/', agent, ca: TEST_CERT, signal }, (res) => {
      res.resume();
      res.on('end', () => resolve({ outcome: String(res.statusCode), ms: performance.now() - t0 }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ outcome: String(e.code), ms: performance.now() - t0 }));
  });
}

describe('node:https agent: a request queued behind one that gave up mid-dial', () => {
  it("gets the socket that dial brings: served in one handshake on one connection (raw Node's agent: two)", async () => {
    for (const kind of ['raw', 'guarded'] as const) {
      const server = await slowHandshake();
      const agent = kind === 'raw' ? new https.Agent({ keepAlive: true, maxSockets: 1 }) : new GuardedHttpsAgent({ keepAlive: true, maxSockets: 1, breaker: new HostBreaker() });
      cleanups.push(() => agent.destroy());
      const [a, b] = await Promise.all([get(agent, server.port, AbortSignal.timeout(100)), get(agent, server.port)]);
      expect(a.outcome).toBe('ABORT_ERR');
      expect(b.outcome).toBe('200');
      expect(server.requests()).toBe(1);
      if (kind === 'raw') {
        expect(server.connections()).toBe(2); // A's socket destroyed with A, B dialled afresh
      } else {
        expect(server.connections()).toBe(1);
        expect(b.ms).toBeLessThan(800); // one handshake (~400 ms), not two
      }
    }
  });
});
