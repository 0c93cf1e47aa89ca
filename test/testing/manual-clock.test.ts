/**
 * ManualClock, the clock users' own state-machine tests run on (an outside review of the kit):
 * time only moves forward, and a timer's odd delay behaves as on Node's timers. Before, `advance(-50)`
 * moved time back, `advance(NaN)` made `now()` NaN so no timer could fire again, a NaN delay
 * never fired, and one past 2^31-1 ms waited for ever where Node fires it after 1 ms.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/testing/manual-clock.js';

describe('ManualClock', () => {
  it.each([-50, Number.NaN, Infinity, -Infinity])('advance(%s) and tick(%s) are RangeErrors; time is unchanged', async (ms) => {
    const clock = new ManualClock(100);
    expect(() => clock.advance(ms)).toThrow(RangeError);
    await expect(clock.tick(ms)).rejects.toThrow(/ms must be a finite number >= 0 \(time only moves forward\)/);
    expect(clock.now()).toBe(100);
  });

  it('advance("10") is a TypeError', () => {
    expect(() => new ManualClock().advance('10' as unknown as number)).toThrow(/ms must be a number, got "10"/);
  });

  it('a string delay (plain JavaScript) is the number it spells, as Node takes it (was: added as text: due at 5100 for 100 at 5)', () => {
    const clock = new ManualClock(5);
    const fired: number[] = [];
    clock.setTimeout(() => fired.push(clock.now()), '100' as unknown as number);
    clock.advance(99);
    expect(fired).toEqual([]);
    clock.advance(1);
    expect(fired).toEqual([105]);
  });

  it('a NaN or negative delay fires at once; one past 2^31-1 ms fires after 1 ms, as Node fires it', () => {
    const clock = new ManualClock();
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('nan'), Number.NaN);
    clock.setTimeout(() => fired.push('negative'), -5);
    clock.setTimeout(() => fired.push('overflow'), 2 ** 31 + 5);
    clock.setTimeout(() => fired.push('max'), 2 ** 31 - 1);
    clock.advance(0);
    expect(fired).toEqual(['nan', 'negative']);
    clock.advance(1);
    expect(fired).toEqual(['nan', 'negative', 'overflow']);
    expect(clock.pending).toBe(1); // 2^31-1 is a delay a timer holds: it waits
  });

  it('advance(0) fires what is due now; time moves forward by fractions too', () => {
    const clock = new ManualClock(5);
    let n = 0;
    clock.setTimeout(() => n++, 0);
    clock.advance(0);
    expect(n).toBe(1);
    clock.advance(0.5);
    expect(clock.now()).toBe(5.5);
  });

  // An outside review: advance(20) while a tick(5) awaited left now() at 5, and a NaN start was kept.
  it('an advance() while a tick() awaits: time never moves back when the tick ends', async () => {
    const clock = new ManualClock();
    const fired: number[] = [];
    clock.setTimeout(() => fired.push(clock.now()), 3);
    clock.setTimeout(() => fired.push(clock.now()), 15);
    const ticking = clock.tick(5);
    clock.advance(20);
    await ticking;
    expect(clock.now()).toBe(20);
    expect(fired).toEqual([3, 15]);
    // A timer's callback that advances past the outer advance's end: the outer leaves it there.
    clock.setTimeout(() => clock.advance(50), 1);
    clock.advance(2);
    expect(clock.now()).toBe(71);
  });

  it.each([Number.NaN, Infinity, -Infinity])('new ManualClock(%s) is a RangeError', (start) => {
    expect(() => new ManualClock(start)).toThrow(new RangeError(`start must be a finite number, got ${String(start)}`));
  });

  it('new ManualClock("5") is a TypeError; a negative or fractional start is a start', () => {
    expect(() => new ManualClock('5' as unknown as number)).toThrow(new TypeError('start must be a number, got "5"'));
    expect(new ManualClock(-5.5).now()).toBe(-5.5);
  });
});
