import { describe, expect, it } from 'vitest';
import { retrySettings } from '../../src/adapters/undici/options.js';
import { ADAPTER_CONNECT_TIMEOUT, restartSpanningBackoff } from '../../src/core/restart-backoff.js';

describe('the adapters’ default retry schedule', () => {
  it('the two waits of three default attempts always span a 1 s restart, and three blackholed dials stay under undici’s 10 s', () => {
    const waits = (r: number): number => restartSpanningBackoff(1, 0, () => r) + restartSpanningBackoff(2, 0, () => r);
    expect(waits(0)).toBe(1_200); // the shortest: still past a 1 s restart
    expect(waits(0.999_999)).toBeLessThan(1_800.001);
    expect(3 * ADAPTER_CONNECT_TIMEOUT + waits(0.999_999)).toBeLessThanOrEqual(9_300.001);
  });

  it('is jittered, grows, and is capped at 10 s', () => {
    expect(restartSpanningBackoff(1, 0, () => 0)).toBe(400);
    expect(restartSpanningBackoff(1, 0, () => 0.5)).toBe(500);
    expect(restartSpanningBackoff(3, 0, () => 0)).toBe(1_600);
    expect(restartSpanningBackoff(50, 0, () => 0.999)).toBe(10_000);
  });

  it('is the GuardedAgent’s default, with three attempts', () => {
    const s = retrySettings({});
    expect(s.backoff).toBe(restartSpanningBackoff);
    expect(s.maxAttempts).toBe(3);
  });
});
