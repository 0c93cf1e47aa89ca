/**
 * A dial refused at once on every path it took is refused at once, however the connector words
 * it (an outside review, r126): a connector of the user's own racing two addresses with
 * `Promise.any` fails with an AggregateError that has no `code` of its own, only refused
 * members. The breaker read the code and the cause chain, found none, and took it for a silent
 * host: its windows doubled 1 → 2 → 4 s, and the pool refused callers 3.3-4 s after a 6 s
 * restart where the single-address connector was back in 0.02-0.3 s. (Node's own
 * `autoSelectFamily` AggregateError carries its members' code at the top and was never affected.)
 */
import { describe, expect, it } from 'vitest';
import { refusedAtOnce } from '../../src/guard/dial-outcome.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:11211'), { code: 'ECONNREFUSED' });
const reset = (): Error => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

describe('refusedAtOnce: an AggregateError is refused at once when every member is', () => {
  it.each([
    ['Promise.any over two refused addresses', new AggregateError([refused(), refused()], 'All promises were rejected'), true],
    ['one wrapping it as its cause', new Error('dial failed', { cause: new AggregateError([refused(), refused()]) }), true],
    ['members refused through their own causes', new AggregateError([new Error('a', { cause: refused() }), refused()]), true],
    ['nested aggregates', new AggregateError([new AggregateError([refused()]), refused()]), true],
    ['one member reset', new AggregateError([refused(), reset()]), false],
    ['one member with no code (a timeout of the user\'s own)', new AggregateError([refused(), new Error('timed out')]), false],
    ['no members', new AggregateError([]), false],
    ['a code of its own wins', Object.assign(new AggregateError([refused()]), { code: 'ETIMEDOUT' }), false],
    ['its own ECONNREFUSED wins too (as Node\'s autoSelectFamily sets it)', Object.assign(new AggregateError([reset()]), { code: 'ECONNREFUSED' }), true],
    ['16 refused members (the most read)', new AggregateError(Array.from({ length: 16 }, refused)), true],
    ['17: more than are read, so no verdict', new AggregateError(Array.from({ length: 17 }, refused)), false],
    ['nested past the cause chain\'s depth (8)', Array.from({ length: 8 }).reduce<Error>((inner) => new AggregateError([inner]), refused()), false],
    ['nested within it', Array.from({ length: 7 }).reduce<Error>((inner) => new AggregateError([inner]), refused()), true],
    ['a member whose code getter throws', new AggregateError([refused(), Object.defineProperty(new Error('x'), 'code', { get: () => { throw new Error('hostile'); } })]), false],
    ['a plain object with an errors array is not an aggregate', Object.assign(new Error('x'), { errors: [refused()] }), false],
    ['not an object', 'ECONNREFUSED', false],
  ])('%s: %s', (_what, err, expected) => {
    expect(refusedAtOnce(err)).toBe(expected);
  });

  it('so the host keeps the restart window (250 ms, +25 % at most), never doubling, through a 3 s outage', () => {
    const clock = new ManualClock(1_000);
    const breaker = new HostBreaker({ clock, random: () => 0.5 });
    const windows: number[] = [];
    breaker.on('opened', (e) => windows.push(e.openFor));
    for (let t = 0; t < 3_000; t += 100) {
      const answer = breaker.tryAdmit('cache-1:11211');
      if (!(answer instanceof Error)) answer.failed(new AggregateError([refused(), refused()], 'All promises were rejected'));
      clock.advance(100);
    }
    expect(windows.length).toBeGreaterThanOrEqual(4);
    expect(windows).toEqual(Array(windows.length).fill(281.25)); // was 1 125, 2 250, 4 500...
  });
});
