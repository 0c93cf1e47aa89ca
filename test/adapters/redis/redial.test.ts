/**
 * RedialRounds on a manual clock: the clients of a failing node redial it as one, one dial per
 * round, rounds spaced by a backoff with a floor; a success forgets the node.
 */
import { describe, expect, it } from 'vitest';
import { RedialRounds } from '../../../src/adapters/redis/redial.js';
import { ManualClock } from '../../../src/testing/manual-clock.js';

const KEY = 'cache:6379';

function rounds(random = 0.5): { clock: ManualClock; r: RedialRounds } {
  const clock = new ManualClock();
  return { clock, r: new RedialRounds(2_000, 3_000, () => random, clock) };
}

describe('RedialRounds: one redial per round for every client of a failing node', () => {
  it('a node not known to be failing: every client dials at once, no round, no timer', () => {
    const { clock, r } = rounds();
    expect(r.turn(KEY, {})).toBeUndefined();
    expect(r.turn(KEY, {})).toBeUndefined();
    expect(r.delay(KEY)).toBeUndefined();
    expect(clock.pending).toBe(0);
  });

  it('after a lost connection, ten clients: the first leads the round, the nine others wait and fail with its error without dialling', async () => {
    const { r } = rounds();
    const clients = Array.from({ length: 10 }, () => ({}));
    r.lost(KEY, new Error('socket closed'));
    expect(r.delay(KEY)).toBe(0);
    expect(r.turn(KEY, clients[0]!)).toBeUndefined();
    const waits = clients.slice(1).map((c) => r.turn(KEY, c));
    expect(waits.every((w) => w instanceof Promise)).toBe(true);
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    r.failed(KEY, clients[0]!, refused);
    expect(await Promise.all(waits)).toEqual(Array.from({ length: 9 }, () => refused));
  });

  it('between rounds a client fails at once with the last error; the next round is due after the backoff, whose floor grows by 25 ms a round (was: doubling, 1-2 s apart five seconds into an outage)', () => {
    const { clock, r } = rounds(0);
    const a = {};
    const b = {};
    const err = new Error('ECONNREFUSED');
    r.failed(KEY, a, err); // a dial outside any round starts them
    expect(r.delay(KEY)).toBe(25);
    expect(r.turn(KEY, b)).toBe(err);
    clock.advance(25);
    expect(r.turn(KEY, b)).toBeUndefined(); // b leads round 2
    r.failed(KEY, b, err);
    expect(r.delay(KEY)).toBe(50);
    clock.advance(50);
    expect(r.turn(KEY, a)).toBeUndefined();
    r.failed(KEY, a, err);
    expect(r.delay(KEY)).toBe(75);
  });

  it('ten clients whose first dials overlapped all fail: one failed round (next in 25 ms), not ten (which would space rounds 1 s apart)', () => {
    const { clock, r } = rounds(0);
    const clients = Array.from({ length: 10 }, () => ({}));
    const startedAt = clock.now();
    clock.advance(5);
    for (const c of clients) r.failed(KEY, c, new Error('ECONNREFUSED'), startedAt);
    expect(r.delay(KEY)).toBe(25);
    // A dial that began after that round failed is the next round.
    clock.advance(25);
    const next = clients[0]!;
    expect(r.turn(KEY, next)).toBeUndefined();
    r.failed(KEY, next, new Error('ECONNREFUSED'), clock.now());
    expect(r.delay(KEY)).toBe(50);
  });

  it('the spacing is jittered between half and all of the backoff, and never over maxBackoff', () => {
    const { clock, r } = rounds(0.999_999);
    const c = {};
    for (let i = 0; i < 60; i++) {
      clock.advance(1); // each dial begins after the last failure: its own round
      r.failed(KEY, c, new Error('down'));
    }
    expect(r.delay(KEY)).toBeGreaterThan(1_999);
    expect(r.delay(KEY)).toBeLessThanOrEqual(2_000);
  });

  it('the leader connects: the node is forgotten and the waiting clients dial at once', async () => {
    const { clock, r } = rounds();
    const leader = {};
    r.lost(KEY, new Error('socket closed'));
    expect(r.turn(KEY, leader)).toBeUndefined();
    const wait = r.turn(KEY, {});
    r.succeeded(KEY);
    expect(await wait).toBeUndefined();
    expect(r.delay(KEY)).toBeUndefined();
    expect(r.turn(KEY, {})).toBeUndefined();
    expect(clock.pending).toBe(0);
  });

  it('a failure from a dial that began before the round (not the leader) neither ends the round nor moves its spacing', () => {
    const { r } = rounds();
    const leader = {};
    r.lost(KEY, new Error('socket closed'));
    r.turn(KEY, leader);
    const wait = r.turn(KEY, {});
    r.failed(KEY, {}, new Error('late'));
    expect(r.delay(KEY)).toBe(0);
    expect(wait).toBeInstanceOf(Promise);
    r.succeeded(KEY);
  });

  it('the breaker refuses the leader: its waiters fail with the refusal, nothing is counted', async () => {
    const { r } = rounds();
    const leader = {};
    r.lost(KEY, new Error('socket closed'));
    r.turn(KEY, leader);
    const wait = r.turn(KEY, {});
    const refusal = new Error('host unavailable');
    r.refused(KEY, leader, refusal);
    expect(await wait).toBe(refusal);
    expect(r.delay(KEY)).toBe(0);
  });

  it('the leader gives its dial up (its client closed): the round ends with no outcome, its waiters dial, nothing is counted', async () => {
    const { r } = rounds();
    const leader = {};
    r.lost(KEY, new Error('socket closed'));
    r.turn(KEY, leader);
    const wait = r.turn(KEY, {});
    r.released(KEY, {}); // not the leader: nothing
    r.released(KEY, leader);
    expect(await wait).toBeUndefined();
    expect(r.delay(KEY)).toBe(0);
  });

  it('a leader never reported (its client destroyed mid-dial) is let go after leadFor: its waiters dial, the timer is gone', async () => {
    const { clock, r } = rounds();
    r.lost(KEY, new Error('socket closed'));
    r.turn(KEY, {});
    const wait = r.turn(KEY, {});
    expect(clock.pending).toBe(1);
    clock.advance(2_999);
    let settled = false;
    void (wait as Promise<unknown>).then(() => {
      settled = true;
    });
    await Promise.resolve();
    expect(settled).toBe(false);
    clock.advance(1);
    expect(await wait).toBeUndefined();
    expect(clock.pending).toBe(0);
  });

  it('guards sharing one breaker share its rounds with their own options: the failing dial\'s policy spaces the next round, the leader\'s bounds its lead', async () => {
    const { clock, r } = rounds(0);
    const short = { maxBackoff: 10, leadFor: 500, random: () => 0 };
    const long = { maxBackoff: 2_000, leadFor: 5_000, random: () => 0 };
    const a = {};
    r.failed(KEY, a, new Error('ECONNREFUSED'), clock.now(), short);
    expect(r.delay(KEY)).toBe(5); // half of min(10, 50): the short guard's cap
    clock.advance(5);
    expect(r.turn(KEY, a, short)).toBeUndefined(); // a leads, bounded by the short guard's 500 ms
    const wait = r.turn(KEY, {}, long);
    clock.advance(500);
    expect(await wait).toBeUndefined();
    expect(clock.pending).toBe(0);
  });
});
