/**
 * HostBreaker's default rules for the events users meet most (issue 11): a burst of overlapping
 * dials is one round, a restart shorter than `minOutage` never opens a host, a dead host still
 * opens fast, the open window starts short and grows only while the host stays dead, refusals
 * explain themselves, and operators can isolate or forget a host. Manual clock, no sleeps.
 */
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { adaptiveOpenWindow, type DialPermit, HostBreaker, type HostBreakerOptions } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const H = 'pod-a:443';

function make(options: HostBreakerOptions = {}): { clock: ManualClock; breaker: HostBreaker } {
  const clock = new ManualClock(1_000);
  return { clock, breaker: new HostBreaker({ clock, ...options }) };
}

function refused(_?: unknown): Error & { code: string } {
  return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:443'), { code: 'ECONNREFUSED' });
}

function timedOut(): Error & { code: string } {
  return Object.assign(new Error('connect timed out'), { code: 'DIALGUARD_CONNECT_TIMEOUT' });
}

/** {@link make}, and the open windows drawn, in order (from the `opened` events). */
function withWindows(options: HostBreakerOptions = {}): { clock: ManualClock; breaker: HostBreaker; windows: number[] } {
  const made = make(options);
  const windows: number[] = [];
  made.breaker.on('opened', (e) => windows.push(e.openFor));
  return { ...made, windows };
}

function refusal(breaker: HostBreaker, host = H): HostUnavailableError {
  const answer = breaker.tryAdmit(host);
  if (!(answer instanceof HostUnavailableError)) throw new Error(`expected ${host} to be refused`);
  return answer;
}

/**
 * A host refusing every dial for `outageMs`, dialled by `callers` callers who each retry every
 * `everyMs` (all in flight together); then the host is back. Returns how many admits were refused.
 */
function playRefusingOutage(clock: ManualClock, breaker: HostBreaker, outageMs: number, callers: number, everyMs: number): number {
  let refusedAdmits = 0;
  for (let t = 0; t < outageMs; t += everyMs) {
    const permits: DialPermit[] = [];
    for (let i = 0; i < callers; i++) {
      const answer = breaker.tryAdmit(H);
      if (answer instanceof HostUnavailableError) refusedAdmits++;
      else permits.push(answer);
    }
    for (const p of permits) p.failed(refused(undefined));
    clock.advance(everyMs);
  }
  return refusedAdmits;
}

describe('HostBreaker: one round per overlap (DESIGN rule 3)', () => {
  it('a burst of 64 dials that fail together is one failed round, not 64', () => {
    const { breaker } = make({ minOutage: 0 });
    const burst = Array.from({ length: 64 }, () => breaker.admit(H));
    for (const p of burst) p.failed(refused(undefined));
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 1 });
    expect(breaker.stats()).toMatchObject({ failed: 64, opened: 0 });
  });

  it('a dial admitted after a counted failure starts a new round, whoever opened it', () => {
    const { breaker } = make({ minOutage: 0, failureThreshold: 3 });
    const early = breaker.admit(H);
    breaker.admit(H).failed(); // round 1
    const second = breaker.admit(H); // admitted after round 1 was counted
    early.failed(); // overlapped round 1: not a new round
    expect(breaker.state(H)?.failures).toBe(1);
    second.failed(); // round 2
    expect(breaker.state(H)?.failures).toBe(2);
  });

  it('a success ends the streak: the next failure starts counting again from one', () => {
    const { breaker } = make({ minOutage: 0 });
    breaker.admit(H).failed();
    breaker.admit(H).failed();
    breaker.admit(H).succeeded();
    breaker.admit(H).failed();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 1 });
  });
});

describe('HostBreaker: a blip is not a death (defaults)', () => {
  it('a restart refusing every dial for 300 ms, then for 1 s, never opens the host', () => {
    for (const outage of [300, 1_000]) {
      const { clock, breaker } = make();
      // 64 callers retrying every 50 ms: 20 rounds in 1 s, far past failureThreshold.
      const refusedAdmits = playRefusingOutage(clock, breaker, outage, 64, 50);
      expect(refusedAdmits).toBe(0);
      expect(breaker.state(H)?.state).toBe('closed');
      expect(breaker.state(H)!.failures).toBeGreaterThanOrEqual(3);
      breaker.admit(H).succeeded(); // back
      expect(breaker.stats().opened).toBe(0);
    }
  });

  it('a dead host refusing every dial opens within 1.5 s of its first refusal', () => {
    const { clock, breaker } = make();
    const start = clock.now();
    let openedAt = -1;
    breaker.on('opened', () => {
      if (openedAt < 0) openedAt = clock.now() - start;
    });
    playRefusingOutage(clock, breaker, 3_000, 4, 100);
    expect(openedAt).toBe(1_500);
  });

  it('a 3 s refusing restart is dialled again within a quarter second of its return: refused at once, from its first window on', () => {
    const { clock, breaker, windows } = withWindows({ random: () => 0.5 }); // 250 ms + jitter: 281.25 (a timeout's first window: 1 125)
    playRefusingOutage(clock, breaker, 3_000, 4, 100); // opens at 1.5 s, refused at once; so are its probes
    // The first window too: it was 1 125 ms, so a 2 s restart stayed refused ~0.6 s after its
    // return while plain clients were served within 50 ms (an outside review).
    expect(windows).toEqual(Array(windows.length).fill(281.25));
    expect(windows.length).toBeGreaterThanOrEqual(4);
    expect(breaker.state(H)?.state).not.toBe('closed');
    let backAfter = 0; // the host is back: the first admit granted, counted from its return
    while (breaker.tryAdmit(H) instanceof HostUnavailableError && backAfter < 10_000) {
      clock.advance(10);
      backAfter += 10;
    }
    expect(backAfter).toBeLessThanOrEqual(290); // it was 1 875 ms with the window doubled
  });

  it('a 1.6-2.5 s restart (back inside what was a 1 s first window) is dialled again within a quarter second of its return', () => {
    for (const outage of [1_600, 2_000, 2_500]) {
      const { clock, breaker } = make({ random: () => 0.5 });
      playRefusingOutage(clock, breaker, outage, 4, 100); // 4 callers every 100 ms: opens at 1.5 s
      expect(breaker.state(H)?.state).not.toBe('closed');
      let backAfter = 0;
      while (breaker.tryAdmit(H) instanceof HostUnavailableError && backAfter < 10_000) {
        clock.advance(10);
        backAfter += 10;
      }
      expect({ outage, backAfter: backAfter <= 290 }).toEqual({ outage, backAfter: true }); // it was up to 630 ms (a 2 s restart)
    }
  });

  it("a schedule of the caller's own is kept after a refused probe, at its level: it does not grow", () => {
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, openDuration: (n) => 1_000 * n });
    breaker.admit(H).failed(refused());
    for (let i = 0; i < 3; i++) {
      clock.advance(windows[windows.length - 1]!);
      breaker.admit(H).failed(refused());
    }
    expect(windows).toEqual([1_000, 1_000, 1_000, 1_000]);
  });

  it('a host back from a long blackhole whose server is still starting: the refused probe is a restart, 250 ms, not a doubled window', () => {
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, random: () => 0 });
    breaker.admit(H).failed(timedOut());
    for (let i = 0; i < 4; i++) {
      clock.advance(windows[windows.length - 1]!);
      const probe = breaker.admit(H);
      clock.advance(2_500);
      probe.failed(timedOut()); // 40 s of blackhole: windows 1, 2, 4, 8, 16 s
    }
    clock.advance(windows[windows.length - 1]!);
    breaker.admit(H).failed(refused()); // the port is back on a live machine, its server not yet
    clock.advance(windows[windows.length - 1]!);
    breaker.admit(H).failed(refused());
    expect(windows).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 250, 250]); // it was 30 s: the return went unseen for half a minute
    clock.advance(250);
    breaker.admit(H).succeeded();
    expect(breaker.state(H)?.state).toBe('closed');
  });

  it('a dead host whose probes are mostly refused but now and then time out still comes down to 2 dials a minute', () => {
    const { clock, breaker } = make({ random: () => 0.5 });
    const dialsAt: number[] = [];
    let probes = 0;
    for (let t = 0; t < 600_000; t += 50) {
      const answer = breaker.tryAdmit(H);
      if (!(answer instanceof HostUnavailableError)) {
        dialsAt.push(t);
        // A load balancer before a dead pool, a reboot loop: every 20th probe times out.
        answer.failed(++probes % 20 === 0 ? timedOut() : refused());
      }
      clock.advance(50);
    }
    const perMinute = (from: number): number => dialsAt.filter((t) => t >= from && t < from + 60_000).length;
    for (let minute = 2; minute < 10; minute++) expect(perMinute(minute * 60_000)).toBeLessThanOrEqual(2); // it was 20-40: each timeout began a fresh 30 s of 250 ms windows
  });

  it('a fixed window is kept after a refused probe: the quarter-second pace is the default schedule\'s', () => {
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, openDuration: 30_000 });
    breaker.admit(H).failed(refused());
    clock.advance(30_000);
    breaker.admit(H).failed(refused());
    expect(windows).toEqual([30_000, 30_000]);
  });

  it('a second restart, long after the host answered again, gets the quarter-second pace afresh', () => {
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, random: () => 0 });
    const restart = (): void => {
      breaker.admit(H).failed(refused());
      clock.advance(windows[windows.length - 1]!);
      breaker.admit(H).failed(refused()); // a refused probe: 250 ms
      clock.advance(windows[windows.length - 1]!);
      breaker.admit(H).succeeded(); // back
    };
    restart();
    clock.advance(600_000); // ten minutes later, the next deploy
    restart();
    expect(windows).toEqual([250, 250, 250, 250]); // not afresh, the second would be 2 s windows: the first was long over
  });

  it('a probe that timed out still doubles the window: it cost a whole connect timeout', () => {
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, random: () => 0 });
    breaker.admit(H).failed(refused());
    for (let i = 0; i < 3; i++) {
      clock.advance(windows[windows.length - 1]!);
      const probe = breaker.admit(H);
      clock.advance(2_500);
      probe.failed(timedOut());
    }
    expect(windows).toEqual([250, 2_000, 4_000, 8_000]); // opened by a refusal (a restart's window), then each timeout doubles
  });

  it('a host whose probes have been refused for 30 s is dead: its windows double from there, as any other', () => {
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, random: () => 0 });
    breaker.admit(H).failed(refused());
    for (let probes = 0; windows.length < 120 + 4 && probes < 1_000; probes++) {
      clock.advance(windows[windows.length - 1]!);
      breaker.admit(H).failed(refused()); // the probe is refused at once
    }
    // 250 ms windows for 30 s from the first (the horizon), then 2, 4, 8, 16 s: it does not jump.
    expect(windows.slice(0, 120)).toEqual(Array(120).fill(250));
    expect(windows.slice(120)).toEqual([2_000, 4_000, 8_000, 16_000]);
    // The cause chain counts too: a client that wraps the refusal (undici, grpc-js) is heard.
    const { clock: c2, breaker: b2, windows: w2 } = withWindows({ minOutage: 0, failureThreshold: 1, random: () => 0 });
    b2.admit(H).failed(refused());
    c2.advance(250);
    b2.admit(H).failed(new Error('fetch failed', { cause: refused() }));
    expect(w2).toEqual([250, 250]); // unheard, the wrapped refusal would be a timeout's 2 s
  });

  it('a dead host timing out opens on the third timed-out round (threshold x connect timeout)', () => {
    const { clock, breaker } = make();
    for (let i = 0; i < 2; i++) {
      const p = breaker.admit(H);
      clock.advance(5_000);
      p.failed(new Error('timed out'));
    }
    expect(breaker.state(H)?.state).toBe('closed');
    const third = breaker.admit(H);
    clock.advance(5_000);
    third.failed(new Error('timed out'));
    expect(breaker.state(H)?.state).toBe('open');
  });
});

describe('HostBreaker: the outage is timed from the first failed dial’s admission', () => {
  it('three back-to-back 500 ms timeouts open the host on the third: threshold x connect timeout = 1.5 s', () => {
    const { clock, breaker } = make();
    for (let i = 0; i < 3; i++) {
      const p = breaker.admit(H);
      clock.advance(500);
      p.failed(new Error('timed out'));
    }
    expect(breaker.state(H)?.state).toBe('open');
  });

  it('a dial admitted before the restart that fails with it still times the outage from its admission: a 1 s restart stays closed', () => {
    const { clock, breaker } = make();
    const slow = breaker.admit(H); // a handshake in progress when the port closes 100 ms later
    clock.advance(100);
    slow.failed(refused(undefined));
    for (let t = 0; t < 1_000; t += 100) {
      breaker.admit(H).failed(refused(undefined));
      clock.advance(100);
    }
    expect(breaker.state(H)?.state).toBe('closed');
  });
});

describe('HostBreaker: adaptive open window (default)', () => {
  it('starts at about 1 s, doubles with jitter while probes fail, caps at 30 s, and resets when a probe succeeds', () => {
    let r = 0;
    const { clock, breaker, windows } = withWindows({ minOutage: 0, failureThreshold: 1, random: () => r });
    breaker.admit(H).failed();
    for (let i = 0; i < 7; i++) {
      clock.advance(windows[windows.length - 1]!);
      breaker.admit(H).failed(); // the probe fails
    }
    expect(windows).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);

    clock.advance(30_000);
    breaker.admit(H).succeeded(); // back: the schedule starts over
    r = 0.999;
    breaker.admit(H).failed();
    expect(windows[8]).toBeCloseTo(1_249.75, 5); // jitter adds up to 25 %
    expect(refusal(breaker).retryAfter).toBe(1_250); // a whole number of ms
  });

  it('jitter never takes a window past the 30 s cap', () => {
    for (let n = 1; n < 40; n++) {
      expect(adaptiveOpenWindow(n, 0, () => 0.999_999)).toBeLessThanOrEqual(30_000);
      expect(adaptiveOpenWindow(n, 0, () => 0)).toBeGreaterThanOrEqual(1_000);
    }
  });

  it('a host dead for ten minutes costs at most 2 dials a minute once the window is capped', () => {
    const { clock, breaker } = make({ random: () => 0.5 });
    // Eager callers: one admit every 100 ms for ten minutes; every dial is refused by the host.
    const dialsAt: number[] = [];
    const start = clock.now();
    for (let t = 0; t < 600_000; t += 100) {
      const answer = breaker.tryAdmit(H);
      if (!(answer instanceof HostUnavailableError)) {
        dialsAt.push(clock.now() - start);
        answer.failed(refused(undefined));
      }
      clock.advance(100);
    }
    const perMinute = (from: number): number => dialsAt.filter((t) => t >= from && t < from + 60_000).length;
    // 1.5 s of refusals, then a probe about every 300 ms for the first 30 s (each refused probe
    // cost a round trip: a restart is found within a quarter second), then 2, 4, 8, 16, 30 s windows.
    expect(perMinute(0)).toBeLessThanOrEqual(125);
    for (let minute = 2; minute < 10; minute++) expect(perMinute(minute * 60_000)).toBeLessThanOrEqual(2);
  });
});

describe('HostBreaker: a refusal explains itself', () => {
  it('carries the dial error that opened the host as cause, and names host, failures, code and when a probe may run', () => {
    const { clock, breaker } = make({ minOutage: 0, openDuration: 30_000 });
    const errors = [0, 1, 2].map(() => refused(undefined));
    for (const e of errors) breaker.admit(H).failed(e);
    clock.advance(0.4);
    const err = refusal(breaker);
    expect(err.cause).toBe(errors[2]);
    expect(err.failures).toBe(3);
    expect(err.retryAfter).toBe(30_000); // 29 999.6 rounded up to a whole ms
    expect(Number.isInteger(err.retryAfter)).toBe(true);
    expect(err.message).toBe(`${H} is unavailable (3 consecutive failed dial round(s), last error ECONNREFUSED); refused without dialling; a probe may run in 30000 ms`);
    expect(breaker.state(H)?.lastError).toBe(errors[2]);
  });

  it('a gRPC status error (a numeric code) is named by the errno under it, or by name and number', () => {
    const { breaker } = make({ minOutage: 0, failureThreshold: 1, openDuration: 1_000 });
    const status = Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14, cause: refused(undefined) });
    breaker.admit(H).failed(status);
    expect(refusal(breaker).message).toContain('last error ECONNREFUSED');
    const other = make({ minOutage: 0, failureThreshold: 1, openDuration: 1_000 }).breaker;
    other.admit(H).failed(Object.assign(new Error('14 UNAVAILABLE'), { code: 14 }));
    expect(refusal(other).message).toContain('last error Error 14');
  });

  it('a failed probe keeps the host open and its error becomes the next window’s cause', () => {
    const { clock, breaker } = make({ minOutage: 0, failureThreshold: 1, openDuration: 1_000 });
    breaker.admit(H).failed(refused(undefined));
    clock.advance(1_000);
    const timeout = timedOut();
    breaker.admit(H).failed(timeout);
    const err = refusal(breaker);
    expect(err.cause).toBe(timeout);
    expect(err.message).toContain('last error DIALGUARD_CONNECT_TIMEOUT');
  });
});

describe('HostBreaker: operator control', () => {
  it('isolate(host, ms) refuses every dial for ms whatever the host did, then admits it afresh', () => {
    const { clock, breaker } = make();
    breaker.admit(H).succeeded();
    const inFlight = breaker.admit(H);
    breaker.isolate(H, 10_000);
    const err = refusal(breaker);
    expect(err).toMatchObject({ isolated: true, state: 'open', retryAfter: 10_000 });
    expect(err.message).toContain('isolated by an operator');
    expect(breaker.state(H)).toMatchObject({ state: 'open', isolated: true, retryAfter: 10_000 });
    inFlight.succeeded(); // admitted before: moves nothing
    expect(breaker.state(H)?.isolated).toBe(true);
    clock.advance(10_000);
    const after = breaker.admit(H);
    expect(after.probe).toBe(false);
    expect(breaker.state(H)).toMatchObject({ state: 'closed', isolated: false, failures: 0 });
  });

  it('isolate(host) with no duration lasts until released, survives the idle sweep, and its release function ends it', () => {
    const { clock, breaker } = make({ idleRetention: 1_000, sweepInterval: 0 });
    const release = breaker.isolate(H);
    clock.advance(60_000);
    breaker.tryAdmit('other:1'); // runs the idle sweep
    expect(refusal(breaker).retryAfter).toBe(Number.POSITIVE_INFINITY);
    expect(refusal(breaker).message).toContain('dials resume when released');
    release();
    expect(breaker.admit(H).probe).toBe(false);
    release(); // a second call is a no-op
    expect(breaker.state(H)?.state).toBe('closed');
  });

  it('isolate replaces an open window; a stale release does not end a newer isolation', () => {
    const { breaker } = make({ minOutage: 0, failureThreshold: 1 });
    breaker.admit(H).failed();
    const first = breaker.isolate(H, 5_000);
    breaker.isolate(H, 60_000);
    first();
    expect(refusal(breaker).retryAfter).toBe(60_000);
  });

  it('reset(host) forgets an open host at once; a late settlement from before moves nothing', () => {
    const { breaker } = make({ minOutage: 0, failureThreshold: 1 });
    const late = breaker.admit(H);
    breaker.admit(H).failed();
    expect(breaker.state(H)?.state).toBe('open');
    expect(breaker.reset(H)).toBe(true);
    expect(breaker.state(H)).toBeUndefined();
    expect(breaker.admit(H).probe).toBe(false);
    late.failed();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.reset('never-seen:1')).toBe(false);
  });

  it('an isolation that ran out leaves no trace: a later trip refuses with the failures and cause, not as isolated', () => {
    const { clock, breaker } = make({ minOutage: 0, failureThreshold: 1 });
    breaker.isolate(H, 1_000);
    expect(refusal(breaker).isolated).toBe(true);
    clock.advance(1_000);
    const error = refused(undefined);
    breaker.admit(H).failed(error); // the isolation ends at this admit; the host then dies
    const err = refusal(breaker);
    expect(err).toMatchObject({ isolated: false, state: 'open', cause: error });
    expect(breaker.state(H)).toMatchObject({ state: 'open', isolated: false, failures: 1, probing: false });
  });

  it('a release called after the host went on and opened changes nothing: the open window stands', () => {
    const { breaker } = make({ minOutage: 0, failureThreshold: 1, openDuration: 30_000 });
    const release = breaker.isolate(H);
    release();
    breaker.admit(H).failed();
    release(); // late, a second time
    expect(refusal(breaker)).toMatchObject({ isolated: false, retryAfter: 30_000 });
    expect(breaker.state(H)).toMatchObject({ state: 'open', failures: 1, opens: 1 });
  });

  it('a release after reset(host) does not touch the entry the next admit made', () => {
    const { breaker } = make({ minOutage: 0, failureThreshold: 1, openDuration: 30_000 });
    const release = breaker.isolate(H);
    breaker.reset(H);
    breaker.admit(H).failed();
    release();
    expect(refusal(breaker).retryAfter).toBe(30_000);
  });

  it('isolating a new host at capacity evicts the least recently used one; re-isolating a tracked host evicts nothing', () => {
    const { breaker } = make({ capacity: 2 });
    breaker.admit('a:1');
    breaker.admit('b:1');
    breaker.isolate('c:1', 5_000);
    expect(breaker.stats()).toMatchObject({ hosts: 2, evictedCapacity: 1 });
    expect(breaker.state('a:1')).toBeUndefined();
    breaker.isolate('b:1', 5_000);
    breaker.isolate('c:1', 9_000);
    expect(breaker.stats()).toMatchObject({ hosts: 2, evictedCapacity: 1 });
    expect(breaker.state('b:1')).toMatchObject({ isolated: true, retryAfter: 5_000 });
    expect(breaker.state('c:1')).toMatchObject({ isolated: true, retryAfter: 9_000 });
  });

  it('an isolated host is never evicted for capacity: a stream of other hosts leaves it refused until its time (an outside review)', () => {
    const { clock, breaker } = make({ capacity: 4 });
    breaker.isolate('10.0.0.1:443', 5_000);
    for (let i = 0; i < 200; i++) breaker.admit(`h${i}:1`).succeeded(); // 50 times the capacity, the isolated one never asked
    expect(breaker.state('10.0.0.1:443')).toMatchObject({ isolated: true, retryAfter: 5_000 });
    expect(() => breaker.admit('10.0.0.1:443')).toThrow(HostUnavailableError);
    expect(breaker.stats().hosts).toBe(4); // the others still evicted: the bound holds
    expect(breaker.stats().evictedCapacity).toBe(197);
    clock.advance(5_000); // over: an ordinary host again, evicted like any other
    for (let i = 200; i < 210; i++) breaker.admit(`h${i}:1`).succeeded();
    expect(breaker.state('10.0.0.1:443')).toBeUndefined();
  });

  it('more isolated hosts than the capacity: each stays (the table holds them beyond it), and other hosts still come and go', () => {
    const { breaker } = make({ capacity: 2 });
    for (let i = 0; i < 40; i++) breaker.isolate(`i${i}:1`);
    breaker.admit('x:1').succeeded();
    breaker.admit('y:1').succeeded();
    for (let i = 0; i < 40; i++) expect(breaker.state(`i${i}:1`)).toMatchObject({ isolated: true });
    expect(breaker.stats().hosts).toBeLessThanOrEqual(42);
  });

  it('once isolations that held the table past its capacity end, it shrinks back to the capacity as other hosts come (was: it stayed at the isolations\' peak for good; an outside review: 100 hosts at capacity 16)', () => {
    for (const end of ['released', 'expired'] as const) {
      const { clock, breaker } = make({ capacity: 4 });
      const releases = Array.from({ length: 12 }, (_, i) => breaker.isolate(`i${i}:1`, 5_000));
      breaker.admit('x:1').succeeded();
      expect(breaker.stats().hosts).toBe(13); // held beyond the bound while isolated
      if (end === 'released') for (const release of releases) release();
      else clock.advance(5_000);
      const sizes: number[] = [];
      for (let i = 0; i < 12; i++) {
        breaker.admit(`h${i}:1`).succeeded();
        sizes.push(breaker.stats().hosts);
      }
      expect({ end, sizes }).toEqual({ end, sizes: [12, 11, 10, 9, 8, 7, 6, 5, 4, 4, 4, 4] });
      for (let i = 0; i < 12; i++) expect(breaker.state(`i${i}:1`)).toBeUndefined();
    }
  });

  it('isolate(host, 0) isolates nothing: the next dial is admitted', () => {
    const { breaker } = make();
    breaker.isolate(H, 0);
    expect(breaker.state(H)).toMatchObject({ state: 'closed', isolated: false, retryAfter: 0 });
    expect(breaker.admit(H).probe).toBe(false);
  });

  it('the idle sweep forgets a host whose isolation ends exactly now, and keeps one still isolated', () => {
    const { clock, breaker } = make({ idleRetention: 1_000, sweepInterval: 0 });
    breaker.isolate('ends:1', 5_000);
    breaker.isolate('lasts:1', 5_001);
    clock.advance(5_000);
    breaker.tryAdmit('other:1'); // runs the idle sweep
    expect(breaker.state('ends:1')).toBeUndefined();
    expect(breaker.state('lasts:1')).toMatchObject({ isolated: true, retryAfter: 1 });
    expect(breaker.stats().evictedIdle).toBe(1);
  });

  it('isolate rejects a bad duration, naming it', () => {
    const { breaker } = make();
    expect(() => breaker.isolate(H, -1)).toThrow(/ms/);
    expect(() => breaker.isolate(H, Number.NaN)).toThrow(/ms/);
  });
});
