/**
 * The system clock reads Node's global `performance` on every call, and arms Node's global
 * `setTimeout`: what fake timers replace (Jest's modern timers fake `performance` by default,
 * Vitest's when asked). A user who tests code built on dialguard with fake timers advances one
 * time for both. An import of perf_hooks' `performance` would save ~20 ns a read (the global is a
 * lazy accessor), and would leave `now()` on real time while the timers run on fake time: a
 * breaker window would never end under `advanceTimersByTime`.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { HostUnavailableError } from '../../src/core/errors.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('systemClock under fake timers', () => {
  it('now() and setTimeout() both follow the faked time', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const t0 = systemClock.now();
    let firedAt = -1;
    systemClock.setTimeout(() => {
      firedAt = systemClock.now();
    }, 5_000);
    vi.advanceTimersByTime(5_000);
    expect(firedAt - t0).toBe(5_000);
    expect(systemClock.now() - t0).toBe(5_000);
  });

  it("a default breaker's open window ends when the faked time passes it", () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 2_000 });
    breaker.admit('127.0.0.1', 1).failed(new Error('ECONNREFUSED'));
    expect(breaker.tryAdmit('127.0.0.1', 1)).toBeInstanceOf(HostUnavailableError);
    vi.advanceTimersByTime(2_001);
    expect(breaker.tryAdmit('127.0.0.1', 1)).not.toBeInstanceOf(HostUnavailableError);
  });
});
