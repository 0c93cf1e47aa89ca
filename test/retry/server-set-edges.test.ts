import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { HostUnavailableError, NoServerAvailableError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ServerSet } from '../../src/retry/server-set.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { refusedConnect, resetMidRequest, track } from './helpers.js';

// What ServerSet.run tells its private breaker about each attempt (only a dial failure counts
// against a host, rule 1), when it moves a server to the back, and the shapes of servers it
// accepts. Complements server-set.test.ts.

const T0 = 90_000;
const notFound = (): Error => Object.assign(new Error('Not Found'), { statusCode: 404 });
const refusedStream = (): Error =>
  Object.assign(new Error('Stream closed with error code NGHTTP2_REFUSED_STREAM'), { code: 'ERR_HTTP2_STREAM_ERROR' });

/** A set of two servers on a private breaker, with `a:1` holding two failed dials (threshold 3). */
async function nearlyTripped(): Promise<{ clock: ManualClock; set: ServerSet<string> }> {
  const clock = new ManualClock(T0);
  const set = new ServerSet(['a:1', 'b:1'], { clock });
  for (let i = 0; i < 2; i++) {
    track(set.run(() => Promise.reject(refusedConnect()), { clock, budget: null, maxAttempts: 1 }), clock);
    await clock.tick(0);
    set.failed('b:1'); // a back in front
  }
  expect(set.breaker.state('a:1')).toMatchObject({ state: 'closed', failures: 2 });
  return { clock, set };
}

describe('ServerSet.run: what the private breaker hears', () => {
  it('an answer, even an error one, proves the host alive: its dial-failure count starts over', async () => {
    for (const answer of [notFound, refusedStream]) {
      const { clock, set } = await nearlyTripped();
      const call = track(set.run(() => Promise.reject(answer()), { clock, budget: null, maxAttempts: 1 }), clock);
      await clock.tick(0);
      expect(call.state).toBe('rejected');
      expect(set.breaker.state('a:1')).toMatchObject({ state: 'closed', failures: 0 });
    }
  });

  it('a connection lost mid-call says nothing about dialling: the count stands, the permit is abandoned', async () => {
    const { clock, set } = await nearlyTripped();
    const before = set.breaker.stats().abandoned;
    track(set.run(() => Promise.reject(resetMidRequest()), { clock, budget: null, maxAttempts: 1 }), clock);
    await clock.tick(0);
    expect(set.breaker.state('a:1')).toMatchObject({ state: 'closed', failures: 2 });
    expect(set.breaker.stats().abandoned).toBe(before + 1);
  });

  it('a breaker passed in is not fed by the set (the dial layer reports to it)', async () => {
    const clock = new ManualClock(T0);
    const breaker = new HostBreaker({ clock, minOutage: 0, failureThreshold: 1 });
    const set = new ServerSet(['a:1', 'b:1'], { breaker });
    track(set.run(() => Promise.reject(refusedConnect()), { clock, budget: null, maxAttempts: 1 }), clock);
    await clock.tick(0);
    expect(breaker.state('a:1')).toBeUndefined();
    expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 0, abandoned: 0 });
  });

  it('the private breaker runs on the set clock: a tripped host is tried again once that clock passes its window', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1'], { clock });
    for (let i = 0; i < 3; i++) {
      track(set.run(() => Promise.reject(refusedConnect()), { clock, budget: null, maxAttempts: 1 }), clock);
      await clock.tick(i < 2 ? 750 : 0); // three failed rounds over 1.5 s (the default minOutage); looked at as it opens, its first window a restart's 250 ms
    }
    expect(() => set.pick()).toThrow(NoServerAvailableError);
    await clock.tick(30_000); // past any open window, on this clock only
    expect(set.pick()).toBe('a:1');
  });

  it('in panic mode the attempt is not admitted through the breaker, so it is not refused there', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1'], { clock, panic: true });
    for (let i = 0; i < 3; i++) {
      track(set.run(() => Promise.reject(refusedConnect()), { clock, budget: null, maxAttempts: 1 }), clock);
      await clock.tick(i < 2 ? 750 : 0); // three failed rounds over 1.5 s (the default minOutage); looked at as it opens, its first window a restart's 250 ms
    }
    const call = track(set.run((server, a) => `${server} panic=${a.panic}`, { clock, budget: null }), clock);
    await clock.tick(0);
    expect(call.value).toBe('a:1 panic=true');
  });
});

describe('ServerSet.run: moving servers and passing errors on', () => {
  it('an application error is passed on as is, after one attempt, and moves nothing', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1', 'b:1', 'c:1'], { clock });
    const err = notFound();
    let calls = 0;
    const call = track(
      set.run(
        () => {
          calls++;
          return Promise.reject(err);
        },
        { clock, budget: null, idempotent: true, maxAttempts: 3 },
      ),
      clock,
    );
    await clock.tick(0);
    expect(call.error).toBe(err);
    expect(calls).toBe(1);
    expect(set.servers()).toEqual(['a:1', 'b:1', 'c:1']);
  });

  it('a refusal that is not a HostUnavailableError ends the call instead of skipping the server', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1', 'b:1'], { clock });
    const inner = new NoServerAvailableError(3, 1_000);
    const seen: string[] = [];
    const call = track(
      set.run((server) => {
        seen.push(server);
        return Promise.reject(inner);
      }, { clock, budget: null, backoff: constant(0), maxAttempts: 3 }),
      clock,
    );
    await clock.tick(0);
    expect(call.error).toBe(inner);
    expect(seen).toEqual(['a:1']);
  });

  it('when the dial layer refuses every server, the error names the last refusal as its cause', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1', 'b:1'], { clock, recordOutcomes: false });
    const refusals = new Map(['a:1', 'b:1'].map((h) => [h, new HostUnavailableError(h, h === 'a:1' ? 4_000 : 2_000, 'open')]));
    const call = track(set.run((server) => Promise.reject(refusals.get(server)), { clock, budget: null }), clock);
    await clock.tick(0);
    expect(call.error).toBeInstanceOf(NoServerAvailableError);
    expect((call.error as NoServerAvailableError).retryAfter).toBe(2_000);
    expect((call.error as Error).cause).toBe(refusals.get('b:1'));
  });

  it('a bad fn rejects, never throws', async () => {
    const set = new ServerSet(['a:1']);
    await expect(set.run('go' as never)).rejects.toThrow(/fn must be a function/);
  });
});

describe('ServerSet: the servers it accepts', () => {
  it('host/port objects with a numeric or string port; anything else asks for options.key', () => {
    expect(new ServerSet([{ host: 'a.test', port: 1 }, { host: 'b.test', port: '2' }]).size).toBe(2);
    expect(() => new ServerSet([{ host: 'a.test', port: 1 }, { host: 'A.test', port: '1' }])).toThrow(/listed twice/);
    for (const bad of [null, { host: 'a.test' }, { port: 1 }, { host: 7, port: 1 }, { host: 'a.test', port: true }]) {
      expect(() => new ServerSet([bad])).toThrow(/cannot derive a breaker key .*pass options.key/);
    }
  });

  it('a key function must return a host string', () => {
    expect(() => new ServerSet([{ id: 1 }], { key: () => 5 as unknown as string })).toThrow(
      /key\(server\) must return a host string, got 5 for/,
    );
    expect(() => new ServerSet([{ id: 1 }], { key: () => 'a:99999' })).toThrow(/key\(server\) returned "a:99999", which is not a host/);
    expect(new ServerSet([{ id: 1 }], { key: (s) => `node-${s.id}:11211` }).size).toBe(1);
  });
});

describe('ServerSet.run: nothing is sent after the call has ended', () => {
  for (const how of ['abort', 'deadline'] as const) {
    it(`a server refused after the caller's ${how === 'abort' ? 'abort' : 'deadline'}: the next server is never tried`, async () => {
      const clock = new ManualClock();
      const set = new ServerSet(['a:1', 'b:1', 'c:1'], { breaker: new HostBreaker({ clock }), clock });
      const controller = new AbortController();
      const started: string[] = [];
      let refuseA!: () => void;
      const call = set.run(
        (server) => {
          started.push(server);
          if (server !== 'a:1') return Promise.resolve(`order created on ${server}`);
          // Waiting on a shared dial that the dial layer then refuses (its breaker opened meanwhile).
          return new Promise<string>((_, reject) => {
            refuseA = () => reject(new HostUnavailableError('a:1', 1_000, 'open'));
          });
        },
        { clock, budget: null, ...(how === 'abort' ? { signal: controller.signal } : { timeout: 100 }) },
      );
      const outcome = call.then(
        () => 'resolved',
        () => 'rejected',
      );
      await clock.tick(0);
      if (how === 'abort') controller.abort(new Error('caller gave up'));
      await clock.tick(150);
      refuseA();
      await clock.tick(0);
      expect(await outcome).toBe('rejected');
      expect(started).toEqual(['a:1']); // was ['a:1', 'b:1']: a POST sent after the caller heard it failed
    });
  }
});

describe('ServerSet.run: an attempt the deadline ends while it is still out', () => {
  const never = (): Promise<never> => new Promise<never>(() => {});

  it('a server whose attempt never settles (a hung server, a client deaf to the signal) moves to the back; the next call goes elsewhere', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1', 'b:1', 'c:1'], { clock });
    const first = track(set.run((server) => (server === 'a:1' ? never() : server), { clock, budget: null, timeout: 300 }), clock);
    await clock.tick(300);
    expect(first.state).toBe('rejected');
    expect((first.error as Error).name).toBe('DeadlineExceededError');
    expect(set.servers()).toEqual(['b:1', 'c:1', 'a:1']); // was ['a:1', 'b:1', 'c:1']: every call went on to a:1
    const second = track(set.run((server) => (server === 'a:1' ? never() : server), { clock, budget: null, timeout: 300 }), clock);
    await clock.tick(0);
    expect(second.value).toBe('b:1');
  });

  it('one that heeds the signal moves to the back as before (its timeout rotates it)', async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1', 'b:1', 'c:1'], { clock });
    const heeding = (server: string, a: { signal: AbortSignal }): Promise<string> =>
      server === 'a:1' ? new Promise((_, reject) => a.signal.addEventListener('abort', () => reject(a.signal.reason))) : Promise.resolve(server);
    const call = track(set.run(heeding, { clock, budget: null, timeout: 300 }), clock);
    await clock.tick(300);
    expect(call.state).toBe('rejected');
    expect(set.servers()).toEqual(['b:1', 'c:1', 'a:1']);
  });

  it("the caller's own abort, or the deadline met during a backoff, moves nothing", async () => {
    const clock = new ManualClock(T0);
    const set = new ServerSet(['a:1', 'b:1'], { clock });
    const controller = new AbortController();
    const aborted = track(set.run(never, { clock, budget: null, signal: controller.signal }), clock);
    await clock.tick(10);
    controller.abort(new Error('caller gave up'));
    await clock.tick(0);
    expect(aborted.state).toBe('rejected');
    expect(set.servers()).toEqual(['a:1', 'b:1']);
    // a:1 fails with an application error (no rotation), then the deadline comes in the backoff.
    const inBackoff = track(set.run(() => Promise.reject(notFound()), { clock, budget: null, timeout: 300, backoff: constant(10_000), retryable: () => true }), clock);
    await clock.tick(300);
    expect(inBackoff.state).toBe('rejected');
    expect(set.servers()).toEqual(['a:1', 'b:1']);
  });
});
