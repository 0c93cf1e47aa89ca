/**
 * A dial stalled in TCP while another dial of the same host reached it waits longer, once: the
 * host is up, its accept queue was full, and the kernel resends the dropped SYN after 1 s, then
 * 2 s more (it waits until 500 ms past the next resend, at most a second bound) (a burst of 4 000 new connections to a live loopback server failed 1 974 of them at
 * the 2.5 s bound, where Node's agent served all 4 000 by 3.1 s). A dead host reaches no dial, a
 * dial stalled past TCP is a stalled handshake: neither waits longer; nor does a dial by name,
 * whose siblings may have reached another of its addresses. On a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError } from '../../src/core/errors.js';
import { type DialContext, dial, hostsBeingDialled } from '../../src/guard/dial.js';
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
    expect(hostsBeingDialled()).toBe(0);
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
    expect(hostsBeingDialled()).toBe(0);
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
    expect(hostsBeingDialled()).toBe(0);
  });

  it('a sibling that failed without reaching the host, then one that connected after it ended: the record a began with hears it', async () => {
    const { clock } = setup();
    const stalled = pending();
    const later = pending();
    const a = watch(dial(H, stalled.establish, { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }));
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.9:5432'), { code: 'ECONNREFUSED' });
    await dial(H, () => Promise.reject(refused), { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }).catch(() => {});
    expect(hostsBeingDialled()).toBe(1); // a is still out: its host's record stays
    dial(H, later.establish, { clock, breaker: new HostBreaker({ clock }), timeout: 1_000 }).catch(() => {});
    later.resolve('later');
    await flushMicrotasks();
    clock.advance(1_000);
    await flushMicrotasks();
    expect(a).toEqual({}); // extended on the later sibling's evidence
    stalled.resolve('a');
    await flushMicrotasks();
    expect(a.value).toBe('a');
    expect(hostsBeingDialled()).toBe(0);
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
    expect(hostsBeingDialled()).toBe(0);
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
    expect(hostsBeingDialled()).toBe(0);
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
    expect(hostsBeingDialled()).toBe(0);
  });

  it('a dial by name: a sibling may have reached another of its addresses, so no more time (IPv6 literals do get it)', async () => {
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
    expect(hostsBeingDialled()).toBe(0);
  });

  it("a signal-like that cannot be listened to lets go of the host's record too", async () => {
    const { clock, breaker } = setup();
    const bad = { aborted: false, addEventListener: () => { throw new Error('no'); }, removeEventListener: () => {} } as unknown as AbortSignal;
    const err = await dial(H, pending().establish, { clock, breaker, timeout: 1_000, signal: bad }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(hostsBeingDialled()).toBe(0);
  });
});
