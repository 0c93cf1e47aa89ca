/**
 * Per-address `connect()`, as an outside review used it:
 * - every address failed: the AggregateError carried no `code` (raw `net.connect` with
 *   `autoSelectFamily` sets its first error's), so `err.code === 'ECONNREFUSED'` checks failed;
 * - a suspect address (its last dial failed, not open yet) refusing at once started the next
 *   address beside the one still connecting inside its attempt delay: one extra connection per
 *   call to a live sibling, closed unused (a TLS handshake each, with TLS).
 * Real sockets on loopback; connections counted at the live peers.
 */
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { echoPeer, refusing } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { lookupTo } from '../helpers/per-address.js';

const cleanup = leakCheckEach();

describe('connect per address: what an outside review found', () => {
  it('every address refused: an AggregateError whose code is the first error\'s (ECONNREFUSED), as raw net.connect sets it', async () => {
    const a = await refusing({ host: '127.0.0.2' });
    const port = a.port;
    await a.close();
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3']);
    const err = await connect({ host: 'svc.test', port }, { breaker: new HostBreaker(), timeout: 1_000, socket: { lookup } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AggregateError);
    expect((err as AggregateError).errors).toHaveLength(2);
    expect((err as NodeJS.ErrnoException).code).toBe('ECONNREFUSED'); // was undefined
  });

  it("isolate(name) refuses the name's dials with a lookup of the client's own too (an outside review: isolated, yet 4 of 4 calls connected, where dns.lookup's were refused)", async () => {
    const live = await echoPeer({ host: '127.0.0.2' });
    cleanup.push(() => live.close());
    const breaker = new HostBreaker();
    const { lookup, calls } = lookupTo(['127.0.0.2']);
    const release = breaker.isolate(`svc.test:${live.port}`);
    for (let i = 0; i < 4; i++) {
      const err = await connect({ host: 'svc.test', port: live.port }, { breaker, timeout: 1_000, socket: { lookup } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HostUnavailableError);
      expect((err as HostUnavailableError).isolated).toBe(true);
    }
    expect([live.attempts, calls()]).toEqual([0, 0]); // no dial, not even a lookup
    release();
    const s = await connect({ host: 'svc.test', port: live.port }, { breaker, timeout: 1_000, socket: { lookup } });
    s.destroy();
    expect(live.attempts).toBe(1);
  });

  it('a suspect refusing at once does not start the next address early: 10 calls, 10 connections to the first live one, none to the other', async () => {
    const live = await echoPeer({ host: '127.0.0.2' });
    const other = await echoPeer({ host: '127.0.0.4', port: live.port });
    cleanup.push(() => live.close(), () => other.close());
    // 127.0.0.3 refuses; 60 s of minOutage keeps it a suspect (closed, failures > 0) for the whole test.
    const breaker = new HostBreaker({ minOutage: 60_000 });
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']);
    for (let i = 0; i < 10; i++) {
      const s = await connect({ host: 'svc.test', port: live.port }, { breaker, timeout: 2_000, attemptDelay: 250, socket: { lookup } });
      expect(s.remoteAddress).toBe('127.0.0.2');
      s.destroy();
    }
    expect(breaker.state(`127.0.0.3:${live.port}`)).toMatchObject({ state: 'closed' });
    expect(live.attempts).toBe(10);
    expect(other.attempts).toBe(0); // was 9: the suspect's refusal launched it beside the live dial
  });
});
