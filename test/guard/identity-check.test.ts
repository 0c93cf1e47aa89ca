/**
 * A `checkServerIdentity` that throws (a caller's bug: a certificate field it did not expect):
 * Node calls it inside the handshake's event, so the throw escaped as an uncaughtException, the
 * socket never reported, and the dial waited out its whole connect timeout and counted the host
 * as failed; one client's callback opened the breaker every client shares. The dial now fails at
 * once with what the callback threw, and the host, which answered, is not blamed.
 */
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { caughtIdentityCheck } from '../../src/guard/identity-check.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';

const servers: net.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
});

async function tlsPeer(): Promise<number> {
  const server = tls.createServer({ cert: TEST_CERT, key: TEST_KEY }, (s) => s.end());
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

describe('a checkServerIdentity that throws', () => {
  it('fails the dial at once with the thrown error, counts nothing against the host, and leaves it closed', async () => {
    const port = await tlsPeer();
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    const thrown = new Error("the caller's check threw");
    const t0 = performance.now();
    for (let i = 0; i < 3; i++) {
      const err = await connect({ host: '127.0.0.1', port }, { breaker, timeout: 2_000, tls: { ca: TEST_CERT, checkServerIdentity: () => { throw thrown; } } }).then(
        (s) => { s.destroy(); return undefined; },
        (e: unknown) => e,
      );
      expect(err).toBe(thrown); // was DIALGUARD_CONNECT_TIMEOUT after 2 s, the throw an uncaughtException
    }
    expect(performance.now() - t0).toBeLessThan(1_500);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    const ok = await connect({ host: '127.0.0.1', port }, { breaker, timeout: 2_000, tls: { ca: TEST_CERT } });
    ok.destroy();
  });

  it('keeps the check itself: its verdict, its `this`, and what it throws that is not an Error, as an Error with its text', () => {
    const cert = {} as tls.PeerCertificate;
    const verdict = new Error('rejected');
    const owner = { check(this: unknown): Error | undefined { return this === owner ? verdict : undefined; } };
    expect(caughtIdentityCheck(owner.check).call(owner, 'h', cert)).toBe(verdict);
    expect(caughtIdentityCheck(() => undefined)('h', cert)).toBeUndefined();
    const fromString = caughtIdentityCheck(() => { throw 'no SAN'; })('h', cert);
    expect(fromString).toBeInstanceOf(Error);
    expect(fromString?.message).toContain('no SAN');
  });

  it('one wrapper per check: the same function wrapped twice is the same wrapper (requests passing it still share a dial), and a wrapper is not wrapped again', () => {
    const check = (): undefined => undefined;
    const once = caughtIdentityCheck(check);
    expect(once).not.toBe(check);
    expect(caughtIdentityCheck(check)).toBe(once);
    expect(caughtIdentityCheck(once)).toBe(once);
    expect(caughtIdentityCheck(tls.checkServerIdentity)).toBe(caughtIdentityCheck(tls.checkServerIdentity));
    expect(caughtIdentityCheck(() => undefined)).not.toBe(once);
  });
});
