/**
 * User code that fails in ways the first sweep (user-callbacks.test.ts) did not cover, found by an
 * outside review of the core API:
 * - an `async` listener, subscriber or logger (TypeScript accepts one where `=> void` is asked)
 *   whose promise rejects ended the process with an unhandled rejection, where a listener that
 *   throws is a warning;
 * - a breaker's `random` that throws or answers outside [0, 1) on the restart path (a probe the
 *   host refused) lost the dial's settle (the probe never settled) or held the host refused for
 *   ever (`retryAfter` Infinity after the host was back);
 * - a breaker's clock that throws while a dial settles: the dial never settled (an unhandled
 *   rejection), or threw from its timer (an uncaught exception).
 *
 * Each test counts the process-level failures seen while it ran (none) and the warnings.
 */
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, HostUnavailableError } from '../../src/core/errors.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { subscribe } from '../../src/observe/channels.js';
import { logStateChanges } from '../../src/observe/log-state-changes.js';
import { onRetryEvent, retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { type Seen, watching } from '../helpers/watching.js';

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });

describe('an async listener whose promise rejects is a warning, as a throw is', () => {
  it('breaker.on(), subscribe(), onRetryEvent() and a logger: one warning each, every event still heard, no unhandled rejection', async () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const heard = { on: 0, subscribe: 0, retry: 0, logger: 0 };
    const seen = await watching(async () => {
      const stops = [
        breaker.on('refused', async () => {
          heard.on++;
          throw new Error('async listener down');
        }),
        subscribe('dialguard:breaker:refused', async () => {
          heard.subscribe++;
          throw new Error('async subscriber down');
        }),
        onRetryEvent('scheduled', async () => {
          heard.retry++;
          throw new Error('async retry listener down');
        }),
        logStateChanges({
          warn: async () => {
            heard.logger++;
            throw new Error('async logger down');
          },
          info: () => {},
        }),
      ];
      try {
        breaker.admit('db:1').failed(refused());
        for (let i = 0; i < 3; i++) expect(breaker.tryAdmit('db:1')).toBeInstanceOf(HostUnavailableError);
        let attempts = 0;
        const r = retry(
          () => {
            if (++attempts === 1) throw refused();
            return 'ok';
          },
          { clock, budget: null, backoff: () => 0 },
        );
        await clock.tick(0);
        expect(await r).toBe('ok');
      } finally {
        for (const stop of stops) stop();
      }
    });
    expect(heard).toEqual({ on: 3, subscribe: 3, retry: 1, logger: 1 });
    expect(seen.uncaught).toEqual([]);
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toHaveLength(4); // one each, though each was called more often
    expect(seen.warnings).toEqual(
      expect.arrayContaining([
        expect.stringContaining('async listener down'),
        expect.stringContaining('async logger down'),
        expect.stringContaining('async retry listener down'),
        expect.stringContaining('async subscriber down'),
      ]),
    );
  });

  it('retry onResult returning a rejected promise: a warning, the call resolves', async () => {
    const seen = await watching(async () => {
      await expect(retry(() => 'ok', { budget: null, onResult: async () => Promise.reject(new Error('async onResult down')) })).resolves.toBe('ok');
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('async onResult down')]);
  });
});

describe("a breaker's random on the restart path (a probe the host refused)", () => {
  /** A host that opened once, then had its probe refused at once: the restart pace draws its window. */
  async function refusedProbe(random: () => number): Promise<{ breaker: HostBreaker; clock: ManualClock; seen: Seen; probe: unknown }> {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, random, failureThreshold: 1, minOutage: 0 });
    let probe: unknown;
    const seen = await watching(async () => {
      breaker.admit('db:2').failed(refused()); // opens, its window drawn by the default schedule
      await clock.tick(breaker.state('db:2')!.retryAfter);
      probe = await dial('db:2', () => Promise.reject(refused()), { clock, breaker }).catch((err: unknown) => err);
    });
    return { breaker, clock, seen, probe };
  }

  it('that throws: the probe settles with its own error; a warning; the host is dialled again within the restart window', { timeout: 5_000 }, async () => {
    let calls = 0;
    const { breaker, clock, seen, probe } = await refusedProbe(() => {
      if (++calls > 1) throw new Error('random down');
      return 0;
    });
    expect((probe as { code?: string }).code).toBe('ECONNREFUSED'); // was: never settled
    expect(seen.unhandled).toEqual([]);
    expect(seen.uncaught).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('random down')]);
    const state = breaker.state('db:2')!;
    expect(state.state).toBe('open');
    expect(state.retryAfter).toBeGreaterThan(0);
    expect(state.retryAfter).toBeLessThanOrEqual(1_000);
    await clock.tick(state.retryAfter);
    expect(() => breaker.admit('db:2').succeeded()).not.toThrow();
  });

  it.each([Infinity, Number.NaN, -1, 7])('that answers %s: the window stays the restart pace (not refused for ever)', async (answer) => {
    let calls = 0;
    const { breaker, clock, seen, probe } = await refusedProbe(() => (++calls > 1 ? answer : 0));
    expect((probe as { code?: string }).code).toBe('ECONNREFUSED');
    expect(seen.unhandled).toEqual([]);
    const { retryAfter } = breaker.state('db:2')!;
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(1_000); // was Infinity for Infinity
    await clock.tick(retryAfter);
    expect(() => breaker.admit('db:2').succeeded()).not.toThrow();
  });
});

describe("a breaker's random: an answer outside [0, 1) is taken as 0, exactly", () => {
  /** The first window of a host opened by a timeout (the default schedule: 1 000 ms x (1 + 0.25 r)). */
  function firstWindow(random: () => unknown): number {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, random: random as () => number, failureThreshold: 1, minOutage: 0 });
    breaker.admit('db:3').failed(new ConnectTimeoutError('db:3', 100, 'tcp'));
    return breaker.state('db:3')!.retryAfter;
  }

  it.each<[string, unknown]>([
    ["'0.5' (a string)", '0.5'],
    ['-1', -1],
    ['1', 1],
    ['7', 7],
    ['NaN', Number.NaN],
    ['Infinity', Infinity],
  ])('%s: the window r = 0 gives', (_name, answer) => {
    expect(firstWindow(() => answer)).toBe(1_000);
  });

  it('an answer inside [0, 1) is kept; a throw is answered 0 and named in one warning', async () => {
    expect(firstWindow(() => 0.5)).toBe(1_125);
    expect(firstWindow(() => 0.999)).toBeCloseTo(1_249.75, 6);
    let window = 0;
    const seen = await watching(async () => {
      window = firstWindow(() => {
        throw new Error('random down');
      });
    });
    expect(window).toBe(1_000);
    expect(seen.warnings).toEqual([expect.stringContaining("a breaker's random threw")]);
  });
});

describe("a breaker's clock that throws while a dial settles", () => {
  /** A breaker clock that throws from the moment `broken()` is called (inside the dial's establish). */
  function failingClock(): { clock: ManualClock; broken: () => void } {
    const manual = new ManualClock();
    let broken = false;
    const now = manual.now.bind(manual);
    manual.now = () => {
      if (broken) throw new Error('clock down');
      return now();
    };
    return { clock: manual, broken: () => void (broken = true) };
  }

  it('on a failed dial: the dial rejects with its own error, a warning, no unhandled rejection', { timeout: 5_000 }, async () => {
    const { clock, broken } = failingClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0 });
    const seen = await watching(async () => {
      const err = await dial('db:3', () => (broken(), Promise.reject(refused())), { breaker, clock: new ManualClock() }).catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('ECONNREFUSED'); // was: never settled
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('clock down')]);
  });

  it('on a timed-out dial (settled from its timer): the dial rejects with ConnectTimeoutError, no uncaught exception', async () => {
    const { clock, broken } = failingClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0 });
    const timerClock = new ManualClock();
    const seen = await watching(async () => {
      const p = dial('db:4', () => (broken(), new Promise<string>(() => {})), { breaker, clock: timerClock, timeout: 200 }).catch((e: unknown) => e);
      await timerClock.tick(200);
      expect(await p).toBeInstanceOf(ConnectTimeoutError);
    });
    expect(seen.uncaught).toEqual([]);
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('clock down')]);
  });

  it('on a dial that succeeded: the dial resolves with its connection', { timeout: 5_000 }, async () => {
    const { clock, broken } = failingClock();
    const breaker = new HostBreaker({ clock });
    const seen = await watching(async () => {
      await expect(dial('db:5', async () => (broken(), 'conn'), { breaker, clock: new ManualClock() })).resolves.toBe('conn');
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings).toEqual([expect.stringContaining('clock down')]);
  });
});

describe('containAnswer: what a listener returned', () => {
  it('a plain value, null or an object without then is ignored; a thenable that rejects, or whose then throws, is one warning', async () => {
    const { containAnswer } = await import('../../src/core/warn-once.js');
    const owner = {};
    const seen = await watching(async () => {
      for (const answer of [5, 'x', null, true, { then: 3 }, () => 'fn']) containAnswer('quiet answer', owner, answer);
      containAnswer('a rejecting answer', owner, Promise.reject(new Error('rejected')));
      containAnswer('a throwing then', owner, {
        then() {
          throw new Error('then threw');
        },
      });
      containAnswer('a then getter that throws', owner, Object.defineProperty({}, 'then', { get: () => { throw new Error('getter threw'); } }));
      let resolved = false;
      containAnswer('a resolving answer', owner, Promise.resolve().then(() => void (resolved = true)));
      await new Promise((r) => setImmediate(r));
      expect(resolved).toBe(true);
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.sort()).toEqual([
      'dialguard: a rejecting answer: Error: rejected',
      'dialguard: a then getter that throws: Error: getter threw',
      'dialguard: a throwing then: Error: then threw',
    ]);
  });
});
