/**
 * Helpers the adapter tests (http, undici) share: a failed call and its duration, and a breaker
 * on a manual clock.
 */
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

/** What `p` rejected with (fails the test if it resolved), and how long it took. */
export async function failure(p: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const t0 = performance.now();
  try {
    await p;
  } catch (error) {
    return { error, ms: performance.now() - t0 };
  }
  throw new Error('expected the call to fail, it succeeded');
}

/** A breaker whose open window moves only when the test advances its clock. */
export function manualBreaker(failureThreshold = 3, openDuration = 30_000): { clock: ManualClock; breaker: HostBreaker } {
  const clock = new ManualClock();
  // minOutage 0: a manual clock that the test does not move would never see an outage last.
  return { clock, breaker: new HostBreaker({ clock, failureThreshold, minOutage: 0, openDuration }) };
}
