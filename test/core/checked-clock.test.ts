/**
 * A `clock` option that is not a clock is refused where it is given, with a TypeError naming it:
 * was taken as is by dial() (after the breaker had admitted the dial: a permit never settled, which
 * for a half-open host holds its probe), by the pool, the budget and the HTTP/2 client, which then
 * failed later with "clock.now is not a function". A breaker and a budget only read the time, so
 * a clock with `now` alone serves them.
 */
import { describe, expect, it } from 'vitest';
import { checkedClock, systemClock } from '../../src/core/clock.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { retry } from '../../src/retry/retry.js';
import { FakeConnector } from '../pool/fake-connector.js';

const nowOnly = { now: () => 0 };
const noClear = { now: () => 0, setTimeout: () => ({}) };

describe('checkedClock', () => {
  it('left out: the system clock; a clock: itself', () => {
    expect(checkedClock(undefined)).toBe(systemClock);
    const c = { ...noClear, clearTimeout: () => {} };
    expect(checkedClock(c)).toBe(c);
    expect(checkedClock(nowOnly, false)).toBe(nowOnly);
  });

  it('refuses what is not one, naming the missing part', () => {
    expect(() => checkedClock(null)).toThrow(new TypeError('clock must be a Clock, got null'));
    expect(() => checkedClock(5)).toThrow(/^clock must be a Clock, got 5$/);
    expect(() => checkedClock({})).toThrow(/^clock\.now must be a function/);
    expect(() => checkedClock(nowOnly)).toThrow(/^clock\.setTimeout must be a function/);
    expect(() => checkedClock(noClear)).toThrow(/^clock\.clearTimeout must be a function/);
    expect(() => checkedClock({}, false)).toThrow(/^clock\.now must be a function/);
  });
});

describe('every taker of a clock checks it', () => {
  it('HostBreaker and RetryBudget: a clock with now() alone serves; null or {} is refused', () => {
    expect(() => new HostBreaker({ clock: nowOnly as never })).not.toThrow();
    expect(() => new RetryBudget({ clock: nowOnly as never })).not.toThrow();
    for (const bad of [null, {}]) {
      expect(() => new HostBreaker({ clock: bad as never })).toThrow(TypeError);
      expect(() => new RetryBudget({ clock: bad as never })).toThrow(TypeError);
    }
  });

  it('ConnectionPool and Http2Client arm timers: a clock without them is refused at construction', () => {
    expect(() => new ConnectionPool({ connector: new FakeConnector(), clock: nowOnly as never })).toThrow(/clock\.setTimeout/);
    expect(() => new Http2Client({ clock: {} as never })).toThrow(/clock\.now/);
  });

  it('dial(): rejects before the breaker is asked (nothing admitted, nothing left unsettled)', async () => {
    const breaker = new HostBreaker();
    await expect(dial('127.0.0.1:9', () => Promise.resolve(1), { breaker, clock: {} as never })).rejects.toThrow(/clock\.now/);
    expect(breaker.stats().hosts).toBe(0); // was 1, its permit never settled
  });

  it('retry(): rejects naming the missing part, before any attempt', async () => {
    let attempts = 0;
    await expect(retry(() => Promise.resolve(++attempts), { clock: noClear as never })).rejects.toThrow(/clock\.clearTimeout/);
    expect(attempts).toBe(0);
  });
});
