/**
 * undici's `connect` object is spread into `net.connect`/`tls.connect` by undici's own connector:
 * any socket or TLS option Node takes works there. GuardedAgent took a closed list and refused the
 * rest with a TypeError, so code written for undici's Agent with `connect: { localPort }`,
 * `{ highWaterMark }`, `{ ecdhCurve }` or `{ sigalgs }` did not construct (an outside review, r134).
 * Each is now passed on as undici passes it; `session` and `ALPNProtocols`, which undici's own
 * connector overwrites with its session cache and `allowH2`, are taken and overwritten the same
 * way. Each case runs the plain undici Agent with the same options in the same test.
 */
import diagnostics from 'node:diagnostics_channel';
import https from 'node:https';
import net from 'node:net';
import type tls from 'node:tls';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { answer, httpServer } from './helpers.js';

const cleanups = leakCheckEach();

/** A TCP port on 127.0.0.1 free a moment ago (bound, read, released). */
async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Both agents, closed after the test. */
function agents(connect: Record<string, unknown>): { plain: Agent; guarded: GuardedAgent } {
  const plain = new Agent({ connect } as never);
  const guarded = new GuardedAgent({ breaker: new HostBreaker(), undici: { connect } as never });
  cleanups.push(() => plain.destroy(), () => guarded.destroy());
  return { plain, guarded };
}

describe('GuardedAgent takes the socket and TLS options undici passes to Node', () => {
  it('connect.localPort: the request leaves from that port, as with undici (was a TypeError)', async () => {
    const ports: number[] = [];
    await using server = await httpServer((req, res) => {
      ports.push(req.socket.remotePort ?? -1);
      res.setHeader('connection', 'close'); // the pinned port is free again for the next agent's dial
      res.end('ok');
    });
    for (const kind of ['plain', 'guarded'] as const) {
      const localPort = await freePort();
      const dispatcher = agents({ localPort })[kind];
      const res = await request(`${server.origin}/`, { dispatcher });
      expect(await res.body.text()).toBe('ok');
      expect(ports.at(-1), kind).toBe(localPort);
    }
    expect(server.connections).toBe(2);
  });

  it('connect.highWaterMark reaches the socket (was a TypeError)', async () => {
    const marks: number[] = [];
    const onConnected = (message: unknown): void => {
      marks.push((message as { socket: net.Socket }).socket.readableHighWaterMark);
    };
    diagnostics.subscribe('undici:client:connected', onConnected);
    cleanups.push(() => diagnostics.unsubscribe('undici:client:connected', onConnected));
    await using server = await httpServer(answer(200, 'ok'));
    for (const kind of ['plain', 'guarded'] as const) {
      const dispatcher = agents({ highWaterMark: 1 << 20 })[kind];
      const res = await request(`${server.origin}/`, { dispatcher });
      expect(await res.body.text(), kind).toBe('ok');
    }
    expect(marks).toEqual([1 << 20, 1 << 20]);
  });

  it('TLS options Node takes (ecdhCurve, sigalgs, honorCipherOrder, secureOptions, minDHSize) are passed on; session and ALPNProtocols are overwritten as undici does', async () => {
    const curves: string[] = [];
    const onConnected = (message: unknown): void => {
      curves.push(((message as { socket: tls.TLSSocket }).socket.getEphemeralKeyInfo() as { name?: string }).name ?? '?');
    };
    diagnostics.subscribe('undici:client:connected', onConnected);
    cleanups.push(() => diagnostics.unsubscribe('undici:client:connected', onConnected));
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY, ecdhCurve: 'P-256:X25519' }, (req, res) => {
      res.end(`alpn ${(req.socket as tls.TLSSocket).alpnProtocol}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    });
    const url = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}/`;
    const connect = {
      ca: TEST_CERT,
      ecdhCurve: 'P-256', // not Node's first choice (X25519): seen only if passed on
      sigalgs: 'ECDSA+SHA256:RSA-PSS+SHA256:RSA+SHA256',
      honorCipherOrder: true,
      secureOptions: 0,
      minDHSize: 1024,
      session: Buffer.from('not a session'),
      ALPNProtocols: ['h2'],
    };
    const bodies: string[] = [];
    for (const kind of ['plain', 'guarded'] as const) {
      const res = await request(url, { dispatcher: agents(connect)[kind] });
      bodies.push(await res.body.text());
    }
    expect(bodies).toEqual(['alpn http/1.1', 'alpn http/1.1']);
    expect(curves).toEqual(['prime256v1', 'prime256v1']);
  });

  it('a TLS option Node refuses fails the request as the client\'s own mistake: the host stays closed', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const breaker = new HostBreaker();
    const agent = new GuardedAgent({ breaker, maxAttempts: 1, undici: { connect: { ecdhCurve: 'no-such-curve' } } });
    cleanups.push(() => agent.destroy());
    const origin = server.origin.replace('http:', 'https:');
    for (let i = 0; i < 5; i++) await expect(request(`${origin}/`, { dispatcher: agent })).rejects.toThrow();
    expect(breaker.state(server.address)?.failures ?? 0).toBe(0);
    expect(breaker.state(server.address)?.state ?? 'closed').toBe('closed');
  });

  it.each([
    [{ connect: { timeout: Number.NaN } }, /undici\.connect\.timeout must be >= 0, got NaN/],
    [{ connectTimeout: Number.NaN }, /undici\.connectTimeout must be >= 0, got NaN/],
    [{ connect: { host: 'elsewhere' } }, /undici\.connect\.host is not supported by the guarded connector/],
    [{ connect: { localPort: 'x' } }, /undici\.connect\.localPort must be a number, got "x"/],
  ])('%o is refused naming the option as the user spelt it', (undici, message) => {
    expect(() => new GuardedAgent({ undici } as never)).toThrow(message);
  });
});
