import diagnosticsChannel from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { leftHostRefusing } from '../../src/core/classify.js';
import { ConnectTimeoutError, HostUnavailableError } from '../../src/core/errors.js';
import { type DialContext, type DialEvents, dial, sharedBreaker } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';

const H = 'db-1:5432';

/** An establishment the test finishes by hand. */
function deferred<C>(): {
  establish: (ctx: DialContext) => Promise<C>;
  calls: DialContext[];
  resolve: (c: C) => void;
  reject: (e: unknown) => void;
} {
  const calls: DialContext[] = [];
  let resolve!: (c: C) => void;
  let reject!: (e: unknown) => void;
  const establish = (ctx: DialContext): Promise<C> => {
    calls.push(ctx);
    return new Promise<C>((res, rej) => {
      resolve = res;
      reject = rej;
    });
  };
  return { establish, calls, resolve: (c) => resolve(c), reject: (e) => reject(e) };
}

function setup(threshold = 3): { clock: ManualClock; breaker: HostBreaker } {
  const clock = new ManualClock();
  return { clock, breaker: new HostBreaker({ clock, failureThreshold: threshold, minOutage: 0 }) };
}

describe('dial', () => {
  it('resolves with the connection and records a success', async () => {
    const { clock, breaker } = setup();
    breaker.admit(H).failed();
    const d = deferred<string>();
    const p = dial(H, d.establish, { clock, breaker, timeout: 1_000 });
    d.resolve('conn');
    await expect(p).resolves.toBe('conn');
    expect(breaker.state(H)?.failures).toBe(0);
    expect(clock.pending).toBe(0); // the timeout timer is gone
  });

  it('bounds the whole establishment: times out naming the stalled phase, aborts it, counts a failure', async () => {
    const { clock, breaker } = setup();
    const d = deferred<string>();
    const p = dial(H, d.establish, { clock, breaker, timeout: 2_000 });
    d.calls[0]!.phase = 'tls';
    clock.advance(1_999);
    expect(d.calls[0]!.signal.aborted).toBe(false);
    clock.advance(1);
    const err = await p.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectTimeoutError);
    expect(err).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', host: H, timeout: 2_000, phase: 'tls' });
    expect(d.calls[0]!.signal.aborted).toBe(true);
    expect(d.calls[0]!.signal.reason).toBe(err);
    expect(breaker.state(H)?.failures).toBe(1);
  });

  it('closes a connection that arrives after the timeout instead of leaking it', async () => {
    const { clock, breaker } = setup();
    const d = deferred<{ closed: boolean }>();
    const disposed: unknown[] = [];
    const p = dial(H, d.establish, { clock, breaker, timeout: 100, dispose: (c) => disposed.push(c) });
    clock.advance(100);
    await expect(p).rejects.toBeInstanceOf(ConnectTimeoutError);
    const late = { closed: false };
    d.resolve(late);
    await flushMicrotasks();
    expect(disposed).toEqual([late]);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 0 });
  });

  it("rejects with the caller's reason on abort and never counts it against the host", async () => {
    const { clock, breaker } = setup(1);
    for (let i = 0; i < 3; i++) {
      const controller = new AbortController();
      const d = deferred<string>();
      const p = dial(H, d.establish, { clock, breaker, timeout: 1_000, signal: controller.signal });
      const reason = new Error(`caller gave up ${i}`);
      controller.abort(reason);
      await expect(p).rejects.toBe(reason);
      expect(d.calls[0]!.signal.aborted).toBe(true);
    }
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats().abandoned).toBe(3);
    expect(clock.pending).toBe(0);
  });

  it('an already-aborted signal never starts the dial', async () => {
    const { clock, breaker } = setup();
    const d = deferred<string>();
    const controller = new AbortController();
    controller.abort(new Error('before'));
    await expect(dial(H, d.establish, { clock, breaker, signal: controller.signal })).rejects.toThrow('before');
    expect(d.calls).toHaveLength(0);
    expect(breaker.stats().abandoned).toBe(1);
  });

  it("counts establish's own error as a failed dial and passes it through; a synchronous throw (before any I/O) counts for nothing", async () => {
    const { clock, breaker } = setup();
    const boom = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    await expect(dial(H, () => Promise.reject(boom), { clock, breaker })).rejects.toBe(boom);
    const setupError = new TypeError('The "options.key" property must be a string');
    await expect(
      dial(
        H,
        () => {
          throw setupError; // this process's own setup: nothing reached the host
        },
        { clock, breaker },
      ),
    ).rejects.toBe(setupError);
    expect(breaker.state(H)?.failures).toBe(1);
    expect(breaker.stats().abandoned).toBe(1);
  });

  it('a refused host never reaches establish: no I/O at all', async () => {
    const { clock, breaker } = setup(1);
    await expect(dial(H, () => Promise.reject(new Error('x')), { clock, breaker })).rejects.toThrow('x');
    let calls = 0;
    const establish = (): Promise<never> => {
      calls++;
      return Promise.reject(new Error('should not run'));
    };
    for (let i = 0; i < 100; i++) {
      await expect(dial(H, establish, { clock, breaker })).rejects.toBeInstanceOf(HostUnavailableError);
    }
    expect(calls).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('breaker: null dials without one', async () => {
    const { clock } = setup();
    for (let i = 0; i < 5; i++) {
      await expect(dial(H, () => Promise.reject(new Error('down')), { clock, breaker: null })).rejects.toThrow('down');
    }
    await expect(dial(H, () => Promise.resolve(1), { clock, breaker: null })).resolves.toBe(1);
  });

  it('rejects a bad timeout naming it', async () => {
    const { clock, breaker } = setup();
    await expect(dial(H, () => Promise.resolve(1), { clock, breaker, timeout: 0 })).rejects.toThrow(/timeout.*0/);
    await expect(dial(H, () => Promise.resolve(1), { clock, breaker, timeout: Number.NaN })).rejects.toThrow(RangeError);
  });
});

describe('dial: a failure after which its host is refused says so (leftHostRefusing)', () => {
  const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });

  it('the failure that opens the host, and a probe that fails, are marked; one that leaves it closed is not', async () => {
    const { clock, breaker } = setup(2);
    const errors = [refused(), refused(), refused()];
    for (const err of errors.slice(0, 2)) await dial(H, () => Promise.reject(err), { clock, breaker, timeout: 1_000 }).catch(() => undefined);
    expect(errors.slice(0, 2).map(leftHostRefusing)).toEqual([false, true]); // the first left it closed; the second opened it
    clock.advance(breaker.state(H)!.retryAfter); // the window is over: the next dial is the probe
    await dial(H, () => Promise.reject(errors[2]), { clock, breaker, timeout: 1_000 }).catch(() => undefined);
    expect(leftHostRefusing(errors[2])).toBe(true);
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 2 });
  });

  it('a timeout that opens the host is marked; a failure that proves the host alive, or with no breaker, is not', async () => {
    const { clock, breaker } = setup(1);
    const p = dial(H, deferred<string>().establish, { clock, breaker, timeout: 100 });
    clock.advance(100);
    expect(leftHostRefusing(await p.catch((e: unknown) => e))).toBe(true);
    const other = setup(1);
    const alive = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    await dial(H, () => Promise.reject(alive), { clock: other.clock, breaker: other.breaker, timeout: 1_000 }).catch(() => undefined);
    expect(leftHostRefusing(alive)).toBe(false);
    expect(other.breaker.state(H)?.state).toBe('closed');
    const unguarded = refused();
    await dial(H, () => Promise.reject(unguarded), { clock, breaker: null, timeout: 1_000 }).catch(() => undefined);
    expect(leftHostRefusing(unguarded)).toBe(false);
  });
});

describe('dial: a signal that is not one', () => {
  it('the AbortController itself, passed for its signal, rejects at once naming it: no dial, no timer, no probe taken', async () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: 1_000 });
    breaker.admit(H).failed();
    clock.advance(1_000); // the window is over: the next admit would be the probe
    let dialled = 0;
    const bad = dial(H, () => Promise.resolve(++dialled), { clock, breaker, signal: new AbortController() as unknown as AbortSignal });
    await expect(bad).rejects.toThrow(/signal must be an AbortSignal, got/);
    expect(dialled).toBe(0);
    expect(clock.pending).toBe(0); // it crashed the process from its timer, 2.5 s later
    expect(() => clock.advance(10_000)).not.toThrow();
    expect(breaker.state(H)).toMatchObject({ state: 'half-open', probing: false }); // the probe is still there to take
    // A signal-like (a polyfill) that cannot be listened to: rejected with its own error, no timer, no probe taken.
    const deaf = { aborted: false, addEventListener: () => { throw new TypeError('no listeners here'); }, removeEventListener: () => {} };
    await expect(dial(H, () => Promise.resolve(++dialled), { clock, breaker, signal: deaf as unknown as AbortSignal })).rejects.toThrow('no listeners here');
    expect(dialled).toBe(0);
    expect(clock.pending).toBe(0);
    expect(breaker.state(H)).toMatchObject({ state: 'half-open', probing: false });
    // null is no signal, as fetch takes it.
    await expect(dial(H, () => Promise.resolve('conn'), { clock, breaker, signal: null as unknown as AbortSignal })).resolves.toBe('conn');
  });
});

describe('dial: what it reports and what it leaves behind', () => {
  const seen: Array<DialEvents['settled']> = [];
  const onSettled = (e: unknown): void => {
    seen.push(e as DialEvents['settled']);
  };
  const watch = (): void => {
    seen.length = 0;
    diagnosticsChannel.subscribe('dialguard:dial:settled', onSettled);
  };
  afterEach(() => {
    diagnosticsChannel.unsubscribe('dialguard:dial:settled', onSettled);
  });

  it('publishes one settled event per admitted dial, with its outcome, duration and phase', async () => {
    const { clock, breaker } = setup();
    watch();
    const ok = deferred<string>();
    const p1 = dial(H, ok.establish, { clock, breaker, timeout: 1_000 });
    ok.calls[0]!.phase = 'handshake';
    clock.advance(40);
    ok.resolve('conn');
    await p1;
    const slow = deferred<string>();
    const p2 = dial(H, slow.establish, { clock, breaker, timeout: 300 });
    slow.calls[0]!.phase = 'tls';
    clock.advance(300);
    await expect(p2).rejects.toBeInstanceOf(ConnectTimeoutError);
    const controller = new AbortController();
    const p3 = dial(H, deferred<string>().establish, { clock, breaker, signal: controller.signal });
    clock.advance(7);
    controller.abort(new Error('gave up'));
    await expect(p3).rejects.toThrow('gave up');
    await expect(dial(H, () => Promise.reject(new Error('refused')), { clock, breaker })).rejects.toThrow('refused');
    expect(seen).toEqual([
      { host: H, outcome: 'succeeded', duration: 40, phase: 'handshake' },
      { host: H, outcome: 'failed', duration: 300, phase: 'tls' },
      { host: H, outcome: 'abandoned', duration: 7, phase: 'tcp' },
      { host: H, outcome: 'failed', duration: 0, phase: 'tcp' },
    ]);
  });

  it('a late failure after the timeout is neither reported nor counted twice', async () => {
    const { clock, breaker } = setup();
    watch();
    const d = deferred<string>();
    const p = dial(H, d.establish, { clock, breaker, timeout: 100 });
    clock.advance(100);
    await expect(p).rejects.toBeInstanceOf(ConnectTimeoutError);
    d.reject(new Error('late reset'));
    await flushMicrotasks();
    expect(seen.map((e) => e.outcome)).toEqual(['failed']);
    expect(breaker.stats()).toMatchObject({ failed: 1 });
  });

  it('a late connection without dispose is dropped quietly', async () => {
    const { clock, breaker } = setup();
    const d = deferred<string>();
    const p = dial(H, d.establish, { clock, breaker, timeout: 100 });
    clock.advance(100);
    await expect(p).rejects.toBeInstanceOf(ConnectTimeoutError);
    d.resolve('late'); // no dispose given: nothing to call, and nothing thrown into the void
    await flushMicrotasks();
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 0 });
  });

  it("leaves no listener on the caller's signal, whatever the outcome", async () => {
    const { clock, breaker } = setup(10);
    const signal = new AbortController().signal;
    await dial(H, () => Promise.resolve(1), { clock, breaker, signal });
    await expect(dial(H, () => Promise.reject(new Error('down')), { clock, breaker, signal })).rejects.toThrow('down');
    const p = dial(H, deferred<number>().establish, { clock, breaker, signal, timeout: 50 });
    expect(getEventListeners(signal, 'abort')).toHaveLength(1); // watched while the dial runs
    clock.advance(50);
    await expect(p).rejects.toBeInstanceOf(ConnectTimeoutError);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('dials given no breaker share one per process, and learn in it', async () => {
    expect(sharedBreaker()).toBe(sharedBreaker());
    const host = `shared-${process.pid}.test:1`;
    await expect(dial(host, () => Promise.reject(new Error('down')))).rejects.toThrow('down');
    expect(sharedBreaker().state(host)?.failures).toBe(1);
    await dial(host, () => Promise.resolve(1));
    expect(sharedBreaker().state(host)?.failures).toBe(0);
  });
});

describe('dial: the phase tells the permit the host was reached', () => {
  it("ctx.phase moving past 'tcp' calls permit.progressed(), once per change; 'lookup' and 'tcp' do not", async () => {
    const { clock, breaker } = setup();
    const d = deferred<string>();
    const done = dial(H, d.establish, { breaker, clock });
    const ctx = d.calls[0]!;
    let progressed = 0;
    const real = ctx.permit.progressed.bind(ctx.permit);
    (ctx.permit as { progressed: () => void }).progressed = () => {
      progressed++;
      real();
    };
    ctx.phase = 'lookup';
    ctx.phase = 'tcp';
    expect(progressed).toBe(0);
    expect(ctx.phase).toBe('tcp');
    ctx.phase = 'tls';
    ctx.phase = 'handshake';
    expect([progressed, ctx.phase]).toEqual([2, 'handshake']);
    d.resolve('conn');
    await expect(done).resolves.toBe('conn');
  });

  it('a trial whose dial reached its host lets the callers of its transport join past TRIAL_GRACE (a slow handshake had them refused)', async () => {
    const { clock, breaker } = setup();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    const d = deferred<string>();
    const trial = dial(H, d.establish, { breaker, clock, transport: 'tls:good.example', timeout: 60_000 });
    d.calls[0]!.phase = 'tls';
    clock.advance(300);
    const joined = breaker.tryAdmit(H, undefined, 'tls:good.example');
    expect(joined).not.toBeInstanceOf(HostUnavailableError);
    (joined as { abandoned(): void }).abandoned();
    d.resolve('conn');
    await expect(trial).resolves.toBe('conn');
    expect(breaker.state(H)?.state).toBe('closed');
  });
});
