/**
 * A new dial of an origin attaches the dials of it that no longer hold the process (their
 * requests gave up) only when there are some: each origin counts its detached dials, so a burst
 * of new connections does not walk every dial in flight for each new one (O(n^2) no-op calls).
 * What the count stands for is pinned in abandoned-dial (a second request re-holds the process).
 */
import { describe, expect, it } from 'vitest';
import { LoopHold, OriginDials } from '../../../src/adapters/http/pending-dial.js';

describe("an origin's count of detached dials", () => {
  it('follows detach and attach while the dial is the origin\'s, and is given back when it leaves', () => {
    const origin = new OriginDials();
    const a = new LoopHold();
    const b = new LoopHold();
    a.joinOrigin(origin);
    b.joinOrigin(origin);
    a.detach();
    a.detach(); // once
    b.detach();
    expect(origin.detached).toBe(2);
    a.attach();
    a.attach();
    expect(origin.detached).toBe(1);
    b.joinOrigin(undefined); // left while detached
    expect(origin.detached).toBe(0);
    b.attach();
    b.detach(); // no longer the origin's
    expect(origin.detached).toBe(0);
  });

  it('a hold detached before it joins is counted from then', () => {
    const origin = new OriginDials();
    const a = new LoopHold();
    a.detach();
    a.joinOrigin(origin);
    expect(origin.detached).toBe(1);
  });
});
