/**
 * A breaker remembers the addresses a name resolved to, so that a name whose every address is
 * open is refused without a lookup. Two clients of one breaker (the shared one, by default) may
 * resolve the same name differently: a lookup of their own, `family: 4`. One's answer refused the
 * other's live address: in an outside review 49 of 77 calls of the default-family client were
 * refused while its other address served every call it was let make (plain undici: 0 refused).
 * Each resolver's answer is now remembered apart. Real sockets on loopback.
 */
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { echoPeer } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { dialsPerKey, lookupTo } from '../helpers/per-address.js';

const cleanup = leakCheckEach();

/** A breaker that opens an address on its first refused dial and keeps it open for the test. */
const quickBreaker = (): HostBreaker => new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });

describe('a name resolved differently by two clients of one breaker', () => {
  it("two lookups: one's dead answer (open) neither refuses nor slows the other's live address", async () => {
    const live = await echoPeer({ host: '127.0.0.2' }); // nothing listens on 127.0.0.3 at that port: refused
    cleanup.push(() => live.close());
    const breaker = quickBreaker();
    const dead = lookupTo(['127.0.0.3']);
    const good = lookupTo(['127.0.0.2']);
    const target = { host: 'svc.test', port: live.port };
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: dead.lookup } })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    // The dead client's next call is refused from memory: no lookup, no dial.
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: dead.lookup } })).rejects.toBeInstanceOf(HostUnavailableError);
    expect(dead.calls()).toBe(1);
    const t0 = performance.now();
    for (let i = 0; i < 10; i++) {
      const s = await connect(target, { breaker, timeout: 1_000, socket: { lookup: good.lookup } }); // was HostUnavailableError
      expect(s.remoteAddress).toBe('127.0.0.2');
      s.destroy();
      // Interleaved, as two clients' calls are: neither overwrites the other's memory.
      await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: dead.lookup } })).rejects.toBeInstanceOf(HostUnavailableError);
    }
    expect(live.attempts).toBe(10);
    // Refused from memory, not looked up per call (11 then); a name refused from memory is looked
    // up again 100 ms after (README), which a slow run (mutation testing's instrumented dry run
    // on a loaded machine: 2) may reach.
    expect(dead.calls()).toBeLessThanOrEqual(1 + Math.ceil((performance.now() - t0) / 100));
  });

  it("a lookup that answers ENOTFOUND opens the name for its own client only: another resolver's client, and dns.lookup's, are served (was: refused)", async () => {
    const live = await echoPeer({ host: '127.0.0.2' });
    cleanup.push(() => live.close());
    const breaker = quickBreaker();
    let failedLookups = 0;
    const broken = ((host: string, _o: unknown, cb: (err: Error) => void) => {
      failedLookups++;
      queueMicrotask(() => cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host })));
    }) as unknown as net.LookupFunction;
    const good = lookupTo(['127.0.0.2']);
    const target = { host: 'svc.test', port: live.port };
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: broken } })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    // Its own client learns: refused without a lookup.
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: broken } })).rejects.toBeInstanceOf(HostUnavailableError);
    expect(failedLookups).toBe(1);
    for (let i = 0; i < 5; i++) {
      const s = await connect(target, { breaker, timeout: 1_000, socket: { lookup: good.lookup } }); // was HostUnavailableError
      expect(s.remoteAddress).toBe('127.0.0.2');
      s.destroy();
    }
    // dns.lookup's client (localhost: loopback) is not refused by another resolver's failure either.
    const local = await echoPeer({ host: '127.0.0.1' });
    cleanup.push(() => local.close());
    await expect(connect({ host: 'localhost', port: local.port }, { breaker, timeout: 1_000, socket: { lookup: broken, family: 4 } })).rejects.toMatchObject({ code: 'ENOTFOUND' });
    const s = await connect({ host: 'localhost', port: local.port }, { breaker, timeout: 1_000, socket: { family: 4 } });
    s.destroy();
    expect(breaker.state(`svc.test:${live.port}`)?.failures ?? 0).toBe(0);
  });

  it('one lookup, two families: the family-4 answer (dead, open) does not refuse the default-family client', async () => {
    const live = await echoPeer({ host: '127.0.0.2' });
    cleanup.push(() => live.close());
    const breaker = quickBreaker();
    // Family 4 gets the dead address only; any family gets it first, then the live one.
    const lookup = ((_h: string, options: { all?: boolean; family?: number }, cb: (...args: unknown[]) => void) => {
      const list = (options.family === 4 ? ['127.0.0.3'] : ['127.0.0.3', '127.0.0.2']).map((address) => ({ address, family: 4 }));
      queueMicrotask(() => cb(null, list));
    }) as unknown as net.LookupFunction;
    const target = { host: 'svc.test', port: live.port };
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup, family: 4 } })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup, family: 4 } })).rejects.toBeInstanceOf(HostUnavailableError);
    for (let i = 0; i < 5; i++) {
      const s = await connect(target, { breaker, timeout: 1_000, socket: { lookup } }); // was HostUnavailableError
      expect(s.remoteAddress).toBe('127.0.0.2');
      s.destroy();
    }
    expect(live.attempts).toBe(5);
  });
});

describe('a resolver that repeats an address', () => {
  const dials = dialsPerKey();

  it('each address is dialled once: three copies of a refusing one before the live one cost one dial', async () => {
    const live = await echoPeer({ host: '127.0.0.2' });
    cleanup.push(() => live.close());
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.3', '127.0.0.3', '127.0.0.2', '127.0.0.2']);
    // A breaker that keeps the refusing address closed (a suspect) for the whole test, so that only
    // de-duplication can spare the copies.
    const breaker = new HostBreaker({ minOutage: 60_000 });
    const s = await connect({ host: 'svc.test', port: live.port }, { breaker, timeout: 1_000, socket: { lookup } });
    expect(s.remoteAddress).toBe('127.0.0.2');
    s.destroy();
    expect(dials.get(`127.0.0.3:${live.port}`)).toBe(1); // was 2 (3 against a blackhole, each copy an attempt delay)
    expect(dials.get(`127.0.0.2:${live.port}`)).toBe(1);
    expect(live.attempts).toBe(1);
  });
});

describe('resolving alike is remembered alike', () => {
  it('family 0 and hints 0 are the defaults they stand for: a caller giving them is refused from the memory of one that gave none (no lookup)', async () => {
    const breaker = quickBreaker();
    const dead = lookupTo(['127.0.0.3']);
    const target = { host: 'svc.test', port: 9 }; // nothing listens on 127.0.0.3:9: refused
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: dead.lookup } })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: dead.lookup, family: 0 } })).rejects.toBeInstanceOf(HostUnavailableError);
    await expect(connect(target, { breaker, timeout: 1_000, socket: { lookup: dead.lookup, hints: 0 } })).rejects.toBeInstanceOf(HostUnavailableError);
    expect(dead.calls()).toBe(1);
  });
});
