/**
 * Per-address guarding, decided without sockets: `connectAddresses` (and the refusal from memory
 * that `connect` consults first) driven by dials the test settles one by one, on one manual clock
 * shared by the breaker, the dial timeouts and the attempt delay. Each test records which
 * addresses were dialled, in what order and when, and what the caller got.
 */
import { getEventListeners } from 'node:events';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, HostUnavailableError } from '../../src/core/errors.js';
import { ADDRESS_RECHECK, REFUSED_RECHECK, connectAddresses, lookupBreaker, refuseFromMemory } from '../../src/guard/addresses.js';
import type { DialContext } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { hostKey } from '../../src/guard/host-key.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';

const NAME = 'svc.test:80';
const A = '127.0.0.2';
const B = '127.0.0.3';
const C = '127.0.0.4';
const key = (address: string): string => hostKey(address, 80);

/** A stand-in socket: records whether it was closed. */
interface FakeSocket {
  address: string;
  destroyed: boolean;
  destroy(): void;
}

/** One dial the race started: the test connects or fails it. */
interface Dial {
  address: string;
  ctx: DialContext;
  socket: FakeSocket;
  connect(): void;
  fail(err?: unknown): void;
}

/** What a call got so far. */
interface Outcome {
  state: 'pending' | 'ok' | 'err';
  value: unknown;
}

type Answer = string[] | ((cb: (err: Error | null, answer?: unknown, family?: number) => void, options: unknown) => void);

function refused(address: string): Error {
  return Object.assign(new Error(`connect ECONNREFUSED ${address}:80`), { code: 'ECONNREFUSED' });
}

/**
 * A breaker and a racer on one manual clock. `call(answer)` resolves the name to `answer` (a
 * list, or a function that answers the lookup itself), after consulting the refusal from memory
 * as `connect` does.
 */
function rig(opts: { timeout?: number; attemptDelay?: number; threshold?: number; openDuration?: number; ignoreAbort?: boolean } = {}) {
  const clock = new ManualClock();
  const breaker = new HostBreaker({ clock, failureThreshold: opts.threshold ?? 1, minOutage: 0, openDuration: opts.openDuration ?? 30_000 });
  const dials: Dial[] = [];
  let lookups = 0;
  let current: Answer = [];
  // One lookup for the rig, as one client has one: it answers what the current call asks.
  const lookup = ((_host: string, options: unknown, cb: (err: Error | null, answer?: unknown, family?: number) => void) => {
    lookups++;
    const answer = current;
    if (typeof answer === 'function') return answer(cb, options);
    const list = answer.map((address) => ({ address, family: net.isIP(address) }));
    queueMicrotask(() => cb(null, list));
  }) as unknown as net.LookupFunction;
  const open = (address: string, ctx: DialContext): Promise<net.Socket> =>
    new Promise<net.Socket>((resolve, reject) => {
      const socket: FakeSocket = {
        address,
        destroyed: false,
        destroy() {
          this.destroyed = true;
        },
      };
      dials.push({ address, ctx, socket, connect: () => resolve(socket as unknown as net.Socket), fail: (err = refused(address)) => reject(err) });
      if (!opts.ignoreAbort) ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
    });
  const call = (answer: Answer, more: { signal?: AbortSignal; family?: number; hints?: number; timeout?: number } = {}): Outcome & { promise: Promise<net.Socket> } => {
    current = answer;
    // The caller's resolver, as connect passes it: memory is kept per lookup, family and hints.
    const refusal = refuseFromMemory(breaker, NAME, clock, undefined, { lookup, family: more.family, hints: more.hints });
    const promise =
      refusal !== undefined
        ? Promise.reject(refusal)
        : connectAddresses('svc.test', 80, NAME, open, {
            timeout: more.timeout ?? opts.timeout ?? 1_000,
            signal: more.signal,
            breaker,
            clock,
            attemptDelay: opts.attemptDelay ?? 250,
            lookup,
            family: more.family,
            hints: more.hints,
          });
    const out: Outcome & { promise: Promise<net.Socket> } = { state: 'pending', value: undefined, promise };
    promise.then(
      (v) => Object.assign(out, { state: 'ok', value: v }),
      (e: unknown) => Object.assign(out, { state: 'err', value: e }),
    );
    return out;
  };
  /** Fails (or connects) a dial and lets the race react. */
  const settle = async (d: Dial | undefined, how: 'connect' | 'fail' = 'fail'): Promise<void> => {
    if (how === 'connect') d!.connect();
    else d!.fail();
    await flushMicrotasks();
  };
  /** A host whose window has ended: its next admit is a probe. */
  const halfOpen = (address: string): void => {
    breaker.admit(key(address)).failed(new Error('dead'));
    clock.advance(opts.openDuration ?? 30_000);
    expect(breaker.state(key(address))?.state).toBe('half-open');
  };
  // The rig's own lookup counts its failures apart from the addresses' breaker (see lookupBreaker).
  const names = lookupBreaker(breaker, lookup);
  return { clock, breaker, names, dials, call, settle, halfOpen, order: () => dials.map((d) => d.address), lookups: () => lookups };
}

describe('per-address racing: which address is dialled, and when', () => {
  it('addresses are dialled in resolver order with families alternating (RFC 8305); each failure hands over at once; all failing is an AggregateError naming the name', async () => {
    const cases: Array<[string[], string[]]> = [
      [[A, B, C, '::2'], [A, '::2', B, C]],
      [['::2', A, '::3', '::4'], ['::2', A, '::3', '::4']],
      [[A, '::2', '::3', '::4'], [A, '::2', '::3', '::4']],
      [[C, B, A], [C, B, A]],
    ];
    for (const [answer, expected] of cases) {
      const r = rig({ threshold: 10 }); // a failed address stays closed: one dialled twice would show
      const out = r.call(answer);
      await flushMicrotasks();
      for (let i = 0; i < expected.length; i++) {
        expect(r.dials.length).toBe(i + 1); // one at a time: the next only when this one failed
        await r.settle(r.dials[i]);
      }
      expect(r.order()).toEqual(expected);
      expect(out.state).toBe('err');
      expect(out.value).toBeInstanceOf(AggregateError);
      const agg = out.value as AggregateError;
      expect(agg.errors.map((e: { message: string }) => e.message)).toEqual(expected.map((a) => refused(a).message));
      expect(agg.message).toBe(`connect to ${NAME} failed on each of its ${expected.length} addresses dialled`);
      expect(r.clock.pending).toBe(0);
    }
  });

  it('a fresh address is dialled alone until attemptDelay passes; the first to connect wins, a loser connecting later is closed, and no timer stays armed', async () => {
    const r = rig();
    const out = r.call([A, B, C]);
    await flushMicrotasks();
    await r.clock.tick(249);
    expect(r.order()).toEqual([A]);
    await r.clock.tick(1);
    expect(r.order()).toEqual([A, B]);
    await r.settle(r.dials[1], 'connect');
    expect(out).toMatchObject({ state: 'ok', value: r.dials[1]!.socket });
    await r.settle(r.dials[0], 'connect'); // A connects after B won
    expect(r.dials[0]!.socket.destroyed).toBe(true);
    expect(r.dials[1]!.socket.destroyed).toBe(false);
    expect(r.clock.pending).toBe(0); // neither C's attempt delay nor any dial timeout is left
    await r.clock.tick(5_000);
    expect(r.order()).toEqual([A, B]); // C never dialled
    expect(r.breaker.stats()).toMatchObject({ succeeded: 2, failed: 0 }); // A and B
    expect(r.names.stats()).toMatchObject({ succeeded: 1, failed: 0 }); // the lookup
  });

  it('a loser failing after the winner dials nothing more, and is recorded against its own address only', async () => {
    const r = rig({ threshold: 2 });
    const out = r.call([A, B, C]);
    await flushMicrotasks();
    await r.clock.tick(250);
    await r.settle(r.dials[1], 'connect');
    await r.settle(r.dials[0]); // A fails after the call settled
    await r.clock.tick(5_000);
    expect(out.value).toBe(r.dials[1]!.socket);
    expect(r.order()).toEqual([A, B]);
    expect(r.breaker.state(key(A))?.failures).toBe(1);
    expect(r.names.state(NAME)?.failures).toBe(0);
  });

  it('a failure hands over at once, and the next address then gets its own full attemptDelay', async () => {
    const r = rig();
    r.call([A, B, C]);
    await flushMicrotasks();
    await r.clock.tick(100);
    await r.settle(r.dials[0]); // A refused at t=100: B at once
    expect(r.order()).toEqual([A, B]);
    await r.clock.tick(249); // t=349: A's old attempt delay (due at 250) must not have started C
    expect(r.order()).toEqual([A, B]);
    await r.clock.tick(1); // t=350
    expect(r.order()).toEqual([A, B, C]);
    await r.settle(r.dials[2], 'connect');
    await r.settle(r.dials[1]);
  });

  it('the lookup and the dials share one timeout: an address dialled after a slow lookup gets what is left', async () => {
    const r = rig({ timeout: 1_000 });
    let answer: (() => void) | undefined;
    const out = r.call((cb) => {
      answer = () => cb(null, [{ address: A, family: 4 }]);
    });
    await r.clock.tick(600);
    answer!();
    await flushMicrotasks();
    expect(r.order()).toEqual([A]);
    await r.clock.tick(399);
    expect(out.state).toBe('pending');
    await r.clock.tick(1);
    expect(out.state).toBe('err');
    expect(out.value).toBeInstanceOf(ConnectTimeoutError);
    expect(out.value).toMatchObject({ host: key(A), timeout: 400 });
  });

  it('an address whose turn comes with no time left is not dialled; one with a millisecond left is', async () => {
    const none = rig({ timeout: 250, attemptDelay: 250 });
    const out = none.call([A, B]);
    await flushMicrotasks();
    await none.clock.tick(250);
    expect(none.order()).toEqual([A]);
    expect(out.value).toBeInstanceOf(ConnectTimeoutError); // A's own timeout, alone
    expect(out.value).toMatchObject({ host: key(A) });

    const one = rig({ timeout: 251, attemptDelay: 250 });
    const out2 = one.call([A, B]);
    await flushMicrotasks();
    await one.clock.tick(250);
    expect(one.order()).toEqual([A, B]);
    await one.clock.tick(1);
    expect(out2.value).toBeInstanceOf(AggregateError);
    expect((out2.value as AggregateError).errors.map((e: { host: string; timeout: number }) => [e.host, e.timeout])).toEqual([
      [key(A), 251],
      [key(B), 1],
    ]);
  });
});

describe('per-address racing: probes and suspects', () => {
  it('a probe is dialled beside the next address, and when it is the last hope the call waits for it', async () => {
    const r = rig({ openDuration: 1_000 });
    r.halfOpen(A);
    const out = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B]); // the live address is not held back by the probe ahead of it
    await r.settle(r.dials[1]); // B refused: only the probe is left
    expect(out.state).toBe('pending');
    await r.settle(r.dials[0], 'connect');
    expect(out.value).toBe(r.dials[0]!.socket);
    expect(r.breaker.state(key(A))?.state).toBe('closed');
  });

  it('probes go to one half-open address at a time, even when nothing else is left', async () => {
    const r = rig({ openDuration: 1_000 });
    r.halfOpen(A);
    r.halfOpen(B);
    const out = r.call([A, B]);
    await flushMicrotasks();
    await r.clock.tick(500);
    expect(r.order()).toEqual([A]);
    await r.settle(r.dials[0]); // the first probe failed: the second address's turn
    expect(r.order()).toEqual([A, B]);
    await r.settle(r.dials[1], 'connect');
    expect(out.value).toBe(r.dials[1]!.socket);
    expect(r.breaker.stats().probesGranted).toBe(2);
  });

  it('while a probe is out, another half-open address waits even when a sibling dial ends; a fresh one does not', async () => {
    const r = rig({ openDuration: 1_000 });
    r.halfOpen(A);
    r.halfOpen(C);
    const out = r.call([A, B, C]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B]);
    await r.settle(r.dials[1]); // B refused; A's probe still out: C waits
    expect(r.order()).toEqual([A, B]);
    await r.settle(r.dials[0]); // the probe failed: now C
    expect(r.order()).toEqual([A, B, C]);
    await r.settle(r.dials[2], 'connect');
    expect(out.value).toBe(r.dials[2]!.socket);
  });

  it('a plain dial in flight does not hold back a probe: after attemptDelay the half-open address is probed beside the next one', async () => {
    const r = rig({ openDuration: 1_000 });
    r.halfOpen(B);
    const out = r.call([A, B, C]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A]);
    await r.clock.tick(250);
    expect(r.order()).toEqual([A, B, C]);
    await r.settle(r.dials[2], 'connect');
    expect(out.value).toBe(r.dials[2]!.socket);
    await r.settle(r.dials[0]);
    await r.settle(r.dials[1]);
  });

  it('a suspect (its last dial failed) is dialled beside the next address at once, and again by the next caller once that dial ended', async () => {
    const r = rig({ threshold: 3 });
    r.breaker.admit(key(A)).failed(new Error('timed out'));
    const first = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B]);
    await r.settle(r.dials[0]);
    await r.settle(r.dials[1], 'connect');
    expect(first.value).toBe(r.dials[1]!.socket);
    const second = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B, A, B]);
    await r.settle(r.dials[3], 'connect');
    await r.settle(r.dials[2]);
    expect(second.value).toBe(r.dials[3]!.socket);
  });

  it('an address that failed its first, ordinary dial is a suspect for the next caller: dialled beside the next at once', async () => {
    const r = rig({ threshold: 3 });
    const first = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A]); // fresh: alone
    await r.settle(r.dials[0]);
    await r.settle(r.dials[1], 'connect');
    expect(first.value).toBe(r.dials[1]!.socket);
    const second = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B, A, B]);
    await r.settle(r.dials[3], 'connect');
    await r.settle(r.dials[2]);
    expect(second.state).toBe('ok');
  });

  it("one dial to a suspect at a time: a caller with nothing else left dials it as a last resort (with 1 ms left), and that extra dial's end does not free the slot", async () => {
    const r = rig({ threshold: 5, timeout: 1_000 });
    r.breaker.admit(key(A)).failed(new Error('timed out'));
    const first = r.call([A, B]);
    await flushMicrotasks();
    await r.settle(r.dials[1], 'connect'); // caller 1 served by B; its dial to A still out
    expect(first.state).toBe('ok');
    const second = r.call([A, C]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B, C]); // A passed over: caller 1's dial to it is out
    await r.clock.tick(999);
    await r.settle(r.dials[2]); // C refused with 1 ms left: A as a last resort
    expect(r.order()).toEqual([A, B, C, A]);
    await r.settle(r.dials[3]);
    expect(second.value).toBeInstanceOf(AggregateError);
    const third = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([A, B, C, A, B]); // caller 1's dial to A is still the one out
    await r.settle(r.dials[4], 'connect');
    expect(third.state).toBe('ok');
    await r.settle(r.dials[0]);
  });
});

describe('per-address racing: refusals', () => {
  it("every address open when the name resolves: refused without a dial; the refusal carries each address's, the earliest retryAfter, the fewest failures, and isolated only if all are", async () => {
    const r = rig({ threshold: 2, openDuration: 30_000 });
    const cause = new Error('A is dead');
    r.breaker.admit(key(A)).failed(cause);
    r.clock.advance(1);
    r.breaker.admit(key(A)).failed(cause); // A open at t=1 after 2 rounds, until 30 001
    r.clock.advance(4_999);
    r.breaker.isolate(key(B), 40_000); // until 45 000
    r.clock.advance(1_000); // t=6 000
    const out = r.call([A, B]);
    await flushMicrotasks();
    expect(r.dials).toEqual([]);
    expect(out.value).toBeInstanceOf(HostUnavailableError);
    const refusal = out.value as HostUnavailableError;
    expect(refusal.host).toBe(NAME);
    expect(refusal.addresses?.map((x) => [x.host, x.state, x.failures, x.isolated])).toEqual([
      [key(A), 'open', 2, false],
      [key(B), 'open', 0, true],
    ]);
    expect(refusal).toMatchObject({ state: 'open', failures: 0, isolated: false, retryAfter: 24_001 });
    expect(refusal.cause).toBe(cause); // the first address's
  });

  it('a name whose addresses are all isolated is refused as isolated, until they are released', async () => {
    const r = rig();
    r.breaker.isolate(key(A));
    r.breaker.isolate(key(B));
    const out = r.call([A, B]);
    await flushMicrotasks();
    expect(out.value).toMatchObject({ isolated: true, state: 'open', retryAfter: Number.POSITIVE_INFINITY });
  });

  it("a name is half-open only when each address's probe is out; one address open makes it open", async () => {
    const r = rig({ openDuration: 1_000 });
    r.halfOpen(A);
    r.halfOpen(B);
    const probes = [r.breaker.admit(key(A)), r.breaker.admit(key(B))]; // both probes out
    const both = r.call([A, B]);
    await flushMicrotasks();
    expect(both.value).toMatchObject({ state: 'half-open' });
    r.clock.advance(ADDRESS_RECHECK / 2);
    r.breaker.admit(key(C)).failed(new Error('dead')); // open for 1 000 ms
    r.clock.advance(ADDRESS_RECHECK / 2); // memory stale: resolve again, now with C open
    const mixed = r.call([A, B, C]);
    await flushMicrotasks();
    expect((mixed.value as HostUnavailableError).addresses?.map((x) => x.state)).toEqual(['half-open', 'half-open', 'open']);
    expect(mixed.value).toMatchObject({ state: 'open' });
    for (const p of probes) p.abandoned();
  });

  it('refused from memory: the same refusal object while nothing changed, a new one (the old untouched) once an address changes', async () => {
    // Within REFUSED_RECHECK of the lookup throughout: refused from memory, never looked up again.
    const r = rig({ openDuration: REFUSED_RECHECK / 2 });
    r.breaker.isolate(key(A));
    r.breaker.admit(key(B)).failed(new Error('dead')); // open for half of REFUSED_RECHECK
    const first = r.call([B, A]);
    await flushMicrotasks();
    expect(first.value).toBeInstanceOf(HostUnavailableError);
    const second = r.call([B, A]);
    const third = r.call([B, A]);
    await flushMicrotasks();
    expect(r.lookups()).toBe(1); // the later calls never looked up
    expect(second.value).toBeInstanceOf(HostUnavailableError);
    expect(third.value).toBe(second.value);
    r.clock.advance(REFUSED_RECHECK / 2);
    const probe = r.breaker.admit(key(B)); // someone else's probe to B is out: B is now refused half-open
    const fourth = r.call([B, A]);
    await flushMicrotasks();
    const before = second.value as HostUnavailableError;
    const after = fourth.value as HostUnavailableError;
    expect(after).not.toBe(before);
    expect(before.addresses?.map((x) => [x.host, x.state])).toEqual([[key(B), 'open'], [key(A), 'open']]);
    expect(after.addresses?.map((x) => [x.host, x.state])).toEqual([[key(B), 'half-open'], [key(A), 'open']]);
    expect(after.addresses?.[1]).toBe(before.addresses?.[1]); // A's own refusal, unchanged
    r.breaker.isolate(key(A), 40_000); // now the second address's refusal changes, the first's not
    const fifth = r.call([B, A]);
    await flushMicrotasks();
    const latest = fifth.value as HostUnavailableError;
    expect(latest.addresses?.map((x) => [x.host, x.state, x.isolated])).toEqual([[key(B), 'half-open', false], [key(A), 'open', true]]);
    expect(latest.addresses?.[0]).toBe(after.addresses?.[0]);
    expect(latest.retryAfter).toBe(after.addresses?.[0]?.retryAfter); // B's probe is due first
    expect(after.addresses).toHaveLength(2);
    expect(r.lookups()).toBe(1);
    probe.abandoned();
  });

  it(`memory of a refused name lasts ${REFUSED_RECHECK} ms (REFUSED_RECHECK): refused without a lookup until then, resolved again from then`, async () => {
    const r = rig();
    r.breaker.isolate(key(A));
    const first = r.call([A]);
    await flushMicrotasks();
    expect(first.value).toBeInstanceOf(HostUnavailableError);
    r.clock.advance(REFUSED_RECHECK - 1);
    r.call([A]);
    await flushMicrotasks();
    expect(r.lookups()).toBe(1);
    r.clock.advance(1);
    const late = r.call([A]);
    await flushMicrotasks();
    expect(r.lookups()).toBe(2);
    expect(late.value).toBeInstanceOf(HostUnavailableError);
  });

  it('checking memory grants no probe of its own: a half-open address among open ones is probed once, by the dial', async () => {
    const r = rig({ openDuration: 500 });
    r.breaker.isolate(key(A));
    const first = r.call([A, B]);
    await flushMicrotasks();
    await r.settle(r.dials[0]); // B's dial fails: B open until 500
    expect(first.value).toMatchObject({ code: 'ECONNREFUSED' });
    await r.clock.tick(500);
    const second = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([B, B]);
    await r.settle(r.dials[1], 'connect');
    expect(second.state).toBe('ok');
    expect(r.breaker.stats()).toMatchObject({ probesGranted: 1, abandoned: 0 });
  });

  it('an address the breaker forgot (reset, or evicted) makes the name dialable again: it is dialled, not refused from memory', async () => {
    const r = rig();
    r.breaker.isolate(key(A));
    r.call([A, B]);
    await flushMicrotasks();
    await r.settle(r.dials[0]); // B open: the name would now be refused from memory
    expect(r.breaker.reset(key(B))).toBe(true);
    const again = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([B, B]);
    await r.settle(r.dials[1], 'connect');
    expect(again.state).toBe('ok');
  });

  it('an address whose window ends while the name is refused from memory is dialled by the next call', async () => {
    const r = rig({ openDuration: 500 });
    r.breaker.isolate(key(A));
    r.call([A, B]);
    await flushMicrotasks();
    await r.settle(r.dials[0]); // B open until 500
    await r.clock.tick(100);
    const refusedCall = r.call([A, B]);
    await flushMicrotasks();
    expect(refusedCall.value).toBeInstanceOf(HostUnavailableError);
    await r.clock.tick(400);
    const probing = r.call([A, B]);
    await flushMicrotasks();
    expect(r.order()).toEqual([B, B]);
    await r.settle(r.dials[1], 'connect');
    expect(probing.state).toBe('ok');
    expect(r.breaker.state(key(B))?.state).toBe('closed');
  });

  it('memory is bounded: the 1 024 most recently resolved names are remembered, the oldest is forgotten (resolved again)', async () => {
    const r = rig();
    r.breaker.isolate(key(A));
    const lookup = ((_h: string, _o: unknown, cb: (err: null, list: unknown) => void) => cb(null, [{ address: A, family: 4 }])) as unknown as net.LookupFunction;
    const refuseName = async (name: string): Promise<void> => {
      const refusal = refuseFromMemory(r.breaker, name, r.clock, undefined, { lookup });
      if (refusal !== undefined) return;
      await connectAddresses('x', 80, name, () => Promise.reject(new Error('not dialled')), {
        timeout: 1_000,
        signal: undefined,
        breaker: r.breaker,
        clock: r.clock,
        attemptDelay: 250,
        lookup,
        family: undefined,
        hints: undefined,
      }).catch(() => undefined);
    };
    await refuseName('first.test:80');
    await refuseName('second.test:80');
    expect(refuseFromMemory(r.breaker, 'first.test:80', r.clock, undefined, { lookup })).toBeInstanceOf(HostUnavailableError); // two names: both kept
    for (let i = 0; i < 1_021; i++) await refuseName(`n${i}.test:80`);
    // 1 023 names so far, and one more still fits
    await refuseName('last.test:80');
    expect(refuseFromMemory(r.breaker, 'first.test:80', r.clock, undefined, { lookup })).toBeInstanceOf(HostUnavailableError);
    await refuseName('over.test:80'); // the 1 025th: the oldest (first.test) goes
    expect(refuseFromMemory(r.breaker, 'first.test:80', r.clock, undefined, { lookup })).toBeUndefined();
    expect(refuseFromMemory(r.breaker, 'second.test:80', r.clock, undefined, { lookup })).toBeInstanceOf(HostUnavailableError);
    expect(refuseFromMemory(r.breaker, 'over.test:80', r.clock, undefined, { lookup })).toBeInstanceOf(HostUnavailableError);
  });
});

describe('per-address racing: the lookup', () => {
  it('the lookup is asked for every address, family 0 and no hints by default; family and hints are passed when given', async () => {
    const seen: unknown[] = [];
    const r = rig();
    const answer = (cb: (err: Error | null, a?: unknown) => void, options: unknown): void => {
      seen.push(options);
      queueMicrotask(() => cb(null, [{ address: A, family: 4 }]));
    };
    r.call(answer);
    r.call(answer, { family: 6, hints: 32 });
    await flushMicrotasks();
    expect(seen).toStrictEqual([
      { all: true, family: 0 },
      { all: true, family: 6, hints: 32 },
    ]);
    for (const d of r.dials) d.connect();
  });

  it('a user lookup that ignores `all` and answers one address is respected', async () => {
    const r = rig();
    const out = r.call((cb) => queueMicrotask(() => cb(null, B, 4)));
    await flushMicrotasks();
    expect(r.order()).toEqual([B]);
    await r.settle(r.dials[0], 'connect');
    expect(out.state).toBe('ok');
  });

  it('answers that are not IP addresses are dropped; none left is ENOTFOUND for the name, counted against it', async () => {
    const r = rig({ threshold: 5 });
    const out = r.call((cb) => queueMicrotask(() => cb(null, [null, { address: 'not-an-ip', family: 4 }, { address: B, family: 4 }])));
    await flushMicrotasks();
    expect(r.order()).toEqual([B]);
    await r.settle(r.dials[0], 'connect');
    expect(out.state).toBe('ok');
    for (const nothing of [[], undefined, [{ address: 'still-a-name', family: 4 }]]) {
      const none = r.call((cb) => queueMicrotask(() => cb(null, nothing)));
      await flushMicrotasks();
      expect(none.value).toBeInstanceOf(Error);
      expect(none.value).toMatchObject({ message: 'svc.test resolved to no address', code: 'ENOTFOUND', hostname: 'svc.test' });
    }
    expect(r.names.state(NAME)?.failures).toBe(3); // each failed lookup is a failed dial of the name
    expect(r.order()).toEqual([B]);
  });

  it('at most 64 addresses of a name are used', async () => {
    const r = rig();
    const many = Array.from({ length: 70 }, (_, i) => `127.0.1.${i + 1}`);
    for (const a of many) r.breaker.isolate(key(a));
    const out = r.call(many);
    await flushMicrotasks();
    expect((out.value as HostUnavailableError).addresses?.map((x) => x.host)).toEqual(many.slice(0, 64).map(key));
  });
});

describe('per-address racing: the caller leaving, and late dials', () => {
  it("a caller aborting mid-race gets its reason at once; the dial out is abandoned (never counted) and the caller's signal keeps no listener", async () => {
    const r = rig();
    const ac = new AbortController();
    const out = r.call([A, B], { signal: ac.signal });
    await flushMicrotasks();
    expect(r.order()).toEqual([A]);
    const reason = new Error('client went away');
    ac.abort(reason);
    await flushMicrotasks();
    expect(out.value).toBe(reason);
    expect(r.dials[0]!.ctx.signal.aborted).toBe(true);
    expect(r.breaker.state(key(A))?.failures).toBe(0);
    expect(r.breaker.stats().abandoned).toBe(1);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    await r.clock.tick(5_000);
    expect(r.order()).toEqual([A]);
  });

  it("a call that connected leaves no listener on the caller's signal, and a later abort touches nothing", async () => {
    const r = rig();
    const ac = new AbortController();
    const out = r.call([A, B], { signal: ac.signal });
    await flushMicrotasks();
    await r.clock.tick(250);
    await r.settle(r.dials[1], 'connect');
    expect(out.value).toBe(r.dials[1]!.socket);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    ac.abort(new Error('late'));
    await r.settle(r.dials[0], 'connect'); // the loser still runs to its end: recorded, then closed
    expect(r.dials[0]!.socket.destroyed).toBe(true);
    expect(r.breaker.stats()).toMatchObject({ succeeded: 2, abandoned: 0 }); // A and B
    expect(r.names.stats()).toMatchObject({ succeeded: 1, abandoned: 0 }); // the lookup
  });

  it('a caller who aborts just as the lookup answers gets its reason, and no address is dialled', async () => {
    const r = rig();
    const ac = new AbortController();
    const reason = new Error('gone');
    const out = r.call(
      (cb) =>
        queueMicrotask(() => {
          cb(null, [{ address: A, family: 4 }]);
          queueMicrotask(() => ac.abort(reason)); // after the lookup's dial settled, before the race starts
        }),
      { signal: ac.signal },
    );
    await flushMicrotasks();
    expect(out.value).toBe(reason);
    expect(r.dials).toEqual([]);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });

  it('a dial given up at its timeout that connects later has its socket closed', async () => {
    const r = rig({ timeout: 300, ignoreAbort: true });
    const out = r.call([A]);
    await flushMicrotasks();
    await r.clock.tick(300);
    expect(out.value).toBeInstanceOf(ConnectTimeoutError);
    await r.settle(r.dials[0], 'connect');
    expect(r.dials[0]!.socket.destroyed).toBe(true);
  });
});

describe('per-address racing: no time left', () => {
  it("a lookup that used up the caller's timeout: no address is dialled, and the timeout error names the name, the caller's whole bound and phase 'lookup'", async () => {
    // A clock that moves a little at every reading, as a real one does between two lines of code.
    const manual = new ManualClock();
    let drift = 0;
    const clock = {
      now: () => manual.now() + (drift += 0.25),
      setTimeout: (cb: () => void, ms: number) => manual.setTimeout(cb, ms),
      clearTimeout: (h: ReturnType<ManualClock['setTimeout']>) => manual.clearTimeout(h),
    };
    const breaker = new HostBreaker({ clock: manual, failureThreshold: 1, minOutage: 0 });
    const opened: string[] = [];
    const lookup = ((_h: string, _o: unknown, cb: (err: null, list: unknown) => void) => {
      manual.advance(999); // the resolver took 999 of the 1 000 ms
      cb(null, [{ address: A, family: 4 }]);
    }) as unknown as net.LookupFunction;
    const err = await connectAddresses('svc.test', 80, NAME, (address) => {
      opened.push(address);
      return new Promise<net.Socket>(() => {});
    }, { timeout: 1_000, signal: undefined, breaker, clock, attemptDelay: 250, lookup, family: undefined, hints: undefined }).catch((e: unknown) => e);
    expect(opened).toEqual([]);
    expect(err).toBeInstanceOf(ConnectTimeoutError);
    // The time went to the lookup, not to a TCP connect (none was started): it used to say 'tcp'.
    expect(err).toMatchObject({ host: NAME, timeout: 1_000, phase: 'lookup' });
    expect(manual.pending).toBe(0);
  });
});
