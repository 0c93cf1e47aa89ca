/**
 * RedisGuard with node-redis addressed by an IP literal. Node skips a socket's `lookup` for an IP
 * address, and the lookup is the guard's gate: the guard hands Node a name only its lookup
 * resolves. With TLS that name used to be skipped too (the certificate is checked against the
 * host), so a dead TLS node at an IP address was redialled by every client at every window's end.
 * The dead node here is src/testing's reset-on-accept peer: it counts every dial it sees.
 */
import tls from 'node:tls';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { resetOnAccept } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanups = leakCheckEach();
const CLIENTS = 8;
const WINDOW = 500;
const RUN = 2_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function dialsToDeadNode(socketOptions: Record<string, unknown>): Promise<number> {
  const peer = await resetOnAccept();
  cleanups.push(() => peer.close());
  const guard = new RedisGuard({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: WINDOW }) });
  const clients = Array.from({ length: CLIENTS }, () => guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: peer.port, ...socketOptions } }));
  for (const c of clients) {
    c.on('error', () => {});
    c.connect().catch(() => {});
  }
  cleanups.push(() => Promise.all(clients.map((c) => c.destroy())));
  await sleep(RUN);
  return peer.attempts;
}

describe('RedisGuard/node-redis by IP address: the dial gate holds', () => {
  it('TLS to a dead node at 127.0.0.1: 8 clients dial once each, then one probe per window (not every client at every window)', async () => {
    const dials = await dialsToDeadNode({ tls: true, ca: TEST_CERT });
    // Ungated, every client dials at each window's end: ~8 + 8 * 4.
    expect(dials).toBeLessThanOrEqual(CLIENTS + Math.ceil(RUN / WINDOW) + 2);
  });

  it('plain TCP to a dead node at 127.0.0.1: 8 clients dial once each, then one probe per window', async () => {
    const dials = await dialsToDeadNode({});
    expect(dials).toBeLessThanOrEqual(CLIENTS + Math.ceil(RUN / WINDOW) + 2);
  });

  it('TLS to a live node at 127.0.0.1: the certificate is still checked against the address (valid for it: handshake done; another name: rejected)', async () => {
    let handshakes = 0;
    const server = tls.createServer({ cert: TEST_CERT, key: TEST_KEY }, (s) => {
      handshakes++;
      s.on('error', () => {});
    });
    const sockets = new Set<import('node:net').Socket>();
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          for (const s of sockets) s.destroy();
          server.close(() => resolve());
        }),
    );
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const errors: unknown[] = [];
    const good = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port, tls: true as const, ca: TEST_CERT, reconnectStrategy: false as const } });
    good.on('error', (err: unknown) => errors.push(err));
    good.connect().catch(() => {});
    cleanups.push(() => good.destroy());
    await expect.poll(() => handshakes, { timeout: 2_000, interval: 10 }).toBe(1);
    expect(errors.filter((e) => (e as { code?: string }).code === 'ERR_TLS_CERT_ALTNAME_INVALID')).toEqual([]);
    const badErrors: unknown[] = [];
    const bad = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port, tls: true as const, ca: TEST_CERT, servername: 'elsewhere.example', reconnectStrategy: false as const } });
    bad.on('error', (err: unknown) => badErrors.push(err));
    bad.connect().catch(() => {});
    cleanups.push(() => (bad.isOpen ? bad.destroy() : undefined));
    await expect.poll(() => badErrors.length, { timeout: 2_000, interval: 10 }).toBeGreaterThan(0);
    expect((badErrors[0] as { code?: string }).code).toBe('ERR_TLS_CERT_ALTNAME_INVALID');
  });
});
