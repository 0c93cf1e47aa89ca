/**
 * Leak checks: count the handles Node holds open (sockets, servers, timers) and insist that a
 * test leaves none behind. Closing is asynchronous, so the check waits a bounded time for the
 * count to come back down before failing with what is still open.
 */
import { afterEach, beforeEach, expect } from 'vitest';

const kinds = ['TCPSocketWrap', 'TCPServerWrap', 'TLSWrap', 'Timeout', 'Immediate', 'Http2Session', 'UDPWrap'];

/** Counts of the handle kinds that leak in network code. */
export function handles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const k of kinds) counts[k] = 0;
  for (const r of process.getActiveResourcesInfo()) if (r in counts) counts[r]!++;
  return counts;
}

/** Waits (up to `ms`) until no handle kind exceeds its count in `before`, else fails listing the excess. */
export async function expectNoLeaks(before: Record<string, number>, ms = 2_000): Promise<void> {
  const until = Date.now() + ms;
  let excess: Record<string, number> = {};
  for (;;) {
    const now = handles();
    excess = {};
    for (const k of kinds) if (now[k]! > before[k]!) excess[k] = now[k]! - before[k]!;
    if (Object.keys(excess).length === 0 || Date.now() > until) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(excess, 'handles left open').toEqual({});
}

/**
 * For every test of the calling file: counts handles before it, runs the clean-ups it queued
 * (last queued, first run), then insists nothing is left open. Returns the queue to push
 * clean-ups onto. Call once at the top of a test file.
 */
export function leakCheckEach(): Array<() => unknown> {
  const cleanups: Array<() => unknown> = [];
  let before: Record<string, number>;
  beforeEach(() => {
    before = handles();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await expectNoLeaks(before);
  });
  return cleanups;
}
