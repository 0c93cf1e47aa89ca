/**
 * Per-address guarding: a name resolving to 127.0.0.2, .3 and .4 through a custom lookup, one of
 * them dead (refusing, or blackholed by a full accept queue). Counts dials per address (the
 * `dialguard:dial:settled` channel) and connections each live peer accepted.
 */
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { lookupBreaker } from '../../src/guard/addresses.js';
import { type TcpPeer, echoPeer } from '../../src/testing/tcp-peers.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { breakerOnManualClock } from '../helpers/sockets.js';
import { dialsPerKey, lookupTo } from '../helpers/per-address.js';

const cleanup = leakCheckEach();

const dials = dialsPerKey();

/** Two live echo peers on 127.0.0.2 and 127.0.0.4, same port; 127.0.0.3 has no listener there. */
async function twoLive(): Promise<{ port: number; live: TcpPeer[]; close: () => Promise<void> }> {
  const a = await echoPeer({ host: '127.0.0.2' });
  const b = await echoPeer({ host: '127.0.0.4', port: a.port });
  return { port: a.port, live: [a, b], close: async () => void (await Promise.all([a.close(), b.close()])) };
}

async function connectN(n: number, run: () => Promise<net.Socket>): Promise<{ ok: number; errors: unknown[] }> {
  let ok = 0;
  const errors: unknown[] = [];
  for (let i = 0; i < n; i++) {
    try {
      const s = await run();
      ok++;
      s.destroy();
    } catch (err) {
      errors.push(err);
    }
  }
  return { ok, errors };
}

describe('connect: per-address guarding', () => {
  it('one refusing address of three: the live ones serve every call, the dead one opens alone after its own failure, and the name is never refused', async () => {
    const peers = await twoLive();
    try {
      const { breaker } = breakerOnManualClock(1);
      const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']); // the dead one first
      const r = await connectN(20, () => connect({ host: 'svc.test', port: peers.port }, { breaker, timeout: 1_000, socket: { lookup } }));
      expect(r).toEqual({ ok: 20, errors: [] });
      expect(dials.get(`127.0.0.3:${peers.port}`)).toBe(1); // once, then open and skipped
      expect(breaker.state(`127.0.0.3:${peers.port}`)?.state).toBe('open');
      expect(lookupBreaker(breaker, lookup).state(`svc.test:${peers.port}`)?.state).toBe('closed'); // the lookups' own entry
      expect(peers.live[0]!.attempts + peers.live[1]!.attempts).toBe(20);
    } finally {
      await peers.close();
    }
  });

  it('an address whose entry is open (isolated) is skipped without a dial, while its siblings serve', async () => {
    const peers = await twoLive();
    try {
      const { breaker } = breakerOnManualClock();
      breaker.isolate(`127.0.0.2:${peers.port}`);
      const { lookup } = lookupTo(['127.0.0.2', '127.0.0.4']);
      const r = await connectN(5, () => connect({ host: 'svc.test', port: peers.port }, { breaker, timeout: 1_000, socket: { lookup } }));
      expect(r.ok).toBe(5);
      expect(peers.live[0]!.attempts).toBe(0);
      expect(peers.live[1]!.attempts).toBe(5);
      expect(dials.get(`127.0.0.2:${peers.port}`)).toBeUndefined();
    } finally {
      await peers.close();
    }
  });

  it('a blackholed address costs a call at most attemptDelay, is recorded when its own timeout ends, and is skipped once open', async () => {
    const peers = await twoLive();
    await using hole = await blackhole({ host: '127.0.0.3', port: peers.port });
    try {
      const { breaker } = breakerOnManualClock(1);
      const { lookup } = lookupTo([hole.host, '127.0.0.2', '127.0.0.4']);
      const dead = hole.address;
      const opts = { breaker, timeout: 300, attemptDelay: 30, socket: { lookup } };
      const first = await connect({ host: 'svc.test', port: peers.port }, opts);
      first.destroy();
      expect(dials.get(dead)).toBeUndefined(); // served while the dead address's dial was still out
      // The dead address's dial runs on in the background to its own end, and is recorded.
      expect(await eventually(() => dials.get(dead), (n) => n === 1, 2_000)).toBe(1);
      expect(breaker.state(dead)?.state).toBe('open');
      const r = await connectN(10, () => connect({ host: 'svc.test', port: peers.port }, opts));
      expect(r.ok).toBe(10);
      expect(dials.get(dead)).toBe(1);
      expect(peers.live[0]!.attempts + peers.live[1]!.attempts).toBe(11);
    } finally {
      await peers.close();
    }
  });

  it('a probe goes to one address at a time: with two half-open blackholed addresses, one is probed and the other waits while a live one serves', async () => {
    const peers = await twoLive();
    await using holeA = await blackhole({ host: '127.0.0.3', port: peers.port });
    await using holeB = await blackhole({ host: '127.0.0.5', port: peers.port });
    try {
      const { breaker, clock } = breakerOnManualClock(1, 1_000);
      const a = holeA.address;
      const b = holeB.address;
      for (const key of [a, b]) breaker.admit(key).failed(new Error('dead'));
      clock.advance(1_000); // both half-open: the next admit of each would be a probe
      const { lookup } = lookupTo([holeA.host, holeB.host, '127.0.0.2']);
      const socket = await connect({ host: 'svc.test', port: peers.port }, { breaker, timeout: 200, attemptDelay: 20, socket: { lookup } });
      socket.destroy();
      expect(await eventually(() => dials.get(a), (n) => n === 1, 2_000)).toBe(1);
      expect(dials.get(b)).toBeUndefined();
      expect(peers.live[0]!.attempts).toBe(1);
      expect(breaker.stats().probesGranted).toBe(1);
    } finally {
      await peers.close();
    }
  });

  it('the name is refused, without a lookup, only when every address it resolves to is open; the refusal carries each address', async () => {
    const peers = await twoLive(); // only for a free port: nothing listens on .3, .5, .6
    await peers.close();
    const { breaker } = breakerOnManualClock(1);
    const { lookup, calls } = lookupTo(['127.0.0.3', '127.0.0.5', '127.0.0.6']);
    const opts = { breaker, timeout: 1_000, socket: { lookup } };
    const first = await connect({ host: 'svc.test', port: peers.port }, opts).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(AggregateError);
    expect((first as AggregateError).errors.map((e: { code?: string }) => e.code)).toEqual(['ECONNREFUSED', 'ECONNREFUSED', 'ECONNREFUSED']);
    const second = await connect({ host: 'svc.test', port: peers.port }, opts).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(HostUnavailableError);
    const refusal = second as HostUnavailableError;
    expect(refusal.host).toBe(`svc.test:${peers.port}`);
    expect(refusal.addresses?.map((x) => [x.host, x.state])).toEqual([
      [`127.0.0.3:${peers.port}`, 'open'],
      [`127.0.0.5:${peers.port}`, 'open'],
      [`127.0.0.6:${peers.port}`, 'open'],
    ]);
    expect(refusal.retryAfter).toBeGreaterThan(0);
    expect(refusal.message).toContain('every address it resolves to is refused');
    expect(calls()).toBe(1); // refused from memory: no lookup, no dial
    expect([...dials.values()].reduce((x, y) => x + y, 0)).toBe(3); // three dials (the lookup is no dial: dialguard:lookup:settled)
  });

  it('a name with one address alive is not refused, however many of its others are open', async () => {
    const peers = await twoLive();
    try {
      const { breaker } = breakerOnManualClock(1);
      breaker.isolate(`127.0.0.2:${peers.port}`);
      breaker.isolate(`127.0.0.3:${peers.port}`);
      const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
      const r = await connectN(5, () => connect({ host: 'svc.test', port: peers.port }, { breaker, timeout: 1_000, socket: { lookup } }));
      expect(r).toEqual({ ok: 5, errors: [] });
      expect(peers.live[0]!.attempts).toBe(0); // isolated: never dialled
      expect(peers.live[1]!.attempts).toBe(5);
    } finally {
      await peers.close();
    }
  });

  it("the breaker's capacity bounds address entries too, and a lookup's own names (kept apart, with the same capacity)", async () => {
    const peers = await twoLive();
    try {
      const breaker = new HostBreaker({ capacity: 4 });
      const { lookup } = lookupTo(['127.0.0.2', '127.0.0.4']);
      for (const name of ['a.test', 'b.test', 'c.test']) {
        (await connect({ host: name, port: peers.port }, { breaker, timeout: 1_000, socket: { lookup } })).destroy();
      }
      // 3 names (apart: the lookup's own) + 1 address actually dialled (the first, each time).
      const names = lookupBreaker(breaker, lookup);
      expect(breaker.stats().hosts).toBe(1);
      expect(names.stats().hosts).toBe(3);
      expect(breaker.state(`127.0.0.2:${peers.port}`)?.state).toBe('closed');
      for (const name of ['d.test', 'e.test']) {
        (await connect({ host: name, port: peers.port }, { breaker, timeout: 1_000, socket: { lookup } })).destroy();
      }
      // Two more names evict the least recently used name; the address, dialled each time, stays.
      expect(names.stats()).toMatchObject({ hosts: 4, evictedCapacity: 1 });
      expect(names.state('a.test', peers.port)).toBeUndefined();
      expect(breaker.state(`127.0.0.2:${peers.port}`)).toBeDefined();
    } finally {
      await peers.close();
    }
  });

  it('a dead address whose last dial failed is dialled beside the next one: no caller waits out the attempt delay, and it opens after its rounds', async () => {
    const peers = await twoLive();
    await using hole = await blackhole({ host: '127.0.0.3', port: peers.port });
    try {
      // One manual clock for the breaker, the dial timeouts and the attempt delay: nothing fires
      // unless the test ticks it, so a caller waiting on the attempt delay would never connect.
      const clock = new ManualClock();
      const breaker = new HostBreaker({ clock, failureThreshold: 2, minOutage: 0, openDuration: 30_000 });
      breaker.admit(hole.address).failed(new Error('timed out')); // suspect: closed, 1 failure
      const { lookup } = lookupTo([hole.host, '127.0.0.2']);
      const opts = { breaker, clock, timeout: 1_000, attemptDelay: 50, socket: { lookup } };
      const bounded = <T,>(p: Promise<T>): Promise<T | 'stuck'> => Promise.race([p, new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 2_000))]);
      const first = await bounded(connect({ host: 'svc.test', port: peers.port }, opts));
      expect(first).not.toBe('stuck');
      (first as net.Socket).destroy();
      expect(breaker.state(hole.address)?.state).toBe('closed'); // its dial is still out
      await clock.tick(1_000); // the dead address's dial times out: its second failed round opens it
      expect(await eventually(() => dials.get(hole.address), (n) => n === 1)).toBe(1);
      expect(breaker.state(hole.address)?.state).toBe('open');
      const second = await bounded(connect({ host: 'svc.test', port: peers.port }, opts));
      expect(second).not.toBe('stuck');
      (second as net.Socket).destroy();
      expect(dials.get(hole.address)).toBe(1); // open: skipped
      expect(peers.live[0]!.attempts).toBe(2);
    } finally {
      await peers.close();
    }
  });

  it('concurrent callers share one dial to a suspect address: 8 calls, 1 dial to it, 8 served by the live one', async () => {
    const peers = await twoLive();
    await using hole = await blackhole({ host: '127.0.0.3', port: peers.port });
    try {
      const clock = new ManualClock();
      const breaker = new HostBreaker({ clock, failureThreshold: 3, minOutage: 0 });
      breaker.admit(hole.address).failed(new Error('timed out')); // suspect
      const { lookup } = lookupTo([hole.host, '127.0.0.2']);
      const opts = { breaker, clock, timeout: 1_000, attemptDelay: 50, socket: { lookup } };
      const sockets = await Promise.all(Array.from({ length: 8 }, () => connect({ host: 'svc.test', port: peers.port }, opts)));
      for (const s of sockets) s.destroy();
      await clock.tick(1_000);
      expect(await eventually(() => dials.get(hole.address), (n) => (n ?? 0) > 1, 200)).toBe(1); // and no more
      expect(peers.live[0]!.attempts).toBe(8);
    } finally {
      await peers.close();
    }
  });

  it("a resolver's failure is the name's own (no address to blame): the caller gets it, the name's entry counts it", async () => {
    const { breaker } = breakerOnManualClock(3);
    const notFound = Object.assign(new Error('getaddrinfo ENOTFOUND gone.test'), { code: 'ENOTFOUND' });
    const lookup = ((_h: string, _o: unknown, cb: (err: Error) => void) => queueMicrotask(() => cb(notFound))) as unknown as net.LookupFunction;
    await expect(connect({ host: 'gone.test', port: 80 }, { breaker, socket: { lookup } })).rejects.toBe(notFound);
    expect(lookupBreaker(breaker, lookup).state('gone.test:80')?.failures).toBe(1); // the entry its resolver's lookups count in
    expect(breaker.stats().hosts).toBe(0); // no address entry
  });

  it("a lookup that throws (a caller's bug, not an answer) counts nothing against the name: a caller on the system resolver is not refused", async () => {
    const { breaker } = breakerOnManualClock(1);
    const bug = new TypeError("Cannot read properties of undefined (reading 'address')");
    const lookup = (() => {
      throw bug;
    }) as unknown as net.LookupFunction;
    for (let i = 0; i < 3; i++) await expect(connect({ host: 'svc.test', port: 80 }, { breaker, socket: { lookup } })).rejects.toBe(bug);
    expect(breaker.state('svc.test:80')?.failures ?? 0).toBe(0); // it opened the name after one call
    expect(breaker.tryAdmit('svc.test', 80)).not.toBeInstanceOf(HostUnavailableError);
  });

  it('attemptDelay is checked, naming the option', async () => {
    await expect(connect({ host: 'svc.test', port: 80 }, { attemptDelay: -1 })).rejects.toThrow(/attemptDelay/);
    // Also where it is not used: an IP literal, no breaker, perAddress off.
    await expect(connect({ host: '127.0.0.1', port: 1 }, { attemptDelay: Number.NaN })).rejects.toThrow(/attemptDelay/);
    await expect(connect({ host: 'svc.test', port: 80 }, { breaker: null, attemptDelay: '250' as unknown as number })).rejects.toThrow(/attemptDelay/);
    await expect(connect({ host: 'svc.test', port: 80 }, { perAddress: false, attemptDelay: -1 })).rejects.toThrow(/attemptDelay/);
  });
});

describe('connect: a caller restricted to one address family', () => {
  /** A resolver for which `svc.test` has an IPv4 address only. */
  const v4Only = ((_host: string, opts: { family?: number; all?: boolean }, cb: (...answer: unknown[]) => void) => {
    if (opts.family === 6) return void process.nextTick(cb, Object.assign(new Error('getaddrinfo ENOTFOUND svc.test'), { code: 'ENOTFOUND', hostname: 'svc.test' }));
    if (opts.all === true) return void process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }]);
    process.nextTick(cb, null, '127.0.0.1', 4);
  }) as unknown as net.LookupFunction;

  for (const perAddress of [true, false]) {
    it(`an IPv6-only caller finding no AAAA never gets the name refused for the others (perAddress ${perAddress})`, async () => {
      const peer = await echoPeer();
      cleanup.push(() => peer.close());
      const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
      const target = { host: 'svc.test', port: peer.port };
      for (let i = 0; i < 3; i++) {
        await expect(connect(target, { breaker, perAddress, socket: { family: 6, lookup: v4Only } })).rejects.toMatchObject({ code: 'ENOTFOUND' });
      }
      expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0 }); // was: the name opened at the first
      const socket = await connect(target, { breaker, perAddress, socket: { lookup: v4Only } });
      socket.destroy();
    });

    it(`a name that resolves to nothing for a caller with no restriction still counts against it (perAddress ${perAddress})`, async () => {
      const noName = ((_host: string, _opts: unknown, cb: (...answer: unknown[]) => void) =>
        void process.nextTick(cb, Object.assign(new Error('getaddrinfo ENOTFOUND gone.test'), { code: 'ENOTFOUND' }))) as unknown as net.LookupFunction;
      const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
      await expect(connect({ host: 'gone.test', port: 1 }, { breaker, perAddress, socket: { lookup: noName } })).rejects.toMatchObject({ code: 'ENOTFOUND' });
      // Per address, a resolver of the caller's own counts apart (another client's lookup may find the name).
      const counted = (b: HostBreaker): HostBreaker => (perAddress ? lookupBreaker(b, noName) : b);
      expect(counted(breaker).stats()).toMatchObject({ failed: 1 });
      await expect(connect({ host: 'gone.test', port: 1 }, { breaker, perAddress, socket: { lookup: noName } })).rejects.toBeInstanceOf(HostUnavailableError);
      // `hints: 0` and `family: 0` restrict nothing (Node's own defaults, spelled out): still the name's failure.
      for (const socket of [{ hints: 0 }, { family: 0 }, { family: 0, hints: 0 }]) {
        const spelled = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
        await expect(connect({ host: 'gone.test', port: 1 }, { breaker: spelled, perAddress, socket: { ...socket, lookup: noName } })).rejects.toMatchObject({ code: 'ENOTFOUND' });
        expect(counted(spelled).stats()).toMatchObject({ failed: 1 });
      }
      // A refused connect under a restriction is still the host's (only "no address" is the caller's).
      const refused = await echoPeer();
      cleanup.push(() => refused.close());
      const port = refused.port;
      await refused.close();
      const v4 = ((_h: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
        void (opts?.all === true ? process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }]) : process.nextTick(cb, null, '127.0.0.1', 4))) as unknown as net.LookupFunction;
      const strict = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
      await expect(connect({ host: 'svc.test', port }, { breaker: strict, perAddress, socket: { family: 4, lookup: v4 } })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      expect(strict.stats().failed).toBe(1);
    });
  }
});

describe('connect: per-address guarding, a live name whose TLS handshake is slower than the attempt delay', () => {
  it('once an address has served, its slow handshake is waited on: one TCP connection and handshake per call, not one to each address (a busy server got twice the handshakes)', async () => {
    // Both addresses answer TLS 150 ms after accepting (a far or busy server); the attempt delay is 50 ms.
    const tlsServer = tls.createServer({ key: TEST_KEY, cert: TEST_CERT });
    tlsServer.on('tlsClientError', () => {});
    const accepted = new Map<string, number>();
    const held = new Set<net.Socket>();
    const slow = (host: string): net.Server =>
      net.createServer((s) => {
        accepted.set(host, (accepted.get(host) ?? 0) + 1);
        held.add(s);
        s.on('close', () => held.delete(s));
        s.on('error', () => {});
        s.pause();
        setTimeout(() => tlsServer.emit('connection', s), 150);
      });
    const a = slow('127.0.0.2');
    const b = slow('127.0.0.3');
    await new Promise<void>((r) => a.listen(0, '127.0.0.2', r));
    const port = (a.address() as net.AddressInfo).port;
    await new Promise<void>((r) => b.listen(port, '127.0.0.3', r));
    cleanup.push(async () => {
      for (const s of held) s.destroy();
      await Promise.all([a, b].map((s) => new Promise((r) => s.close(r))));
    });
    const breaker = new HostBreaker();
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3']);
    const options = { breaker, attemptDelay: 50, timeout: 5_000, tls: { ca: TEST_CERT }, socket: { lookup } };
    // The first call: nothing is proven yet, so .3 joins after 50 ms, as happy eyeballs does.
    const first = await connect({ host: 'localhost', port }, options);
    first.destroy();
    await eventually(() => dials.get(`127.0.0.3:${port}`), (n) => n === 1); // .3's dial ends too (connected late, closed)
    for (let i = 0; i < 5; i++) {
      const socket = await connect({ host: 'localhost', port }, options);
      expect(socket.remoteAddress).toBe('127.0.0.2');
      socket.destroy();
    }
    expect(accepted.get('127.0.0.2')).toBe(6);
    expect(accepted.get('127.0.0.3')).toBe(1); // was 6: every call dialled both
  });
});
