/**
 * What the gRPC adapter needs from per-address guarding beyond sockets, with no I/O: a manual
 * clock, a list lookup and connections that are plain objects settled by the clock.
 * - `connectAddresses` over any connection type: the winner is handed back, a loser that connects
 *   after it goes to the caller's `dispose` (a channel is closed, not `destroy()`ed);
 * - `addressesRetryAfter`: how long until a name may be dialled, read without admitting anything:
 *   0 unless every address it last resolved to (within ADDRESS_RECHECK) is refused now.
 */
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { leftHostRefusing } from '../../src/core/classify.js';
import { ADDRESS_RECHECK, addressesRetryAfter, connectAddresses } from '../../src/guard/addresses.js';
import type { DialContext } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock, flushMicrotasks } from '../../src/testing/manual-clock.js';

interface Conn {
  readonly address: string;
  disposed: boolean;
}

const NAME = 'svc.test:7';

function setup(addresses: string[], openDuration = 30_000): { clock: ManualClock; breaker: HostBreaker; lookup: net.LookupFunction } {
  const clock = new ManualClock(1_000);
  const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration });
  const lookup = ((_h: string, _o: unknown, cb: (err: null, list: Array<{ address: string; family: number }>) => void) =>
    queueMicrotask(() => cb(null, addresses.map((address) => ({ address, family: 4 }))))) as unknown as net.LookupFunction;
  return { clock, breaker, lookup };
}

function options(clock: ManualClock, breaker: HostBreaker, lookup: net.LookupFunction) {
  return { timeout: 5_000, signal: undefined, breaker, clock, attemptDelay: 100, lookup, family: undefined, hints: undefined };
}

/** An open() whose connection to each address settles after `after[address]` ms (a string: fails with that code). */
function opener(clock: ManualClock, after: Record<string, number | string>): (address: string, ctx: DialContext) => Promise<Conn> {
  return (address) =>
    new Promise<Conn>((resolve, reject) => {
      const plan = after[address]!;
      if (typeof plan === 'string') queueMicrotask(() => reject(Object.assign(new Error(`connect ${plan} ${address}:7`), { code: plan })));
      else clock.setTimeout(() => resolve({ address, disposed: false }), plan);
    });
}

describe('connectAddresses over any connection type', () => {
  it('the first to connect wins; a loser that connects later goes to dispose, once', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const disposed: Conn[] = [];
    const won = connectAddresses<Conn>('svc.test', 7, NAME, opener(clock, { '127.0.0.2': 400, '127.0.0.3': 50 }), options(clock, breaker, lookup), (c) => {
      c.disposed = true;
      disposed.push(c);
    });
    await clock.tick(150); // .2 still out after the attempt delay (100): .3 joins and wins at 150
    expect((await won).address).toBe('127.0.0.3');
    expect(disposed).toEqual([]);
    await clock.tick(300); // .2 connects at 400: recorded, then disposed
    expect(disposed.map((c) => c.address)).toEqual(['127.0.0.2']);
    expect(breaker.state('127.0.0.2:7')?.state).toBe('closed');
  });
});

describe('connectAddresses: a name left refused says so (leftHostRefusing)', () => {
  it('each address dialled failing and opening: the AggregateError is marked; one of them still closed: it is not', async () => {
    const opened = setup(['127.0.0.2', '127.0.0.3']);
    const both = await connectAddresses<Conn>('svc.test', 7, NAME, opener(opened.clock, { '127.0.0.2': 'ECONNREFUSED', '127.0.0.3': 'ECONNREFUSED' }), options(opened.clock, opened.breaker, opened.lookup)).catch((e: unknown) => e);
    expect(both).toBeInstanceOf(AggregateError);
    expect(leftHostRefusing(both)).toBe(true);
    // A threshold of 2: each address failed once and stays closed, so the name is not refused.
    const closed = setup(['127.0.0.2', '127.0.0.3']);
    const breaker = new HostBreaker({ clock: closed.clock, failureThreshold: 2, minOutage: 0 });
    const neither = await connectAddresses<Conn>('svc.test', 7, NAME, opener(closed.clock, { '127.0.0.2': 'ECONNREFUSED', '127.0.0.3': 'ECONNREFUSED' }), options(closed.clock, breaker, closed.lookup)).catch((e: unknown) => e);
    expect(neither).toBeInstanceOf(AggregateError);
    expect(leftHostRefusing(neither)).toBe(false);
    // One address opened (a threshold of 1 for .2 only, by a failure before), the other not.
    const half = setup(['127.0.0.2', '127.0.0.3']);
    const mixed = new HostBreaker({ clock: half.clock, failureThreshold: 2, minOutage: 0 });
    mixed.admit('127.0.0.2:7').failed();
    const one = await connectAddresses<Conn>('svc.test', 7, NAME, opener(half.clock, { '127.0.0.2': 'ECONNREFUSED', '127.0.0.3': 'ECONNREFUSED' }), options(half.clock, mixed, half.lookup)).catch((e: unknown) => e);
    expect(one).toBeInstanceOf(AggregateError);
    expect((one as AggregateError).errors.map(leftHostRefusing)).toEqual([true, false]);
    expect(leftHostRefusing(one)).toBe(false);
  });
});

describe('addressesRetryAfter', () => {
  it('0 for a name never resolved', () => {
    const { clock, breaker, lookup } = setup([]);
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(0);
  });

  it('every address open: the earliest window; 0 once one is reset; 0 once the memory is older than ADDRESS_RECHECK', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const failed = connectAddresses<Conn>('svc.test', 7, NAME, opener(clock, { '127.0.0.2': 'ECONNREFUSED', '127.0.0.3': 'ECONNREFUSED' }), options(clock, breaker, lookup));
    await expect(failed).rejects.toBeInstanceOf(AggregateError);
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(30_000);
    clock.advance(200);
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(29_800);
    // Reading admitted nothing and counted nothing.
    expect(breaker.stats().refused).toBe(0);
    breaker.reset('127.0.0.3:7');
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(0);
    breaker.isolate('127.0.0.3:7');
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(29_800);
    clock.advance(ADDRESS_RECHECK);
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(0); // a connect would look the name up again
  });

  it('every address isolated until released: Infinity; released, 0', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const failed = connectAddresses<Conn>('svc.test', 7, NAME, opener(clock, { '127.0.0.2': 'ECONNREFUSED', '127.0.0.3': 'ECONNREFUSED' }), options(clock, breaker, lookup));
    await expect(failed).rejects.toBeInstanceOf(AggregateError);
    const release = [breaker.isolate('127.0.0.2:7'), breaker.isolate('127.0.0.3:7')];
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(Infinity);
    for (const r of release) r();
    // Released: fresh and closed, so dialable.
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(0);
  });

  it('a probe out on the last half-open address keeps the name refused until the probe is due back', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2'], 500);
    const failed = connectAddresses<Conn>('svc.test', 7, NAME, opener(clock, { '127.0.0.2': 'ECONNREFUSED' }), options(clock, breaker, lookup));
    await expect(failed).rejects.toBeInstanceOf(Error);
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(500);
    clock.advance(500); // window over, memory still fresh: half-open, no probe out
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(0);
    const permit = breaker.tryAdmit('127.0.0.2:7');
    expect(permit).not.toBeInstanceOf(Error);
    const wait = addressesRetryAfter(breaker, NAME, clock, undefined, { lookup });
    expect(wait).toBe(breaker.state('127.0.0.2:7')!.retryAfter); // the probe's bound
    expect(wait).toBeGreaterThan(0);
    (permit as { abandoned: () => void }).abandoned();
    expect(addressesRetryAfter(breaker, NAME, clock, undefined, { lookup })).toBe(0);
    await flushMicrotasks();
  });
});

describe('an address whose dial is out past the attempt delay (a blackhole while its first dial runs)', () => {
  /** An opener that records each address it dials. */
  const counting = (clock: ManualClock, after: Record<string, number | string>, dials: string[]) => {
    const open = opener(clock, after);
    return (address: string, ctx: DialContext): Promise<Conn> => {
      dials.push(address);
      return open(address, ctx);
    };
  };

  it("a later caller dials the others first and that one not at all: no attempt delay, no second SYN (it cost each call 100 ms and a dial until the first one's timeout)", async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const dials: string[] = [];
    const open = counting(clock, { '127.0.0.2': 4_000, '127.0.0.3': 10 }, dials); // .2 swallows SYNs until 4 s
    const disposed: Conn[] = [];
    const dispose = (c: Conn): void => void disposed.push(c);
    const first = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), dispose);
    await clock.tick(110); // .2 out, .3 dialled at 100, connected at 110
    expect((await first).address).toBe('127.0.0.3');
    await clock.tick(190); // 300 ms: .2's first dial still out
    const t0 = clock.now();
    let at: number | undefined;
    const second = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), dispose).then((c) => {
      at = clock.now() - t0;
      return c;
    });
    await clock.tick(10);
    expect(at).toBe(10); // was 110: the attempt delay behind .2 again
    expect((await second).address).toBe('127.0.0.3');
    expect(dials).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.3']); // was .2 dialled twice
    await clock.tick(4_000); // .2's dial ends: connected late, disposed
    expect(disposed.map((c) => c.address)).toEqual(['127.0.0.2']);
  });

  it('it keeps a turn of its own after the others: a live but slow address beside an accept-and-hold one still serves every call (put last with no turn, it failed calls)', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const dials: string[] = [];
    const open = counting(clock, { '127.0.0.2': 400, '127.0.0.3': 60_000 }, dials); // .2: a 400 ms handshake; .3 holds
    const first = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(150); // .2 out 150 ms (past the 100 ms attempt delay), .3 out 50 ms
    const second = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(600);
    expect([(await first).address, (await second).address]).toEqual(['127.0.0.2', '127.0.0.2']);
    expect(dials).toEqual(['127.0.0.2', '127.0.0.3', '127.0.0.3', '127.0.0.2']); // .3 first, then .2 in its own turn
  });

  it('a live address under steady load (a dial always out, each connecting) is not taken for slow', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const dials: string[] = [];
    const open = counting(clock, { '127.0.0.2': 80, '127.0.0.3': 10 }, dials);
    const calls: Promise<Conn>[] = [];
    for (let i = 0; i < 10; i++) {
      calls.push(connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {}));
      await clock.tick(50); // a new call every 50 ms: .2 always has a dial out, one of them connecting every 50 ms
    }
    await clock.tick(100);
    expect((await Promise.all(calls)).map((c) => c.address)).toEqual(Array(10).fill('127.0.0.2'));
    expect(dials).toEqual(Array(10).fill('127.0.0.2'));
  });

  it('nothing else left: it is dialled after all', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2']);
    const dials: string[] = [];
    const open = counting(clock, { '127.0.0.2': 500 }, dials);
    const first = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(300);
    const second = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(600);
    expect([(await first).address, (await second).address]).toEqual(['127.0.0.2', '127.0.0.2']);
    expect(dials).toEqual(['127.0.0.2', '127.0.0.2']);
  });
});

describe('a dial whose TCP connected, its handshake under way (HANDSHAKE_PATIENCE)', () => {
  /** When each address's TCP connects and its handshake ends (`hold`: never); read at each dial, so a test may change it. */
  type Plan = Record<string, { tcp: number; done: number | 'hold' | 'refused' }>;
  /** An opener that records each address it dials and moves `ctx.phase` to `tls` when its TCP connects. */
  const phased = (clock: ManualClock, plan: Plan, dials: string[]) => (address: string, ctx: DialContext): Promise<Conn> => {
    dials.push(address);
    const { tcp, done } = plan[address]!;
    return new Promise<Conn>((resolve, reject) => {
      if (done === 'refused') return queueMicrotask(() => reject(Object.assign(new Error(`connect ECONNREFUSED ${address}:7`), { code: 'ECONNREFUSED' })));
      clock.setTimeout(() => {
        ctx.phase = 'tls';
      }, tcp);
      if (done !== 'hold') clock.setTimeout(() => resolve({ address, disposed: false }), done);
    });
  };
  /** `addresses` on a manual clock, each connecting in 10 ms until a test changes its plan; `call()` starts one connect. */
  const racing = (addresses: string[], lookupOf?: net.LookupFunction) => {
    const { clock, breaker, lookup } = setup(addresses);
    const dials: string[] = [];
    const plan: Plan = Object.fromEntries(addresses.map((a) => [a, { tcp: 5, done: 10 }]));
    const open = phased(clock, plan, dials);
    const call = (): Promise<Conn> => connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookupOf ?? lookup), () => {});
    return { clock, dials, plan, call };
  };
  /** {@link racing}, once a first call was served by the first address (proven live), its dials forgotten. */
  const proven = async (addresses: string[]) => {
    const race = racing(addresses);
    const first = race.call();
    await race.clock.tick(10);
    expect((await first).address).toBe(addresses[0]);
    race.dials.length = 0;
    return race;
  };

  it('an address proven live is waited on: a handshake slower than the attempt delay costs no second dial (every call dialled both)', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const dials: string[] = [];
    const open = phased(clock, { '127.0.0.2': { tcp: 5, done: 300 }, '127.0.0.3': { tcp: 5, done: 300 } }, dials);
    const first = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(300); // not proven yet: .3 joined at 100, as happy eyeballs does; .2 connects first, at 300
    expect((await first).address).toBe('127.0.0.2');
    expect(dials).toEqual(['127.0.0.2', '127.0.0.3']);
    await clock.tick(200); // .3's dial ends too: both are proven now
    dials.length = 0;
    const t0 = clock.now();
    const second = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(300);
    expect((await second).address).toBe('127.0.0.2');
    expect(clock.now() - t0).toBe(300);
    expect(dials).toEqual(['127.0.0.2']); // was .3 as well, at 100 ms: a second TCP connection and handshake
  });

  it('an address proven live that now accepts and holds: the next joins after HANDSHAKE_PATIENCE attempt delays, and later callers dial it last', async () => {
    const { clock, dials, plan, call } = await proven(['127.0.0.2', '127.0.0.3']);
    plan['127.0.0.2'] = { tcp: 5, done: 'hold' }; // its process hangs: the kernel still accepts
    let at: number | undefined;
    const t0 = clock.now();
    const second = call().then((c) => {
      at = clock.now() - t0;
      return c;
    });
    await clock.tick(399);
    expect(dials).toEqual(['127.0.0.2']); // waited on: 4 attempt delays of 100 ms
    await clock.tick(11);
    expect(at).toBe(410);
    expect((await second).address).toBe('127.0.0.3');
    dials.length = 0;
    const third = call();
    await clock.tick(10);
    expect((await third).address).toBe('127.0.0.3'); // .2's dial out 410 ms with none connecting: it goes last
    expect(dials).toEqual(['127.0.0.3']);
  });

  it('an address proven live that stops answering SYNs gets company after one attempt delay, and a later caller dials it last after one too', async () => {
    const { clock, dials, plan, call } = await proven(['127.0.0.2', '127.0.0.3']);
    plan['127.0.0.2'] = { tcp: 60_000, done: 'hold' }; // blackholed: its TCP never connects
    const t0 = clock.now();
    const second = call();
    await clock.tick(110);
    expect((await second).address).toBe('127.0.0.3');
    expect(clock.now() - t0).toBe(110); // proven, but its TCP never came up: one attempt delay
    await clock.tick(40); // .2's dial out 150 ms, not reached
    dials.length = 0;
    const third = call();
    await clock.tick(10);
    expect((await third).address).toBe('127.0.0.3');
    expect(dials).toEqual(['127.0.0.3']);
  });

  it('an address proven live whose dial is reached but not done is not passed over before HANDSHAKE_PATIENCE attempt delays', async () => {
    const { clock, dials, plan, call } = await proven(['127.0.0.2', '127.0.0.3']);
    plan['127.0.0.2'] = { tcp: 5, done: 350 }; // a slow handshake
    const second = call();
    await clock.tick(300); // .2's dial out 300 ms, reached: a handshake under way, not a dead address
    const third = call();
    await clock.tick(400);
    expect([(await second).address, (await third).address]).toEqual(['127.0.0.2', '127.0.0.2']);
    expect(dials).toEqual(['127.0.0.2', '127.0.0.2']);
  });

  it('an address the name no longer resolves to is no longer proven: back in its answer, it starts over', async () => {
    let answer = ['127.0.0.2', '127.0.0.3'];
    const lookup = ((_h: string, _o: unknown, cb: (err: null, list: Array<{ address: string; family: number }>) => void) =>
      queueMicrotask(() => cb(null, answer.map((address) => ({ address, family: 4 }))))) as unknown as net.LookupFunction;
    const { clock, plan, call } = racing(['127.0.0.2', '127.0.0.3', '127.0.0.4'], lookup);
    const served = async (ms: number): Promise<string> => {
      const c = call();
      await clock.tick(ms);
      return (await c).address;
    };
    expect(await served(10)).toBe('127.0.0.2'); // proven
    answer = ['127.0.0.3', '127.0.0.4'];
    expect(await served(10)).toBe('127.0.0.3');
    answer = ['127.0.0.2', '127.0.0.3'];
    plan['127.0.0.2'] = { tcp: 5, done: 300 };
    expect(await served(110)).toBe('127.0.0.3'); // not proven any more: .3 joined after one attempt delay
  });

  it("a probe beside the paced dial that reaches its proven address does not stretch the pacer's attempt delay", async () => {
    const { clock, dials, plan, call } = await proven(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    plan['127.0.0.2'] = { tcp: 5, done: 'refused' };
    const second = call();
    await clock.tick(10); // .2 refused: opens; .3 serves
    expect((await second).address).toBe('127.0.0.3');
    await clock.tick(30_000); // .2's window ends: its next dial is a probe, beside the next address
    plan['127.0.0.2'] = { tcp: 5, done: 'hold' };
    plan['127.0.0.3'] = { tcp: 60_000, done: 'hold' }; // SYNs unanswered: .4 joins it after one attempt delay
    dials.length = 0;
    const t0 = clock.now();
    const third = call();
    await clock.tick(99);
    expect(dials.slice(0, 2)).toEqual(['127.0.0.2', '127.0.0.3']); // the probe, and .3 paced
    await clock.tick(11);
    expect((await third).address).toBe('127.0.0.4');
    expect(clock.now() - t0).toBe(110); // .4 joined .3 after one attempt delay, whatever the probe reached
  });

  it('an address never proven that accepts and holds gets company after one attempt delay', async () => {
    const { clock, breaker, lookup } = setup(['127.0.0.2', '127.0.0.3']);
    const dials: string[] = [];
    const open = phased(clock, { '127.0.0.2': { tcp: 5, done: 'hold' }, '127.0.0.3': { tcp: 5, done: 10 } }, dials);
    const t0 = clock.now();
    const call = connectAddresses<Conn>('svc.test', 7, NAME, open, options(clock, breaker, lookup), () => {});
    await clock.tick(110);
    expect((await call).address).toBe('127.0.0.3');
    expect(clock.now() - t0).toBe(110);
    expect(dials).toEqual(['127.0.0.2', '127.0.0.3']);
  });
});
