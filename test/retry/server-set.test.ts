import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { HostUnavailableError, NoServerAvailableError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { ServerSet, type ServerSetOptions } from '../../src/retry/server-set.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { after, hang, refusedConnect, track } from './helpers.js';

const S = 1_000;

function setup(options: ServerSetOptions<string> & { threshold?: number; open?: number } = {}): {
  clock: ManualClock;
  breaker: HostBreaker;
  set: ServerSet<string>;
} {
  const clock = new ManualClock(0);
  const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: options.threshold ?? 1, openDuration: options.open ?? 10 * S });
  return { clock, breaker, set: new ServerSet(['a:1', 'b:1', 'c:1'], { breaker, ...options }) };
}

/** Trips `host` open in `breaker` (failureThreshold 1). */
function trip(breaker: HostBreaker, host: string): void {
  breaker.admit(host).failed();
}

describe('ServerSet: pick', () => {
  it('prefers the front; a failed server moves to the back (seed 004 NotifyFailedServer)', () => {
    const { set } = setup();
    expect(set.pick()).toBe('a:1');
    expect(set.failed('a:1')).toBe(true);
    expect(set.servers()).toEqual(['b:1', 'c:1', 'a:1']);
    expect(set.pick()).toBe('b:1');
    expect(set.failed('zzz:1')).toBe(false);
  });

  it('never picks an open host while a healthy one exists', () => {
    const { breaker, set } = setup();
    trip(breaker, 'a:1');
    trip(breaker, 'b:1');
    for (let i = 0; i < 10; i++) expect(set.pick()).toBe('c:1');
  });

  it('when all are open, fails fast with the earliest retryAfter', () => {
    const { clock, breaker, set } = setup();
    trip(breaker, 'a:1');
    clock.advance(3 * S);
    trip(breaker, 'b:1');
    trip(breaker, 'c:1');
    let err: unknown;
    try {
      set.pick();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(NoServerAvailableError);
    expect((err as NoServerAvailableError).retryAfter).toBe(7 * S);
  });

  it('a half-open host is picked for its probe, but not while its probe is out', () => {
    const { clock, breaker, set } = setup();
    for (const h of ['a:1', 'b:1', 'c:1']) trip(breaker, h);
    clock.advance(10 * S);
    expect(set.pick()).toBe('a:1');
    breaker.admit('a:1'); // the dial layer takes the probe
    expect(set.pick()).toBe('b:1');
  });

  it('reads the breaker without side effects', () => {
    const { breaker, set } = setup();
    trip(breaker, 'a:1');
    const before = breaker.stats();
    for (let i = 0; i < 100; i++) set.pick();
    expect(breaker.stats()).toEqual(before);
    expect(breaker.state('b:1')).toBeUndefined(); // not even entered in the table
  });

  it('panic mode: all refused, the least recently failed is tried anyway', () => {
    const { breaker, set } = setup({ panic: true });
    for (const h of ['c:1', 'a:1', 'b:1']) {
      trip(breaker, h);
      set.failed(h);
    }
    expect(set.servers()).toEqual(['c:1', 'a:1', 'b:1']);
    expect(set.pick()).toBe('c:1');
  });

  it('derives keys from host/port objects, and checks its options', () => {
    const set = new ServerSet([{ host: '10.0.0.1', port: 4647 }, { host: 'Server-B.', port: 4647 }]);
    expect(set.size).toBe(2);
    expect(() => new ServerSet(['a:1', 'A:1'])).toThrow(/a:1 is listed twice/);
    expect(() => new ServerSet([42])).toThrow(/cannot derive a breaker key from 42; pass options.key/);
    expect(() => new ServerSet(['a:99999'])).toThrow(/port/);
    expect(() => new ServerSet(['a:1'], { breaker: {} as HostBreaker })).toThrow(/breaker must be a HostBreaker/);
    expect(() => new ServerSet(['a:1'], { panic: 'yes' as unknown as boolean })).toThrow(/panic must be a boolean, got "yes"/);
    expect(() => new ServerSet(['a:1'], { key: 'host' as never })).toThrow(/key must be a function/);
    expect(() => new ServerSet<string>([]).pick()).toThrow(NoServerAvailableError);
    // A string is iterable: 'redis' was five servers, '127.0.0.1:6379' "'.' is listed twice".
    expect(() => new ServerSet('redis' as never)).toThrow(/servers must be an iterable of servers \(an array\), got "redis"/);
    expect(() => new ServerSet(null as never)).toThrow(/servers must be an iterable/);
    expect(() => new ServerSet(42 as never)).toThrow(/servers must be an iterable/);
    expect(() => new ServerSet(['a:1'], null as never)).toThrow(/options must be an object, got null/);
    expect(new ServerSet(new Set(['a:1', 'b:1'])).size).toBe(2); // any iterable
  });
});

describe('ServerSet.run: failing over spends no retry budget for an attempt never sent (r146)', () => {
  it('a never-sent attempt fails over to the next server with the budget empty; a maybe-sent one is still charged', async () => {
    const { clock, set } = setup();
    const budget = new RetryBudget({ clock, percentCanRetry: 0, minRetriesPerSec: 0 });
    const seen: string[] = [];
    const call = track(
      set.run(
        (server) => {
          seen.push(server);
          return server === 'a:1' ? Promise.reject(refusedConnect()) : 'ok';
        },
        { clock, budget, backoff: constant(0), idempotent: false },
      ),
      clock,
    );
    await clock.tick(0);
    expect(call.value).toBe('ok');
    expect(seen).toEqual(['a:1', 'b:1']);
    expect(budget.stats()).toMatchObject({ withdrawn: 0, refused: 0, refunded: 0 });
    // A failure that may have reached its server is a retry like any other: the empty budget refuses it.
    const timedOut = Object.assign(new Error('read ETIMEDOUT'), { code: 'ETIMEDOUT' });
    const charged = track(set.run(() => Promise.reject(timedOut), { clock, budget, backoff: constant(0), idempotent: true }), clock);
    await clock.tick(0);
    expect(charged.error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(budget.stats()).toMatchObject({ withdrawn: 0, refused: 1 });
  });

  it('a set of one server has nowhere else to go: its never-sent retry is charged, as retry() charges it', async () => {
    const clock = new ManualClock();
    const set = new ServerSet(['a:1'], { breaker: new HostBreaker({ clock }) });
    const budget = new RetryBudget({ clock, percentCanRetry: 0, minRetriesPerSec: 0 });
    const call = track(set.run(() => Promise.reject(refusedConnect()), { clock, budget, backoff: constant(0) }), clock);
    await clock.tick(0);
    expect(call.error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(budget.stats()).toMatchObject({ withdrawn: 0, refused: 1 });
  });

  it('a free failover whose call ends before its attempt starts gives nothing back', async () => {
    const { clock, set } = setup();
    const budget = new RetryBudget({ clock, percentCanRetry: 0, minRetriesPerSec: 0 });
    const c = new AbortController();
    const call = track(set.run(() => Promise.reject(refusedConnect()), { clock, budget, backoff: constant(100), signal: c.signal }), clock);
    await clock.tick(0);
    c.abort(new Error('caller gave up'));
    await clock.tick(0);
    expect(call.error).toMatchObject({ message: 'caller gave up' });
    expect(budget.stats()).toMatchObject({ withdrawn: 0, refunded: 0 });
  });
});

describe('ServerSet.run: retry across servers', () => {
  it('each attempt goes to the next server', async () => {
    const { clock, set } = setup();
    const seen: Array<[string, number]> = [];
    const call = track(
      set.run(
        (server, a) => {
          seen.push([server, a.number]);
          return server === 'a:1' ? Promise.reject(refusedConnect()) : 'ok';
        },
        { clock, budget: null, backoff: constant(0) },
      ),
      clock,
    );
    await clock.tick(0);
    expect(call.value).toBe('ok');
    expect(seen).toEqual([
      ['a:1', 1],
      ['b:1', 2],
    ]);
    expect(set.servers()).toEqual(['b:1', 'c:1', 'a:1']);
  });

  it('a server refused by the breaker is skipped within the attempt, not spent as one', async () => {
    const { clock, breaker, set } = setup();
    trip(breaker, 'a:1');
    const dialLayer = new HostBreaker({ clock, minOutage: 0, failureThreshold: 1 });
    dialLayer.admit('b:1').failed(); // the dial layer knows b is down; the set's breaker does not
    const seen: Array<[string, number]> = [];
    const call = track(
      set.run(
        (server, a) => {
          seen.push([server, a.number]);
          dialLayer.admit(server).succeeded(); // throws HostUnavailableError for b
          return server;
        },
        { clock, budget: null, maxAttempts: 1 },
      ),
      clock,
    );
    await clock.tick(0);
    expect(call.value).toBe('c:1');
    expect(seen).toEqual([
      ['b:1', 1],
      ['c:1', 1],
    ]);
    // b, refused inside fn, went to the back: the next call starts with c, not with b's refusal
    // again (an outside review, r145: a ServerSet over Http2Client asked the refused server first
    // on 17 of 20 calls).
    expect(set.servers()).toEqual(['a:1', 'c:1', 'b:1']); // a: refused by the set's own breaker, in place
    seen.length = 0;
    const next = track(
      set.run(
        (server, a) => {
          seen.push([server, a.number]);
          dialLayer.admit(server).succeeded();
          return server;
        },
        { clock, budget: null, maxAttempts: 1 },
      ),
      clock,
    );
    await clock.tick(0);
    expect(next.value).toBe('c:1');
    expect(seen).toEqual([['c:1', 1]]);
  });

  it('all servers down: NoServerAvailableError at once, nothing dialled, nothing waited', async () => {
    const { clock, breaker, set } = setup();
    for (const h of ['a:1', 'b:1', 'c:1']) trip(breaker, h);
    let calls = 0;
    const call = track(
      set.run(
        () => ++calls,
        { clock, budget: null, idempotent: true, maxAttempts: 5, backoff: constant(S) },
      ),
      clock,
    );
    await clock.tick(0);
    expect(call.error).toBeInstanceOf(NoServerAvailableError);
    expect(call.at).toBe(0);
    expect(calls).toBe(0);
  });

  it('the dial layer refusing every server ends the call with NoServerAvailableError carrying a refusal', async () => {
    const { clock, set } = setup();
    const call = track(
      set.run(
        (server) => {
          throw new HostUnavailableError(server, 2 * S, 'open');
        },
        { clock, budget: null },
      ),
      clock,
    );
    await clock.tick(0);
    expect(call.error).toBeInstanceOf(NoServerAvailableError);
    expect((call.error as NoServerAvailableError).retryAfter).toBe(2 * S);
    expect((call.error as Error).cause).toBeInstanceOf(HostUnavailableError);
  });

  it('panic mode runs the attempt anyway and tells fn so', async () => {
    const { clock, breaker, set } = setup({ panic: true });
    for (const h of ['a:1', 'b:1', 'c:1']) trip(breaker, h);
    const call = track(set.run((server, a) => `${server} panic=${a.panic}`, { clock, budget: null }), clock);
    await clock.tick(0);
    expect(call.value).toBe('a:1 panic=true');
  });

  it('with its private breaker it records dial outcomes only: dial failures trip, answers do not', async () => {
    const clock = new ManualClock(0);
    const set = new ServerSet(['a:1', 'b:1'], { clock });
    const dialled: string[] = [];
    const opts = { clock, budget: null, backoff: constant(0), maxAttempts: 2 } as const;
    for (let i = 0; i < 3; i++) {
      track(
        set.run((server) => {
          dialled.push(server);
          return server === 'a:1' ? Promise.reject(refusedConnect()) : 'ok';
        }, opts),
        clock,
      );
      await clock.tick(i < 2 ? 750 : 0); // three failed rounds over 1.5 s (the default minOutage); looked at as it opens, its first window a restart's 250 ms
      set.failed('b:1'); // put a back in front, so a is tried first every time
    }
    expect(set.breaker.state('a:1')?.state).toBe('open'); // 3 failed dials, the default threshold
    dialled.length = 0;
    track(set.run((server) => (dialled.push(server), server), opts), clock);
    await clock.tick(0);
    expect(dialled).toEqual(['b:1']); // a is never picked while open

    const notFound = Object.assign(new Error('Not Found'), { statusCode: 404 });
    for (let i = 0; i < 5; i++) {
      track(set.run(() => Promise.reject(notFound), opts), clock);
      await clock.tick(0);
    }
    expect(set.breaker.state('b:1')).toMatchObject({ state: 'closed', failures: 0 });
    expect(set.servers()).toEqual(['a:1', 'b:1']); // an answer is not a reason to move b back
  });

  it('seed 004: a leader dying under a 300 s long poll at 240 s is retried on the next server with 60 s', async () => {
    const clock = new ManualClock(0);
    const set = new ServerSet(['s1:4647', 's2:4647', 's3:4647'], { clock });
    const asked: Array<[string, number]> = [];
    const call = track(
      set.run(
        (server, a) => {
          asked.push([server, a.remaining]);
          if (server === 's1:4647') return after(clock, 240 * S, { error: new Error('Unexpected response code: 500 (rpc error: EOF)') });
          return hang(a.signal);
        },
        { clock, budget: null, timeout: 300 * S, idempotent: true, backoff: constant(0) },
      ),
      clock,
    );
    await clock.tick(300 * S);
    expect(asked).toEqual([
      ['s1:4647', 300 * S],
      ['s2:4647', 60 * S],
    ]);
    expect(call.at).toBe(300 * S);
    expect((call.error as Error).name).toBe('DeadlineExceededError');
  });
});

describe('ServerSet: run goes to the next server after a failover wait, not a restart-spanning one', () => {
  it('with no backoff given, the retry on server b comes within 100 ms of a\'s refusal (retry()\'s own default waits 400-600 ms for a restart)', async () => {
    for (let seed = 0; seed < 5; seed++) {
      const { clock, set } = setup();
      const at: Array<[string, number]> = [];
      const call = track(
        set.run(
          (server) => {
            at.push([server, clock.now()]);
            if (server === 'a:1') throw refusedConnect();
            return 'ok';
          },
          { clock, budget: null, random: () => (seed + 0.5) / 5 },
        ),
        clock,
      );
      for (let i = 0; i < 20 && call.state === 'pending'; i++) await clock.tick(10);
      expect(call.state).toBe('resolved');
      expect(at.map(([s]) => s)).toEqual(['a:1', 'b:1']);
      expect(at[1]![1] - at[0]![1]).toBeLessThanOrEqual(100);
    }
  });
});
