/**
 * A dial stalled in TCP while another dial of the same host reached it waits longer, once: the
 * host is up, its accept queue was full, and the kernel resends the dropped SYN after 1 s, then
 * 2 s more (it waits until 500 ms past the next resend, at most a second bound) (a burst of 4 000 new connections to a live loopback server failed 1 974 of them at
 * the 2.5 s bound, where Node's agent served all 4 000 by 3.1 s). A dead host reaches no dial, a
 * dial stalled past TCP is a stalled handshake: neither waits longer. A dial by name is judged by
 * the address its socket says it connects to (its siblings may have reached another of the
 * name's addresses); one that never says waits no longer. On a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError } from '../../src/core/errors.js';
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { type DialContext, addressesReachedKept, dial, watchAddress } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';

const H = '127.0.0.9:5432';

/** An establishment the test finishes by hand. */
function pending(): { establish: (ctx: DialContext) => Promise<string>; ctx: () => DialContext; resolve: (c: string) => void } {
  let ctx: DialContext | undefined;
  let resolve!: (c: string) => void;
  return {
    establish: (c) => {
      ctx = c;
      return new Promise<string>((res) => (resolve = res));
    },
    ctx: () => ctx!,
    resolve: (c) => resolve(c),
  };
}

function setup(): { clock: ManualClock; breaker: HostBreaker } {
  const clock = new ManualClock();
  return { clock, breaker: new HostBreaker({ clock, failureThreshold: 1, minOutage: 0 }) };
}

/** Where `p` stands now: its value, its error, or undefined while pending. */
function watch(p: Promise<string>): { value?: string; error?: unknown } {
  const seen: { value?: string; error?: unknown } = {};
  p.then(
    (v) => (seen.value = v),
    (e: unknown) => (seen.error = e),
  );
  return seen;
}

/**
 * A dial of `key` that stays in tcp, beside a sibling that connects at once (each on `breaker`,
 * else a breaker of its own); returns where the stalled one stands.
 */
async function stalledBesideConnected(key: string, clock: ManualClock, timeout: number, breaker?: HostBreaker): Promise<{ value?: string; error?: unknown }> {
  const stalled = pending();
  const sibling = pending();
  const a = watch(dial(key, stalled.establish, { clock, breaker: breaker ?? new HostBreaker({ clock }), timeout }));
  dial(key, sibling.establish, { clock, breaker: breaker ?? new HostBreaker({ clock }), timeout }).catch(() => {});
  sibling.resolve('b');
  await flushMicrotasks();
  return a;
}

/** Advances to just before `after` ms from now (`seen` still waiting), then to it; returns the error it failed with. */
async function failsAfter(clock: ManualClock, seen: { value?: string; error?: unknown }, after: number): Promise<unknown> {
  clock.advance(after - 1);
  await flushMicrotasks();
  expect(seen).toEqual({});
  clock.advance(1);
  await flushMicrotasks();
  return seen.error;
}

describe('dial: a SYN dropped by a live host', () => {
  it('stalled in tcp while a sibling connected: it waits on past its bound, then is served', async () => {
    const { clock, breaker } = setup();
    const stalled = pending();
    const sibling = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker, timeout: 1_000 }));
    const b = watch(dial(H, sibling.establish, { clock, breaker, timeout: 1_000 }));
    clock.advance(10);
    sibling.resolve('b'); // a plain dial connected: it never moved past tcp, yet it reached the host
    await flushMicrotasks();
    expect(b.value).toBe('b');
    clock.advance(990);
    await flushMicrotasks();
    expect(a).toEqual({}); // still waiting at its bound
    expect(stalled.ctx().signal.aborted).toBe(false);
    clock.advance(500);
    stalled.resolve('a'); // the resent SYN was answered
    await flushMicrotasks();
    expect(a.value).toBe('a');
    expect(breaker.state(H)?.failures ?? 0).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('the extension is once: it fails at twice the bound, its error saying so, and counts', async () => {
    const { clock, breaker } = setup();
    const stalled = pending();
    const sibling = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker, timeout: 1_000 }));
    dial(H, sibling.establish, { clock, breaker, timeout: 1_000 }).catch(() => {});
    sibling.ctx().phase = 'tls'; // a TLS dial's TCP came up: the host was reached
    clock.advance(1_999);
    await flushMicrotasks();
    expect(a).toEqual({});
    clock.advance(1);
    // Decided only after one poll of I/O (a setImmediate), at the second expiry too: microtasks alone do not end it.
    for (let i = 0; i < 5; i++) await Promise.resolve();
    expect(a).toEqual({});
    await flushMicrotasks();
    expect(a.error).toBeInstanceOf(ConnectTimeoutError);
    expect(a.error).toMatchObject({ timeout: 2_000, phase: 'tcp' });
    expect(stalled.ctx().signal.aborted).toBe(true);
    sibling.resolve('b');
    await flushMicrotasks();
  });

  it('the default bound waits until just past the SYN resent at 3 s (3 500 ms), not a whole second bound', async () => {
    const { clock, breaker } = setup();
    const a = await stalledBesideConnected(H, clock, 2_500, breaker);
    expect(await failsAfter(clock, a, 3_500)).toMatchObject({ timeout: 3_500, phase: 'tcp' });
    // A bound of 10 s waits to 15.5 s (the resend at 15 s); one of 3 s, to 6 s (twice the bound, before 7.5 s).
    for (const [bound, until] of [
      [10_000, 15_500],
      [3_000, 6_000],
    ] as const) {
      const w = await stalledBesideConnected(H, clock, bound);
      expect(await failsAfter(clock, w, until)).toMatchObject({ timeout: until });
    }
  });

  it('a sibling that failed without reaching the host, then one that connected after it ended: a hears it', async () => {
    const { clock } = setup();
    const stalled = pending();
    const later = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }));
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.9:5432'), { code: 'ECONNREFUSED' });
    await dial(H, () => Promise.reject(refused), { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }).catch(() => {});
    dial(H, later.establish, { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }).catch(() => {});
    later.resolve('later');
    await flushMicrotasks();
    clock.advance(1_000);
    await flushMicrotasks();
    expect(a).toEqual({}); // extended on the later sibling's evidence
    stalled.resolve('a');
    await flushMicrotasks();
    expect(a.value).toBe('a');
  });

  it('no sibling reached the host (a dead host): it fails at its bound, as before', async () => {
    const { clock, breaker } = setup();
    const stalled = pending();
    const other = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker, timeout: 1_000 }));
    const b = watch(dial(H, other.establish, { clock, breaker, timeout: 1_000 }));
    clock.advance(1_000);
    await flushMicrotasks();
    expect(a.error).toMatchObject({ timeout: 1_000, phase: 'tcp' });
    expect(b.error).toMatchObject({ timeout: 1_000, phase: 'tcp' });
  });

  it('stalled past tcp (a handshake unanswered) while a sibling connected: no more time', async () => {
    const { clock, breaker } = setup();
    const stalled = pending();
    const sibling = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker, timeout: 1_000 }));
    dial(H, sibling.establish, { clock, breaker, timeout: 1_000 }).catch(() => {});
    stalled.ctx().phase = 'handshake';
    sibling.resolve('b');
    await flushMicrotasks();
    clock.advance(1_000);
    await flushMicrotasks();
    expect(a.error).toMatchObject({ timeout: 1_000, phase: 'handshake' });
  });

  it('a sibling that reached the host before this dial began is no evidence for it', async () => {
    const { clock, breaker } = setup();
    const early = pending();
    const late = pending();
    const keep = pending();
    dial(H, keep.establish, { clock, breaker, timeout: 5_000 }).catch(() => {}); // keeps the host's record alive
    const e = watch(dial(H, early.establish, { clock, breaker, timeout: 1_000 }));
    early.resolve('e');
    await flushMicrotasks();
    expect(e.value).toBe('e');
    const l = watch(dial(H, late.establish, { clock, breaker, timeout: 1_000 }));
    clock.advance(1_000);
    await flushMicrotasks();
    expect(l.error).toMatchObject({ timeout: 1_000, phase: 'tcp' });
    keep.resolve('k');
    await flushMicrotasks();
  });

  it('a sibling past its handshake before this dial began, ending after: no evidence (a reach is remembered when it happens, once)', async () => {
    const { clock, breaker } = setup();
    const sibling = pending();
    dial(H, sibling.establish, { clock, breaker, timeout: 1_000 }).catch(() => {});
    sibling.ctx().phase = 'handshake'; // its TCP connection came up: reached now
    const a = watch(dial(H, pending().establish, { clock, breaker, timeout: 1_000 }));
    sibling.resolve('b');
    await flushMicrotasks();
    expect(await failsAfter(clock, a, 1_000)).toMatchObject({ timeout: 1_000 });
  });

  it('another host reaching is no evidence: hosts are told apart', async () => {
    const { clock, breaker } = setup();
    const stalled = pending();
    const elsewhere = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker, timeout: 1_000 }));
    const b = watch(dial('127.0.0.10:5432', elsewhere.establish, { clock, breaker, timeout: 1_000 }));
    elsewhere.resolve('b');
    await flushMicrotasks();
    expect(b.value).toBe('b');
    clock.advance(1_000);
    await flushMicrotasks();
    expect(a.error).toMatchObject({ timeout: 1_000 });
  });

  it('a dial by name that never learns its address: a sibling may have reached another of its addresses, so no more time (IPv6 literals do get it)', async () => {
    const { clock, breaker } = setup();
    for (const [key, extended] of [
      ['db-1:5432', false],
      ['[::1]:5432', true],
    ] as const) {
      const a = await stalledBesideConnected(key, clock, 1_000, breaker);
      clock.advance(1_000);
      await flushMicrotasks();
      expect(a.error === undefined).toBe(extended);
      clock.advance(1_000);
      await flushMicrotasks();
      expect(a.error).toMatchObject({ timeout: extended ? 2_000 : 1_000 });
    }
  });

  it('a dial that never started, or never connected, is remembered nowhere; what is kept is bounded (the latest 1 024 addresses)', async () => {
    const { clock, breaker } = setup();
    const kept = addressesReachedKept();
    const bad = { aborted: false, addEventListener: () => { throw new Error('no'); }, removeEventListener: () => {} } as unknown as AbortSignal;
    const err = await dial('127.0.1.1:5432', pending().establish, { clock, breaker, timeout: 1_000, signal: bad }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    await dial('127.0.1.2:5432', () => Promise.reject(new Error('refused')), { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }).catch(() => {});
    expect(addressesReachedKept()).toBe(kept);
    for (let i = 0; i < 2_000; i++) await dial(`127.1.${i >> 8}.${i & 255}:5432`, () => Promise.resolve('up'), { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 });
    expect(addressesReachedKept()).toBe(1_024);
    // The latest is kept: a dial stalled there beside a sibling that connects still waits on.
    const a = await stalledBesideConnected('127.1.7.207:5432', clock, 1_000);
    clock.advance(1_000);
    await flushMicrotasks();
    expect(a).toEqual({});
  });
});

/**
 * A dial by name whose socket (a stand-in: the events Node's net.Socket emits) says which address
 * it connects to: judged by that address, as a dial of it is.
 */
describe('dial by name: judged by the address its socket connects to (watchAddress)', () => {
  const NAME = 'db-1:5432';
  /** A dial of `key` that stays in tcp; its socket says it connects to each of `addresses` in turn (as `event`). */
  function stalledAt(key: string, clock: ManualClock, breaker: HostBreaker, addresses: string[], event: 'connectionAttempt' | 'lookup' = 'connectionAttempt'): { seen: { value?: string; error?: unknown }; socket: EventEmitter } {
    const socket = new EventEmitter();
    const establish = (ctx: DialContext): Promise<string> => {
      watchAddress(ctx, socket as net.Socket);
      for (const a of addresses) {
        if (event === 'lookup') socket.emit('lookup', null, a, 4, 'db-1');
        else socket.emit('connectionAttempt', a, 5432, 4);
      }
      return new Promise<string>(() => {});
    };
    return { seen: watch(dial(key, establish, { clock, breaker, timeout: 1_000 })), socket };
  }
  /** A dial of `key` whose socket connects to `address` at once. */
  async function connectedAt(key: string, clock: ManualClock, breaker: HostBreaker, address: string): Promise<void> {
    const socket = new EventEmitter();
    await dial(key, (ctx) => {
      watchAddress(ctx, socket as net.Socket);
      socket.emit('connectionAttempt', address, 5432, 4);
      return Promise.resolve('up');
    }, { clock, breaker, timeout: 1_000 });
  }

  it("stalled at an address a sibling by the same name reached: it waits on, as a dial of the address would; its listeners let go after", async () => {
    const { clock, breaker } = setup();
    const { seen, socket } = stalledAt(NAME, clock, breaker, ['127.0.0.5']);
    await connectedAt(NAME, clock, breaker, '127.0.0.5');
    clock.advance(1_000);
    await flushMicrotasks();
    expect(seen).toEqual({}); // was: ConnectTimeoutError at its bound (3 of 6 requests to a stalled server by name)
    expect(await failsAfter(clock, seen, 1_000)).toMatchObject({ timeout: 2_000 });
    expect(socket.listenerCount('connectionAttempt') + socket.listenerCount('lookup')).toBe(0);
  });

  it("a sibling reached another of the name's addresses: no more time", async () => {
    const { clock, breaker } = setup();
    const { seen } = stalledAt(NAME, clock, breaker, ['127.0.0.6']);
    await connectedAt(NAME, clock, breaker, '127.0.0.5');
    expect(await failsAfter(clock, seen, 1_000)).toMatchObject({ timeout: 1_000 });
  });

  it('moved on from the reached address to another (happy eyeballs): judged by where it is now', async () => {
    const { clock, breaker } = setup();
    const sibling = pending();
    const s = new EventEmitter();
    dial(NAME, (ctx) => {
      watchAddress(ctx, s as net.Socket);
      s.emit('connectionAttempt', '127.0.0.5', 5432, 4);
      return sibling.establish(ctx);
    }, { clock, breaker, timeout: 1_000 }).catch(() => {});
    const { seen, socket } = stalledAt(NAME, clock, breaker, ['127.0.0.5']);
    sibling.resolve('up');
    await flushMicrotasks();
    socket.emit('connectionAttempt', '127.0.0.6', 5432, 4); // its attempt at .5 timed out: now at .6
    expect(await failsAfter(clock, seen, 1_000)).toMatchObject({ timeout: 1_000 });
  });

  it("a dial of the address itself reaching it counts for a dial by name stalled there, and 'lookup' (Node before 20.12) names the address too", async () => {
    const { clock, breaker } = setup();
    const { seen } = stalledAt(NAME, clock, breaker, ['127.0.0.5'], 'lookup');
    await dial('127.0.0.5:5432', () => Promise.resolve('up'), { clock, breaker, timeout: 1_000 });
    clock.advance(1_000);
    await flushMicrotasks();
    expect(seen).toEqual({});
    expect(await failsAfter(clock, seen, 1_000)).toMatchObject({ timeout: 2_000 });
  });

  it('an event naming no address (a failed lookup, nonsense from a resolver) names none: no more time, nothing thrown', async () => {
    const { clock, breaker } = setup();
    const socket = new EventEmitter();
    const seen = watch(dial(NAME, (ctx) => {
      watchAddress(ctx, socket as net.Socket);
      socket.emit('lookup', new Error('getaddrinfo ENOTFOUND db-1'), '127.0.0.5', 4, 'db-1');
      socket.emit('connectionAttempt', undefined, 5432, 4);
      socket.emit('connectionAttempt', 'db-1', 5432, 4);
      return new Promise<string>(() => {});
    }, { clock, breaker, timeout: 1_000 }));
    await connectedAt(NAME, clock, breaker, '127.0.0.5');
    expect(await failsAfter(clock, seen, 1_000)).toMatchObject({ timeout: 1_000 });
  });

  it('a dial by name that connects without naming its address remembers none; told after its dial ended, nothing is listened to', async () => {
    const { clock, breaker } = setup();
    const kept = addressesReachedKept();
    let ended: DialContext | undefined;
    await dial(NAME, (ctx) => {
      ended = ctx;
      return Promise.resolve('up');
    }, { clock, breaker, timeout: 1_000 });
    expect(addressesReachedKept()).toBe(kept);
    const socket = new EventEmitter();
    watchAddress(ended!, socket as net.Socket);
    expect(socket.listenerCount('connectionAttempt') + socket.listenerCount('lookup')).toBe(0);
  });

  it('a dial keyed by an address, or a context no dial made: nothing is listened to', async () => {
    const { clock, breaker } = setup();
    const socket = new EventEmitter();
    let during = -1;
    await dial('127.0.0.5:5432', (ctx) => {
      watchAddress(ctx, socket as net.Socket);
      during = socket.listenerCount('connectionAttempt') + socket.listenerCount('lookup');
      return Promise.resolve('up');
    }, { clock, breaker, timeout: 1_000 });
    expect(during).toBe(0); // not even while it runs
    watchAddress({ signal: new AbortController().signal, phase: 'tcp' } as unknown as DialContext, socket as net.Socket);
    expect(socket.listenerCount('connectionAttempt') + socket.listenerCount('lookup')).toBe(0);
  });
});
