/**
 * Past {@link MAX_TLS_NAMES} (8) failing TLS server names, a host counted every TLS dial as failed,
 * the right name's too: in an outside review nine clients with a wrong `servername` beside right
 * ones on the shared breaker left the right clients that needed a new connection refused 45-100 %
 * of their calls (plain clients: all served), each right success closing the host and the wrong
 * names opening it again. The name that last reached the host is now let through past the cap,
 * until a dial of its own fails; a name never proven is still refused there.
 */
import https from 'node:https';
import tls from 'node:tls';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../src/adapters/undici/index.js';
import { HostUnavailableError } from '../../src/core/errors.js';
import { HostBreaker, type Transport, tlsTransport } from '../../src/guard/host-breaker.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenLoopback } from '../helpers/listen.js';

const cleanup = leakCheckEach();

type Settle = { succeeded(): void; failed(e?: unknown): void; abandoned(): void };
const RIGHT = tlsTransport('localhost');
const wrong = (i: number): Transport => tlsTransport(`n${i}.example`);

/** A breaker that opens a host on its first failed dial and keeps it open for the test. */
const quickBreaker = (): HostBreaker => new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
const fail = (b: HostBreaker, t: Transport): void => (b.admit('h', 1, t) as Settle).failed(new Error('reset'));
const admitted = (b: HostBreaker, t: Transport): boolean => {
  const p = b.tryAdmit('h', 1, t);
  if (p instanceof HostUnavailableError) return false;
  (p as Settle).abandoned();
  return true;
};

describe('the breaker past 8 failing TLS names', () => {
  it('lets the name that last reached the host through; a name never proven, and an unnamed TLS dial, are refused', () => {
    const b = quickBreaker();
    (b.admit('h', 1, RIGHT) as Settle).succeeded();
    for (let i = 0; i < 9; i++) fail(b, wrong(i));
    expect(b.state('h', 1)?.state).toBe('open');
    expect(admitted(b, RIGHT)).toBe(true);
    expect(b.state('h', 1, RIGHT)?.state).toBe('closed');
    expect(admitted(b, tlsTransport('fresh.example'))).toBe(false);
    expect(admitted(b, 'tls')).toBe(false);
    expect(admitted(b, wrong(8))).toBe(false);
    expect(admitted(b, 'plain')).toBe(true); // no plain dial failed
  });

  it('the proven name is refused once a dial of its own failed, and let through again after its next success', () => {
    const b = quickBreaker();
    (b.admit('h', 1, RIGHT) as Settle).succeeded();
    for (let i = 0; i < 9; i++) fail(b, wrong(i));
    (b.tryAdmit('h', 1, RIGHT) as Settle).failed(new Error('reset')); // its trial
    expect(admitted(b, RIGHT)).toBe(false);
    expect(b.state('h', 1, RIGHT)?.state).toBe('open');
    b.reset('h', 1);
    (b.admit('h', 1, RIGHT) as Settle).succeeded();
    for (let i = 0; i < 9; i++) fail(b, wrong(i));
    expect(admitted(b, RIGHT)).toBe(true);
  });

  it('an unnamed TLS dial that last reached the host is let through past the cap as well', () => {
    const b = quickBreaker();
    (b.admit('h', 1, 'tls') as Settle).succeeded();
    for (let i = 0; i < 9; i++) fail(b, wrong(i));
    expect(admitted(b, 'tls')).toBe(true);
    expect(admitted(b, RIGHT)).toBe(false);
  });

  it('a plain success proves no TLS name: past the cap every TLS dial is refused', () => {
    const b = quickBreaker();
    (b.admit('h', 1, RIGHT) as Settle).succeeded();
    (b.admit('h', 1, 'plain') as Settle).succeeded();
    for (let i = 0; i < 9; i++) fail(b, wrong(i));
    expect(admitted(b, RIGHT)).toBe(false);
  });

  it('8 failing names do not reach the cap: a fresh name is still let through', () => {
    const b = quickBreaker();
    for (let i = 0; i < 8; i++) fail(b, wrong(i));
    expect(admitted(b, tlsTransport('fresh.example'))).toBe(true);
    fail(b, wrong(8));
    expect(admitted(b, tlsTransport('fresh.example'))).toBe(false);
  });
});

/** An HTTPS server serving 'localhost' and hanging up on any other name; counts the handshakes it completed. */
async function oneNameServer(): Promise<{ port: number; served: () => number }> {
  const context = tls.createSecureContext({ cert: TEST_CERT, key: TEST_KEY });
  let served = 0;
  const server = https.createServer(
    { cert: TEST_CERT, key: TEST_KEY, SNICallback: (name, cb) => (name === 'localhost' ? cb(null, context) : cb(new Error('no route'))) },
    (_req, res) => res.end('ok'),
  );
  server.on('secureConnection', () => served++);
  server.on('tlsClientError', () => {});
  return { port: await listenLoopback(server, cleanup), served: () => served };
}

describe('nine clients with a wrong servername beside a right one, on one breaker (undici, real TLS)', () => {
  it('the right client is served on every new connection while the wrong ones fail; each wrong name still dials', async () => {
    const { port, served } = await oneNameServer();
    const url = `https://127.0.0.1:${port}/`;
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const agent = (servername: string): GuardedAgent =>
      new GuardedAgent({ breaker, maxAttempts: 1, timeout: 2_000, undici: { connect: { ca: TEST_CERT, servername } } });
    const right = agent('localhost');
    const wrongs = Array.from({ length: 9 }, (_, i) => agent(`n${i}.example`));
    cleanup.push(() => Promise.all([right, ...wrongs].map((a) => a.close())));
    const rightOnce = async (): Promise<string> => {
      const res = await request(url, { dispatcher: right, reset: true });
      return res.body.text();
    };
    expect(await rightOnce()).toBe('ok');
    let rightServed = 1;
    let rightFailed = 0;
    let wrongFailed = 0;
    for (let round = 0; round < 10; round++) {
      // One after another, so each name's failure is filed (overlapping dials are one round).
      for (const a of wrongs) {
        await request(url, { dispatcher: a }).then(
          (r) => r.body.text(),
          () => wrongFailed++,
        );
      }
      try {
        expect(await rightOnce()).toBe('ok');
        rightServed++;
      } catch {
        rightFailed++;
      }
    }
    expect({ rightServed, rightFailed }).toEqual({ rightServed: 11, rightFailed: 0 });
    expect(wrongFailed).toBe(90);
    expect(served()).toBe(11); // one TLS handshake per right request, none for a wrong name
  });
});
