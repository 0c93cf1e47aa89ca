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
