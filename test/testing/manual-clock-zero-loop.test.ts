/**
 * ManualClock: a timer that reschedules itself at 0 ms from its own callback (a poll loop) came
 * due again at once and fired forever inside one advance() (an outside review, r126): a test of
 * such code hung. Set from a timer's callback, a 0 ms (or NaN, or negative) delay now waits
 * 1 ms, as Node's timers do; set anywhere else it still fires at once (advance(0) fires it).
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/testing/manual-clock.js';

describe('ManualClock: 0 ms timers set from a timer\'s callback', () => {
  it('a timer rescheduling itself at 0 ms fires once a millisecond: 101 times in advance(100), not forever', () => {
    const clock = new ManualClock(0);
    const at: number[] = [];
    const poll = (): void => {
      at.push(clock.now());
      if (at.length < 10_000) clock.setTimeout(poll, 0); // bounded, so the old behaviour fails rather than hangs
    };
    clock.setTimeout(poll, 0);
    clock.advance(100);
    expect(at.length).toBe(101);
    expect(at[0]).toBe(0);
    expect(at[1]).toBe(1);
    expect(at.at(-1)).toBe(100);
    expect(clock.pending).toBe(1);
    expect(clock.now()).toBe(100);
  });

  it('NaN and negative delays from a callback wait 1 ms too; tick() applies the same rule', async () => {
    const clock = new ManualClock(10);
    const fired: Array<[string, number]> = [];
    clock.setTimeout(() => {
      clock.setTimeout(() => fired.push(['nan', clock.now()]), Number.NaN);
      clock.setTimeout(() => fired.push(['negative', clock.now()]), -5);
    }, 0);
    await clock.tick(0);
    expect(fired).toEqual([]);
    await clock.tick(1);
    expect(fired).toEqual([
      ['nan', 11],
      ['negative', 11],
    ]);
  });

  it('set outside a callback, a 0 ms timer still fires at once', async () => {
    const clock = new ManualClock(5);
    let n = 0;
    clock.setTimeout(() => n++, 0);
    clock.advance(0);
    expect(n).toBe(1);
    // From a promise callback tick() lets run between timers: at once as well.
    clock.setTimeout(() => void Promise.resolve().then(() => clock.setTimeout(() => n++, 0)), 0);
    await clock.tick(0);
    expect(n).toBe(2);
    expect(clock.now()).toBe(5);
  });
});
