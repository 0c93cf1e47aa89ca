import diagnosticsChannel from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { proportionalJitter } from '../../src/core/backoff.js';
import { DialguardError, ErrorCodes, HostUnavailableError, isPermanent } from '../../src/core/errors.js';
import { type DialPermit, HostBreaker, type HostBreakerOptions, TRIAL_GRACE, TRIAL_PATIENCE } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const H = 'pod-a:443';

function make(options: HostBreakerOptions = {}): { clock: ManualClock; breaker: HostBreaker } {
  const clock = new ManualClock(1_000);
  // The classic rules these tests pin: the count alone trips, a fixed 30 s window. The blip and
  // adaptive-window defaults have their own tests (host-breaker-blip.test.ts).
  return { clock, breaker: new HostBreaker({ clock, minOutage: 0, openDuration: 30_000, ...options }) };
}

/** The refusal `answer` is, or a failure saying it was admitted. */
function refusalOf(answer: DialPermit | HostUnavailableError): HostUnavailableError {
  if (answer instanceof HostUnavailableError) return answer;
  throw new Error('admitted');
}

function refusal(breaker: HostBreaker, host = H): HostUnavailableError {
  try {
    breaker.admit(host);
  } catch (err) {
    expect(err).toBeInstanceOf(HostUnavailableError);
    return err as HostUnavailableError;
  }
  throw new Error(`expected ${host} to be refused`);
}

/** Fails `n` dials in a row, each admitted and settled before the next. */
function failDials(breaker: HostBreaker, n: number, host = H): void {
  for (let i = 0; i < n; i++) breaker.admit(host).failed();
}

describe('HostBreaker: closed to open', () => {
  it('opens after exactly failureThreshold consecutive failed dials', () => {
    const { breaker } = make({ failureThreshold: 3 });
    failDials(breaker, 2);
    expect(breaker.state(H)?.state).toBe('closed');
    expect(breaker.admit(H).probe).toBe(false);
    failDials(breaker, 1);
    expect(breaker.state(H)?.state).toBe('open');
    expect(breaker.stats().opened).toBe(1);
  });

  it('a success resets the count, so intermittent failures never accumulate into a trip', () => {
    const { breaker } = make({ failureThreshold: 3 });
    for (let round = 0; round < 10; round++) {
      failDials(breaker, 2);
      breaker.admit(H).succeeded();
    }
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats().opened).toBe(0);
  });

  it('abandoned dials never count: three cancelled requests do not open a healthy host', () => {
    const { breaker } = make({ failureThreshold: 3 });
    for (let i = 0; i < 10; i++) breaker.admit(H).abandoned();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ abandoned: 10, failed: 0, opened: 0 });
  });

  it('hosts are independent', () => {
    const { breaker } = make({ failureThreshold: 1 });
    failDials(breaker, 1, 'a:1');
    expect(() => breaker.admit('a:1')).toThrow(HostUnavailableError);
    expect(breaker.admit('a:2').probe).toBe(false);
    expect(breaker.admit('b:1').probe).toBe(false);
  });
});

describe('HostBreaker: refusal', () => {
  it('is immediate, typed, permanent, and says when the next probe is due', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 30_000 });
    failDials(breaker, 1);
    clock.advance(12_000);
    const err = refusal(breaker);
    expect(err.code).toBe(ErrorCodes.HOST_UNAVAILABLE);
    expect(err.code).toBe('DIALGUARD_HOST_UNAVAILABLE');
    expect(err.host).toBe(H);
    expect(err.retryAfter).toBe(18_000);
    expect(err.state).toBe('open');
    expect(err.permanent).toBe(true);
    expect(isPermanent(err)).toBe(true);
    expect(err).toBeInstanceOf(DialguardError);
    expect(err.message).toContain(H);
  });

  it('tryAdmit returns the same refusal admit throws, without throwing', () => {
    const { breaker } = make({ failureThreshold: 1 });
    failDials(breaker, 1);
    const answer = breaker.tryAdmit(H);
    expect(answer).toBeInstanceOf(HostUnavailableError);
    expect(refusal(breaker)).toBe(answer); // one instance per window
    expect(breaker.stats().refused).toBe(2);
    expect(breaker.tryAdmit('other:1')).not.toBeInstanceOf(HostUnavailableError);
  });

  it('counts refusals without emitting an event per refusal', () => {
    const { breaker } = make({ failureThreshold: 1 });
    const events: string[] = [];
    for (const e of ['opened', 'closed', 'probe-granted', 'probe-expired'] as const) breaker.on(e, () => events.push(e));
    failDials(breaker, 1);
    for (let i = 0; i < 1000; i++) refusal(breaker);
    expect(breaker.stats().refused).toBe(1000);
    expect(events).toEqual(['opened']);
  });
});

describe('HostBreaker: half-open', () => {
  it('lets exactly one probe through per window; everyone else keeps being refused', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 30_000, probeTimeout: 10_000 });
    failDials(breaker, 1);
    clock.advance(29_999);
    refusal(breaker);
    clock.advance(1);
    const probe = breaker.admit(H);
    expect(probe.probe).toBe(true);
    expect(breaker.state(H)).toMatchObject({ state: 'half-open', probing: true });
    for (let i = 0; i < 50; i++) {
      const err = refusal(breaker);
      expect(err.state).toBe('half-open');
      expect(err.retryAfter).toBe(10_000);
    }
    expect(breaker.stats().probesGranted).toBe(1);
  });

  it('a successful probe closes the host outright and resets everything', () => {
    const { clock, breaker } = make({ failureThreshold: 2, openDuration: 5_000 });
    const closed: unknown[] = [];
    breaker.on('closed', (e) => closed.push(e));
    failDials(breaker, 2);
    clock.advance(5_000);
    breaker.admit(H).succeeded();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0, opens: 0 });
    expect(closed).toEqual([{ host: H, openedFor: 5_000 }]);
    // Fully closed: it takes the whole threshold again to trip.
    failDials(breaker, 1);
    expect(breaker.state(H)?.state).toBe('closed');
  });

  it('a failed probe reopens for another full window', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 5_000 });
    const opened: Array<{ reopened: boolean }> = [];
    breaker.on('opened', (e) => opened.push(e));
    failDials(breaker, 1);
    clock.advance(5_000);
    breaker.admit(H).failed();
    expect(refusal(breaker).retryAfter).toBe(5_000);
    expect(opened.map((e) => e.reopened)).toEqual([false, true]);
  });

  it('a granted probe never reported expires, and the host is usable again (does not wedge)', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000, probeTimeout: 10_000 });
    const expired: unknown[] = [];
    breaker.on('probe-expired', (e) => expired.push(e));
    failDials(breaker, 1);
    clock.advance(1_000);
    const lost = breaker.admit(H); // its report never comes
    expect(lost.probe).toBe(true);
    clock.advance(9_999);
    refusal(breaker);
    clock.advance(1);
    const next = breaker.admit(H);
    expect(next.probe).toBe(true);
    expect(expired).toHaveLength(1);
    // The lost probe reporting late decides nothing: only the current probe does.
    lost.failed();
    expect(breaker.state(H)).toMatchObject({ state: 'half-open', probing: true });
    next.succeeded();
    expect(breaker.state(H)?.state).toBe('closed');
  });

  it('under continuous traffic an unreported probe is replaced once per probeTimeout, no more', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000, probeTimeout: 10_000 });
    failDials(breaker, 1);
    clock.advance(1_000);
    let granted = 0;
    for (let t = 0; t < 60_000; t += 100) {
      try {
        if (breaker.admit(H).probe) granted++; // never settled
      } catch {
        /* refused */
      }
      clock.advance(100);
    }
    expect(granted).toBe(6);
  });

  it('an abandoned probe frees the slot at once without counting as a failure', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000 });
    failDials(breaker, 1);
    clock.advance(1_000);
    breaker.admit(H).abandoned();
    const again = breaker.admit(H);
    expect(again.probe).toBe(true);
    expect(breaker.stats().failed).toBe(1);
  });
});

describe('HostBreaker: dials admitted before the trip (seed 002 review)', () => {
  it('a late failure neither extends the block nor frees the probe slot', () => {
    const { clock, breaker } = make({ failureThreshold: 3, openDuration: 1_000, probeTimeout: 10_000 });
    // Admitted while closed, then three failed rounds trip the host.
    const inFlight = [undefined, undefined, undefined, breaker.admit(H), breaker.admit(H)] as const;
    failDials(breaker, 3);
    expect(breaker.state(H)?.state).toBe('open');

    clock.advance(500);
    inFlight[3]!.failed(); // late, before the window ends
    expect(refusal(breaker).retryAfter).toBe(500); // not extended to 1_000

    clock.advance(500);
    const probe = breaker.admit(H);
    expect(probe.probe).toBe(true);
    inFlight[4]!.failed(); // late, while the probe is out
    expect(refusal(breaker).state).toBe('half-open'); // slot still held by the probe
    expect(breaker.stats()).toMatchObject({ opened: 1, stale: 2, probesGranted: 1 });
    expect(inFlight[0]).toBeUndefined();
  });

  it('an expired probe reporting late stays stale after its successor was abandoned: the host stays half-open', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000, probeTimeout: 500 });
    failDials(breaker, 1);
    clock.advance(1_000);
    const expired = breaker.admit(H);
    clock.advance(500);
    breaker.admit(H).abandoned(); // the next probe's caller leaves
    expired.succeeded(); // too late: decides nothing
    expect(breaker.state(H)).toMatchObject({ state: 'half-open', probing: false, opens: 1 });
    expect(breaker.stats()).toMatchObject({ stale: 1, closed: 0 });
    expect(breaker.admit(H).probe).toBe(true);
  });

  it('an expired probe failing late stays stale after its successor closed the host: the host stays closed', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000, probeTimeout: 500 });
    failDials(breaker, 1);
    clock.advance(1_000);
    const expired = breaker.admit(H);
    clock.advance(500);
    breaker.admit(H).succeeded(); // the next probe closes the host
    expired.failed(); // too late: counts for nothing
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ stale: 1, closed: 1, opened: 1 });
  });

  it('a late success does not close an open host; only the probe does', () => {
    const { clock, breaker } = make({ failureThreshold: 2, openDuration: 1_000 });
    const early = breaker.admit(H);
    failDials(breaker, 2);
    early.succeeded();
    expect(breaker.state(H)?.state).toBe('open');
    clock.advance(1_000);
    expect(breaker.admit(H).probe).toBe(true);
  });

  it('many permits in flight trip the host once; the rest settle as stale', () => {
    const { breaker } = make({ failureThreshold: 1 });
    const permits = Array.from({ length: 100 }, () => breaker.admit(H));
    for (const p of permits) p.failed();
    expect(breaker.stats()).toMatchObject({ opened: 1, failed: 1, stale: 99 });
  });
});

describe('HostBreaker: permits', () => {
  it('settle exactly once: the first settlement wins', () => {
    const { breaker } = make({ failureThreshold: 2 });
    const p: DialPermit = breaker.admit(H);
    expect(p.settled).toBe(false);
    p.failed();
    p.failed();
    p.succeeded();
    p.abandoned();
    expect(p.settled).toBe(true);
    expect(breaker.state(H)?.failures).toBe(1);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 0, abandoned: 0 });
  });
});

describe('HostBreaker: open window schedule', () => {
  it('grows exponentially to a cap with ±50 % jitter, and resets on close', () => {
    const clock = new ManualClock();
    let r = 0.5; // jitter midpoint: exactly the un-jittered window
    const breaker = new HostBreaker({
      clock,
      failureThreshold: 1,
      minOutage: 0,
      openDuration: proportionalJitter({ base: 1_000, max: 8_000 }),
      random: () => r,
    });
    const windows: number[] = [];
    breaker.on('opened', (e) => windows.push(e.openFor));
    failDials(breaker, 1);
    for (let i = 0; i < 5; i++) {
      clock.advance(windows[windows.length - 1]!);
      breaker.admit(H).failed();
    }
    expect(windows).toEqual([1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);

    clock.advance(8_000);
    breaker.admit(H).succeeded();
    r = 0; // lowest jitter
    failDials(breaker, 1);
    clock.advance(500);
    r = 0.999_999;
    breaker.admit(H).failed();
    expect(windows.slice(6)).toEqual([500, expect.closeTo(3_000, 1)]);
  });

  it('a fixed window stays fixed', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 7_000 });
    failDials(breaker, 1);
    for (let i = 0; i < 4; i++) {
      clock.advance(7_000);
      breaker.admit(H).failed();
      expect(refusal(breaker).retryAfter).toBe(7_000);
    }
  });
});

describe('HostBreaker: disabled (failureThreshold 0)', () => {
  it('admits everything and tracks nothing', () => {
    const { breaker } = make({ failureThreshold: 0 });
    for (let i = 0; i < 100; i++) breaker.admit(H).failed();
    expect(breaker.admit(H).probe).toBe(false);
    expect(breaker.enabled).toBe(false);
    expect(breaker.state(H)).toBeUndefined();
    expect(breaker.stats()).toMatchObject({ hosts: 0, failed: 0, opened: 0 });
  });
});

describe('HostBreaker: bounded table', () => {
  it('forgets hosts idle past idleRetention, at the next time-gated sweep', () => {
    const { clock, breaker } = make({ idleRetention: 300_000, sweepInterval: 60_000 });
    breaker.admit('old:1').failed();
    clock.advance(200_000);
    breaker.admit('fresh:1').succeeded();
    clock.advance(100_000); // old is now idle 300 s; fresh 100 s
    breaker.admit('other:1'); // sweep due (last at 200 s)
    expect(breaker.state('old:1')).toBeUndefined();
    expect(breaker.state('fresh:1')).toBeDefined();
    expect(breaker.stats().evictedIdle).toBe(1);
  });

  it('does not sweep more often than sweepInterval', () => {
    const { clock, breaker } = make({ idleRetention: 1_000, sweepInterval: 60_000 });
    breaker.admit('a:1');
    clock.advance(59_999);
    breaker.admit('b:1'); // a is idle, but no sweep is due yet
    expect(breaker.state('a:1')).toBeDefined();
    clock.advance(1);
    breaker.admit('b:1');
    expect(breaker.state('a:1')).toBeUndefined();
  });

  it('evicts the least recently used host at capacity', () => {
    const { breaker } = make({ capacity: 3 });
    breaker.admit('a:1');
    breaker.admit('b:1');
    breaker.admit('c:1');
    breaker.admit('a:1'); // a is now the most recent
    breaker.admit('d:1');
    expect(breaker.state('b:1')).toBeUndefined();
    expect(breaker.state('a:1')).toBeDefined();
    expect(breaker.stats()).toMatchObject({ hosts: 3, evictedCapacity: 1 });
  });

  it('a hostile stream of distinct hosts never grows the table past capacity', () => {
    const { breaker } = make({ capacity: 64 });
    for (let i = 0; i < 20_000; i++) breaker.admit(`h${i}.example:${i % 65535}`).failed();
    expect(breaker.stats().hosts).toBe(64);
  });

  it('a settlement for an evicted host moves nothing', () => {
    const { breaker } = make({ capacity: 1, failureThreshold: 1 });
    const p = breaker.admit('a:1');
    breaker.admit('b:1'); // evicts a
    p.failed();
    expect(breaker.stats()).toMatchObject({ stale: 1, opened: 0 });
    expect(breaker.admit('a:1').probe).toBe(false);
  });
});

describe('HostBreaker: host normalisation', () => {
  it('files spellings of one host under one entry (a trailing dot is another name: see test/guard/scale)', () => {
    const { breaker } = make({ failureThreshold: 4 });
    breaker.admit('Example.COM:443').failed();
    breaker.admit('EXAMPLE.com:443').failed();
    breaker.admit('https://example.com/path').failed();
    breaker.admit('example.com', 443).failed();
    expect(breaker.state('EXAMPLE.com:443')?.state).toBe('open');
    expect(breaker.stats().hosts).toBe(1);
  });

  it('IPv6 with and without brackets is one host', () => {
    const { breaker } = make({ failureThreshold: 2 });
    breaker.admit('[::1]:80').failed();
    breaker.admit('::1', 80).failed();
    expect(refusal(breaker, '[::1]:80').host).toBe('[::1]:80');
  });
});

describe('HostBreaker: options', () => {
  it.each([
    [{ failureThreshold: -1 }, /failureThreshold.*-1/],
    [{ failureThreshold: 1.5 }, /failureThreshold must be an integer.*1\.5/],
    [{ failureThreshold: Number.NaN }, /failureThreshold.*NaN/],
    [{ openDuration: -5 }, /openDuration.*-5/],
    [{ openDuration: Number.POSITIVE_INFINITY }, /openDuration must be finite/],
    [{ probeTimeout: 0 }, /probeTimeout.*0/],
    [{ probeTimeout: Number.NaN }, /probeTimeout.*NaN/],
    [{ idleRetention: -1 }, /idleRetention/],
    [{ capacity: 0 }, /capacity.*0/],
    [{ capacity: 2.5 }, /capacity/],
    [{ sweepInterval: -1 }, /sweepInterval/],
    [{ failureThreshold: '3' as unknown as number }, /failureThreshold must be a number, got "3"/],
    [{ random: 5 as unknown as () => number }, /random must be a function/],
    [{ minOutage: -1 }, /minOutage.*-1/],
    [{ clock: {} as unknown as ManualClock }, /clock\.now must be a function/],
  ])('rejects %o', (options, message) => {
    expect(() => new HostBreaker(options)).toThrow(message);
  });

  it.each([null, 'x', 42, true])('options that are not an object (%o): a TypeError (was: every default, or a raw property read for null)', (options) => {
    expect(() => new HostBreaker(options as never)).toThrow(/options must be an object/);
  });

  it('rejects a bad host with a TypeError', () => {
    const { breaker } = make();
    expect(() => breaker.admit('')).toThrow(TypeError);
    expect(() => breaker.admit('a:99999')).toThrow(/port/);
    expect(() => breaker.admit(42 as unknown as string)).toThrow(TypeError);
  });

  it('accepts 0 where 0 is meaningful (never silently defaulted)', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 0 });
    failDials(breaker, 1);
    expect(breaker.admit(H).probe).toBe(true); // window of 0: probe at once
    void clock;
  });
});

describe('HostBreaker: events', () => {
  it('emits each state change once, in order, and listeners can stop', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000, probeTimeout: 100 });
    const seen: string[] = [];
    const stop = breaker.on('opened', () => seen.push('opened'));
    breaker.on('probe-granted', () => seen.push('probe-granted'));
    breaker.on('probe-expired', () => seen.push('probe-expired'));
    breaker.on('closed', () => seen.push('closed'));
    failDials(breaker, 1);
    clock.advance(1_000);
    breaker.admit(H);
    clock.advance(100);
    breaker.admit(H).succeeded();
    stop();
    failDials(breaker, 1);
    expect(seen).toEqual(['opened', 'probe-granted', 'probe-expired', 'probe-granted', 'closed']);
  });

  it("publishes each change on the diagnostics channel dialguard:breaker:<event>, without a listener", () => {
    const { breaker } = make({ failureThreshold: 1 });
    const heard: unknown[] = [];
    const hear = (message: unknown): void => {
      heard.push(message);
    };
    diagnosticsChannel.subscribe('dialguard:breaker:opened', hear);
    try {
      failDials(breaker, 1);
    } finally {
      diagnosticsChannel.unsubscribe('dialguard:breaker:opened', hear);
    }
    expect(heard).toEqual([{ host: H, failures: 1, openFor: 30_000, reopened: false, cause: undefined }]);
  });

  it('a throwing listener does not break the state machine, and is reported as a warning', async () => {
    const { breaker } = make({ failureThreshold: 1 });
    breaker.on('opened', () => {
      throw new Error('listener bug');
    });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on('warning', onWarning);
    failDials(breaker, 1);
    expect(breaker.state(H)?.state).toBe('open');
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', onWarning);
    expect(warnings).toEqual([expect.stringContaining('listener bug')]);
  });
});

describe('HostBreaker: what it reports, exactly', () => {
  it('event payloads name the host and the numbers behind each change', () => {
    const { clock, breaker } = make({ failureThreshold: 2, openDuration: 1_000, probeTimeout: 300 });
    const seen: unknown[] = [];
    for (const e of ['opened', 'closed', 'probe-granted', 'probe-expired', 'refused'] as const) breaker.on(e, (p) => seen.push([e, p]));
    failDials(breaker, 2);
    refusal(breaker);
    clock.advance(1_000);
    breaker.admit(H); // the probe, never reported
    refusal(breaker);
    clock.advance(300);
    breaker.admit(H).succeeded();
    expect(seen).toEqual([
      ['opened', { host: H, failures: 2, openFor: 1_000, reopened: false }],
      ['refused', { host: H, state: 'open' }],
      ['probe-granted', { host: H }],
      ['refused', { host: H, state: 'half-open' }],
      ['probe-expired', { host: H, probeTimeout: 300 }],
      ['probe-granted', { host: H }],
      ['closed', { host: H, openedFor: 1_300 }],
    ]);
    expect(breaker.stats()).toMatchObject({ probesExpired: 1, refused: 2, opened: 1 });
  });

  it('closed reports how long the host was out since it first opened, across reopenings by failed probes', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000 });
    const closed: number[] = [];
    breaker.on('closed', (p) => closed.push(p.openedFor));
    failDials(breaker, 1); // opened at t0
    clock.advance(1_000);
    breaker.admit(H).failed(); // the probe fails: reopened at t0 + 1 s
    clock.advance(1_000);
    breaker.admit(H).succeeded();
    expect(closed).toEqual([2_000]);
  });

  it('a closed host, and an open one inside its window, report no probe out', () => {
    const { breaker } = make({ failureThreshold: 2 });
    breaker.admit(H);
    expect(breaker.state(H)).toMatchObject({ state: 'closed', probing: false, retryAfter: 0 });
    failDials(breaker, 2);
    expect(breaker.state(H)).toMatchObject({ state: 'open', probing: false, retryAfter: 30_000 });
  });

  it('a probe due exactly now is not "out": retryAfter 0 and probing false at its deadline', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000, probeTimeout: 500 });
    failDials(breaker, 1);
    clock.advance(1_000);
    expect(breaker.state(H)).toMatchObject({ state: 'half-open', probing: false, retryAfter: 0 });
    breaker.admit(H);
    clock.advance(499);
    expect(breaker.state(H)).toMatchObject({ probing: true, retryAfter: 1 });
    expect(refusal(breaker).retryAfter).toBe(1);
    clock.advance(1);
    expect(breaker.state(H)).toMatchObject({ probing: false, retryAfter: 0 });
  });

  it('one refusal per window: the next window (after a failed probe) gets a fresh one', () => {
    const { clock, breaker } = make({ failureThreshold: 1, openDuration: 1_000 });
    failDials(breaker, 1);
    const first = refusal(breaker);
    expect(refusal(breaker)).toBe(first);
    clock.advance(1_000);
    breaker.admit(H).failed(); // the probe fails: a new window
    const second = refusal(breaker);
    expect(second).not.toBe(first);
    expect(second.retryAfter).toBe(1_000);
    expect(breaker.state(H)).toMatchObject({ state: 'open', opens: 2 });
  });

  it('a disabled breaker hands out permits that still settle exactly once', () => {
    const { breaker } = make({ failureThreshold: 0 });
    const p = breaker.admit(H);
    expect(p.settled).toBe(false);
    p.abandoned();
    expect(p.settled).toBe(true);
    for (const settle of [(q: DialPermit) => q.succeeded(), (q: DialPermit) => q.failed()]) {
      const q = breaker.admit(H);
      settle(q);
      expect(q.settled).toBe(true);
    }
  });

  it("an enabled breaker's permit reads settled once settled", () => {
    const { breaker } = make();
    for (const settle of [(q: DialPermit) => q.succeeded(), (q: DialPermit) => q.failed(), (q: DialPermit) => q.abandoned()]) {
      const q = breaker.admit(H);
      expect(q.settled).toBe(false);
      settle(q);
      expect(q.settled).toBe(true);
    }
    expect(breaker.enabled).toBe(true);
  });
});

describe('HostBreaker: one client on the wrong transport (DESIGN rule 1)', () => {
  const admitted = (answer: DialPermit | HostUnavailableError): DialPermit => {
    if (answer instanceof HostUnavailableError) throw new Error(`refused: ${answer.message}`);
    return answer;
  };

  it('a plain client hung up on by a TLS-only port opens the host for plain dials only: a TLS dial is let through, and its success closes the host', () => {
    const { clock, breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed(new Error('closed during the handshake'));
    expect(breaker.state(H)?.state).toBe('open');
    expect(breaker.tryAdmit(H, undefined, 'plain')).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit(H)).toBeInstanceOf(HostUnavailableError); // a dial that names no transport counts as any
    const tls = admitted(breaker.tryAdmit(H, undefined, 'tls'));
    expect(tls.probe).toBe(true); // its transport's trial
    const joined = admitted(breaker.tryAdmit(H, undefined, 'tls')); // concurrent, inside the grace: joins the trial
    clock.advance(TRIAL_GRACE);
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls'))).toMatchObject({ state: 'half-open', retryAfter: 10_000 - TRIAL_GRACE }); // out past the grace: the rest wait
    tls.succeeded();
    joined.succeeded();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    admitted(breaker.tryAdmit(H, undefined, 'plain')); // closed for everyone again; the wrong client fails anew
  });

  it("a TLS dial that fails too is filed, the host's schedule starts over from its first window for it, and from then on every transport is refused", () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 30_000 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    clock.advance(30_000);
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed(); // the probe: level 2, 60 s
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(new Error('timed out'));
    expect(breaker.state(H)).toMatchObject({ state: 'open', opens: 3, retryAfter: 30_000 }); // level 1 again: TLS's outage starts now
    expect(breaker.tryAdmit(H, undefined, 'tls')).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit(H, undefined, 'plain')).toBeInstanceOf(HostUnavailableError);
  });

  it('failures of dials that name no transport refuse every transport, as before', () => {
    const { breaker } = make();
    failDials(breaker, 3);
    expect(breaker.tryAdmit(H, undefined, 'tls')).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit(H, undefined, 'plain')).toBeInstanceOf(HostUnavailableError);
  });

  it('a success forgets which transports failed: a later streak starts clean', () => {
    const { breaker } = make();
    breaker.admit(H, undefined, 'tls').failed();
    breaker.admit(H, undefined, 'tls').succeeded();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    admitted(breaker.tryAdmit(H, undefined, 'tls')).abandoned(); // only plain failed since the success
  });

  it('state() answers for a transport: closed for one none of whose dials failed, open for the one whose did', () => {
    const { breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed', retryAfter: 0, probing: false });
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'open', retryAfter: 30_000 });
    expect(breaker.state(H)).toMatchObject({ state: 'open', retryAfter: 30_000 }); // no transport: any
    breaker.isolate(H);
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', isolated: true });
  });

  it('an open host tries each transport none of whose dials failed: dials join its trial for TRIAL_GRACE, then the others are refused half-open until its dials settle or its probeTimeout passes', () => {
    const { clock, breaker } = make({ probeTimeout: 5_000 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    const good = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    expect(good.probe).toBe(true);
    expect(breaker.state(H, undefined, 'tls:good.example')).toMatchObject({ state: 'closed', probing: false }); // young: a dial would join
    clock.advance(TRIAL_GRACE - 1);
    const late = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example')); // last to join
    clock.advance(1);
    const refused = refusalOf(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    expect(refused).toMatchObject({ state: 'half-open', retryAfter: 5_000 - TRIAL_GRACE });
    expect(breaker.state(H, undefined, 'tls:good.example')).toMatchObject({ state: 'half-open', probing: true, retryAfter: 5_000 - TRIAL_GRACE });
    const other = admitted(breaker.tryAdmit(H, undefined, 'plain')); // each transport its own trial
    clock.advance(1_000 - TRIAL_GRACE);
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:good.example'))).toBe(refused); // made once, counting down
    expect(refused.retryAfter).toBe(4_000);
    // Abandoned, a trial's last dial frees its transport at once.
    other.abandoned();
    admitted(breaker.tryAdmit(H, undefined, 'plain')).abandoned();
    late.abandoned(); // one of good's two dials: the trial is still out
    expect(breaker.tryAdmit(H, undefined, 'tls:good.example')).toBeInstanceOf(HostUnavailableError);
    // Unsettled past probeTimeout, the next caller of its transport starts it afresh; the old
    // dial's late settlement does not end the new trial.
    clock.advance(4_000);
    const next = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    good.abandoned();
    clock.advance(TRIAL_GRACE);
    expect(breaker.tryAdmit(H, undefined, 'tls:good.example')).toBeInstanceOf(HostUnavailableError);
    // Failed, it is filed with the failed transports (refused open), on a window of its own
    // drawn from the schedule's first level (its outage starts now).
    next.failed(new Error('timed out'));
    expect(breaker.state(H, undefined, 'tls:good.example')).toMatchObject({ state: 'open', retryAfter: 30_000, opens: 2 });
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:good.example')).state).toBe('open');
    const stats = breaker.stats();
    expect([stats.opened, stats.probesGranted]).toEqual([2, 0]); // trials are not the host's probes
  });

  it('a trial one of whose dials reached the host (TCP up, handshake under way) lets dials join up to TRIAL_PATIENCE, 16 out at most; then the rest wait as before', () => {
    const { clock, breaker } = make({ probeTimeout: 5_000 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    const first = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    first.progressed(); // a slow handshake, not a blackhole
    const joined: DialPermit[] = [first];
    clock.advance(TRIAL_GRACE);
    joined.push(admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'))); // was refused: past the grace
    expect(breaker.state(H, undefined, 'tls:good.example')).toMatchObject({ state: 'closed', probing: false }); // a dial would join
    clock.advance(TRIAL_PATIENCE - TRIAL_GRACE - 1);
    joined.push(admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'))); // the last instant
    clock.advance(1);
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:good.example'))).toMatchObject({ state: 'half-open', retryAfter: 5_000 - TRIAL_PATIENCE });
    expect(breaker.state(H, undefined, 'tls:good.example')).toMatchObject({ state: 'half-open', probing: true });
    // At most 16 dials out while it waits on a reached host: a host that accepts and never
    // answers must not be dialled by every caller for a second.
    clock.advance(5_000); // the trial's dials went unreported past probeTimeout: the next starts afresh
    const again = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    first.progressed(); // a dial of the old trial: nothing
    clock.advance(TRIAL_GRACE);
    expect(breaker.tryAdmit(H, undefined, 'tls:good.example')).toBeInstanceOf(HostUnavailableError); // not reached: the grace alone
    again.progressed();
    for (let i = 1; i < 16; i++) admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:good.example')).state).toBe('half-open'); // the 17th waits
    again.succeeded();
    expect(breaker.state(H)?.state).toBe('closed');
  });

  it("a dial reaching the host marks its own transport's trial only", () => {
    const { clock, breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    admitted(breaker.tryAdmit(H, undefined, 'plain')); // a trial of its own, first in the list
    admitted(breaker.tryAdmit(H, undefined, 'tls:good.example')).progressed();
    clock.advance(TRIAL_GRACE);
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'plain')).state).toBe('half-open');
    admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
  });

  it('progressed() moves nothing but a trial: a settled permit, a dial, a probe and a disabled breaker\'s permit ignore it', () => {
    const { clock, breaker } = make();
    const dial = breaker.admit(H);
    dial.progressed();
    dial.succeeded();
    dial.progressed();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    const trial = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    trial.abandoned();
    trial.progressed(); // settled: the next trial of its transport is not its
    const next = admitted(breaker.tryAdmit(H, undefined, 'tls:good.example'));
    clock.advance(TRIAL_GRACE);
    expect(breaker.tryAdmit(H, undefined, 'tls:good.example')).toBeInstanceOf(HostUnavailableError);
    next.abandoned();
    clock.advance(30_000);
    const probe = breaker.admit(H);
    expect(probe.probe).toBe(true);
    probe.progressed();
    expect(breaker.tryAdmit(H)).toBeInstanceOf(HostUnavailableError); // the probe is still out
    probe.abandoned();
    const off = new HostBreaker({ failureThreshold: 0 }).admit(H);
    off.progressed();
    expect(off.settled).toBe(false);
  });

  it("a trial that succeeds closes the host for every transport; once closed, each transport's dials overlap again", () => {
    const { breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    admitted(breaker.tryAdmit(H, undefined, 'tls')).succeeded();
    const a = admitted(breaker.tryAdmit(H, undefined, 'tls'));
    const b = admitted(breaker.tryAdmit(H, undefined, 'tls'));
    expect([a.probe, b.probe]).toEqual([false, false]);
    admitted(breaker.tryAdmit(H, undefined, 'plain')).abandoned();
  });

  it('at most 10 trials are out on an open host at once; a further transport is refused open until one settles', () => {
    const { breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    const out = Array.from({ length: 10 }, (_, i) => admitted(breaker.tryAdmit(H, undefined, `tls:n${i}.example`)));
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:n10.example'))).toMatchObject({ state: 'open', retryAfter: 30_000 });
    out[3]!.abandoned();
    admitted(breaker.tryAdmit(H, undefined, 'tls:n10.example'));
  });

  it("a trial's refusal says half-open to listeners and carries the host's failures and last error", () => {
    const { clock, breaker } = make();
    const cause = new Error('reset by peer');
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed(cause);
    const seen: unknown[] = [];
    breaker.on('refused', (e) => seen.push(e));
    admitted(breaker.tryAdmit(H, undefined, 'plain'));
    clock.advance(TRIAL_GRACE);
    const refused = refusalOf(breaker.tryAdmit(H, undefined, 'plain'));
    expect(seen).toEqual([{ host: H, state: 'half-open' }]);
    expect(refused).toMatchObject({ state: 'half-open', failures: 3, cause });
  });

  it("state() for a transport reads that transport's trial alone, and a trial is over at its probeTimeout exactly", () => {
    const { clock, breaker } = make({ probeTimeout: 5_000 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    admitted(breaker.tryAdmit(H, undefined, 'plain'));
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed', probing: false }); // another's trial
    clock.advance(5_000);
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'closed', probing: false });
    admitted(breaker.tryAdmit(H, undefined, 'plain')).abandoned(); // over: the next is tried
  });

  it('expired trials make room: past 10 transports, one whose trial is over (at probeTimeout exactly) is replaced, even the first', () => {
    const { clock, breaker } = make({ probeTimeout: 5_000 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    for (let i = 0; i < 10; i++) admitted(breaker.tryAdmit(H, undefined, `tls:n${i}.example`));
    clock.advance(5_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls:n10.example'));
    // An expired trial of its own is taken up again, not duplicated: its state reads the new one.
    admitted(breaker.tryAdmit(H, undefined, 'tls:n5.example'));
    clock.advance(TRIAL_GRACE);
    expect(breaker.state(H, undefined, 'tls:n5.example')).toMatchObject({ state: 'half-open', probing: true, retryAfter: 5_000 - TRIAL_GRACE });
  });

  it("re-trying a transport whose trial expired, while another's expired earlier, keeps one trial per transport", () => {
    const { clock, breaker } = make({ probeTimeout: 5_000 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    admitted(breaker.tryAdmit(H, undefined, 'tls:a.example'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:b.example'));
    clock.advance(6_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls:b.example')); // b's record taken up again
    clock.advance(TRIAL_GRACE);
    expect(breaker.state(H, undefined, 'tls:b.example')).toMatchObject({ state: 'half-open', probing: true });
    expect(breaker.tryAdmit(H, undefined, 'tls:b.example')).toBeInstanceOf(HostUnavailableError);
  });

  it('a trial settling after another closed the host moves nothing and does not throw', () => {
    const { breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:wrong.example').failed();
    const a = admitted(breaker.tryAdmit(H, undefined, 'tls:a.example'));
    const b = admitted(breaker.tryAdmit(H, undefined, 'tls:b.example'));
    a.succeeded(); // closes the host, its trials forgotten
    expect(() => b.failed(new Error('late'))).not.toThrow();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats().stale).toBe(1);
  });

  it("a dial admitted while the host was closed, settling later, does not end its transport's trial", () => {
    const { clock, breaker } = make();
    const early = admitted(breaker.tryAdmit(H, undefined, 'plain')); // closed: a plain dial
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls').failed(); // opens, same instant
    admitted(breaker.tryAdmit(H, undefined, 'plain')); // plain's trial
    early.abandoned();
    clock.advance(TRIAL_GRACE);
    expect(breaker.tryAdmit(H, undefined, 'plain')).toBeInstanceOf(HostUnavailableError);
  });

  it("an operator's isolation refuses every transport", () => {
    const { breaker } = make();
    breaker.isolate(H);
    expect(breaker.tryAdmit(H, undefined, 'tls')).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit(H, undefined, 'plain')).toBeInstanceOf(HostUnavailableError);
  });
});

describe('HostBreaker: a transport that never reached the host while another did (one client on the wrong one)', () => {
  const admitted = (answer: DialPermit | HostUnavailableError): DialPermit => {
    if (answer instanceof HostUnavailableError) throw new Error(`refused: ${answer.message}`);
    return answer;
  };

  /** A host the plain clients reached, then a restart: plain dials refused, and one TLS client's dials to the plain port failing too. */
  function restarted(options: HostBreakerOptions = {}): { clock: ManualClock; breaker: HostBreaker } {
    const made = make(options);
    made.breaker.admit(H, undefined, 'plain').succeeded(); // the right clients connected
    for (let i = 0; i < 3; i++) made.breaker.admit(H, undefined, 'plain').failed(new Error('connect ECONNREFUSED'));
    admitted(made.breaker.tryAdmit(H, undefined, 'tls')).failed(new Error('connect timed out')); // its trial
    return made;
  }

  it("its dial after the window is a trial of its own: the host's probe stays free for a transport that reached it, and its failure reopens nothing (an outside review: a redis client with tls against a plain port held the probe for its 2 s connect timeout, locking the right clients out 4-11 s)", () => {
    const { clock, breaker } = restarted({ openDuration: (n) => n * 1_000 });
    clock.advance(2_000); // past the host's window and the TLS transport's own
    const wrong = admitted(breaker.tryAdmit(H, undefined, 'tls')); // first to come: hangs on the plain port
    expect(breaker.stats().probesGranted).toBe(0);
    const right = admitted(breaker.tryAdmit(H, undefined, 'plain')); // not refused half-open behind it
    expect(breaker.stats().probesGranted).toBe(1);
    wrong.failed(new Error('connect timed out'));
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'half-open', probing: true, opens: 1 });
    right.succeeded();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it("it waits windows of its own, drawn from the host's schedule at its own level, each failure the next level; the host's window and level stay as drawn", () => {
    const { clock, breaker } = restarted({ openDuration: (n) => n * 1_000 });
    // The trial that failed while the host was open drew the first (1 s), as the host's first window did.
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 1_000 });
    clock.advance(999);
    const inside = refusalOf(breaker.tryAdmit(H, undefined, 'tls'));
    expect(inside).toMatchObject({ state: 'open', retryAfter: 1 });
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls'))).toBe(inside); // made once a window
    clock.advance(1);
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed', probing: false }); // a dial would be tried
    const second = admitted(breaker.tryAdmit(H, undefined, 'tls'));
    clock.advance(TRIAL_GRACE);
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'half-open', probing: true });
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls')).state).toBe('half-open'); // its trial is out
    second.failed(new Error('connect timed out'));
    const refused = refusalOf(breaker.tryAdmit(H, undefined, 'tls'));
    expect(refused).toMatchObject({ state: 'open', retryAfter: 2_000 }); // level 2, a fresh refusal
    expect(refused).not.toBe(inside);
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 2_000 });
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'half-open', probing: false, opens: 1 });
    expect(breaker.stats()).toMatchObject({ opened: 1, probesGranted: 0 });
  });

  it("a stranger whose own failures opened the host waits a window of its own, then is tried apart from the host's probe", () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 10_000 });
    breaker.admit(H, undefined, 'plain').succeeded();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls').failed(); // a stranger's dials open the host
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 10_000 });
    const inside = refusalOf(breaker.tryAdmit(H, undefined, 'tls'));
    expect(inside).toMatchObject({ state: 'open', retryAfter: 10_000 });
    admitted(breaker.tryAdmit(H, undefined, 'plain')).abandoned(); // the right transport's trial, as before
    clock.advance(10_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(); // its trial: no probe granted
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls'))).toMatchObject({ state: 'open', retryAfter: 20_000 });
    expect(breaker.stats()).toMatchObject({ opened: 1, probesGranted: 0 });
  });

  it("not held to the host's window: a server moved to the stranger's transport fails each of the other's probes, and the stranger is tried at once after each", () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 1_000 });
    breaker.admit(H, undefined, 'plain').succeeded(); // plain reached it
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed(new Error('read ECONNRESET')); // moved to TLS: plain reset
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed(new Error('read ECONNRESET')); // the host's probe: reopened, 2 s
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'open', retryAfter: 2_000, opens: 2 });
    clock.advance(1);
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed' }); // inside the host's window: tried
    admitted(breaker.tryAdmit(H, undefined, 'tls')).succeeded();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it("its trial's success closes the host and makes it the transport that reached it last: it takes the probe from then on, and the other is the stranger (a server moved to TLS)", () => {
    const { clock, breaker } = restarted({ openDuration: (n) => n * 1_000 });
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).succeeded(); // the server took TLS after all
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls').failed(); // opens the host
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed(); // plain's trial: both transports failed now
    clock.advance(1_000);
    expect(admitted(breaker.tryAdmit(H, undefined, 'tls')).probe).toBe(true);
    expect(breaker.stats().probesGranted).toBe(1); // the host's probe
    admitted(breaker.tryAdmit(H, undefined, 'plain')).abandoned(); // a trial of its own, its window drawn at the same instant
    expect(breaker.stats().probesGranted).toBe(1);
  });

  it('a server moved from plain to TLS and back: the plain clients, right again, are tried beside the TLS ones\' hung probe (an outside review: 5-12 s, and once never within 15 s)', () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 1_000 });
    breaker.admit(H, undefined, 'plain').succeeded(); // plain
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed(); // moved to TLS: plain hung up on
    admitted(breaker.tryAdmit(H, undefined, 'tls')).succeeded(); // TLS reached it: closed
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed(); // the plain clients, wrong now, open it
    // A stranger now, whose failures opened it: spaced 1 s, then a trial, then 2 s.
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'open', retryAfter: 1_000 });
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed();
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'open', retryAfter: 2_000 });
    // Moved back to plain (a restart): the TLS clients' dials fail, and plain's spacing is forgotten.
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(new Error('connect ECONNREFUSED'));
    clock.advance(1_000);
    const hung = admitted(breaker.tryAdmit(H, undefined, 'tls')); // the host's probe: a TLS hello a plain server never answers
    expect(breaker.stats().probesGranted).toBe(1);
    const right = admitted(breaker.tryAdmit(H, undefined, 'plain')); // not refused half-open behind it
    right.succeeded();
    expect(breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
    hung.failed(new Error('connect timed out')); // stale: the host is closed
    expect(breaker.state(H)?.state).toBe('closed');
    // Plain reached it last: TLS is the stranger from now on.
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed();
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed();
    clock.advance(10_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).abandoned();
    expect(breaker.stats().probesGranted).toBe(1); // a trial
  });

  it("a failure of the transport that reached the host forgets the stranger's windows; a stranger's own failure does not", () => {
    const { clock, breaker } = restarted({ openDuration: (n) => n * 1_000 });
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(); // level 2: 2 s
    clock.advance(2_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(); // level 3: 3 s
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 3_000 });
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed(); // the host's probe failed: reopened for 2 s
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'open', opens: 2, retryAfter: 2_000 });
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed' }); // its third window forgotten
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(); // tried at once; its own failure spaces it anew, at the first
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 1_000 });
  });

  it("a stranger's trial failing after the host's probe was granted (a new generation) still spaces it; a late failure once the host closed, or of a forgotten host, spaces nothing", () => {
    const { clock, breaker } = restarted({ openDuration: (n) => n * 1_000 });
    clock.advance(1_000); // the stranger's first window, and the host's, over
    const stranger = admitted(breaker.tryAdmit(H, undefined, 'tls'));
    const probe = admitted(breaker.tryAdmit(H, undefined, 'plain')); // the host's probe: a new generation
    expect(probe.probe).toBe(true);
    stranger.failed(new Error('connect timed out')); // stale, but the stranger failed again
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls'))).toMatchObject({ state: 'open', retryAfter: 2_000 });
    probe.succeeded(); // closed
    const late = restarted({ openDuration: (n) => n * 1_000 });
    late.clock.advance(1_000);
    const lateStranger = admitted(late.breaker.tryAdmit(H, undefined, 'tls'));
    admitted(late.breaker.tryAdmit(H, undefined, 'plain')).succeeded(); // closed before the stranger's report
    lateStranger.failed(new Error('connect timed out'));
    for (let i = 0; i < 3; i++) late.breaker.admit(H, undefined, 'tls').failed(); // the stranger opens it again
    expect(late.breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 1_000 }); // its first window, not a second
    const gone = restarted({ openDuration: (n) => n * 1_000 });
    gone.clock.advance(1_000);
    const goneStranger = admitted(gone.breaker.tryAdmit(H, undefined, 'tls'));
    gone.breaker.reset(H);
    expect(() => goneStranger.failed(new Error('late'))).not.toThrow();
    const timeout = admitted(gone.breaker.tryAdmit(H, undefined, 'tls'));
    timeout.abandoned(); // a fresh entry, closed: a plain dial
    expect(gone.breaker.state(H)).toMatchObject({ state: 'closed', failures: 0 });
  });

  it("only a stranger's failed trial spaces it when stale: not its stale success, nor a stale plain dial of it", () => {
    const success = restarted({ openDuration: (n) => n * 1_000 });
    success.clock.advance(1_000);
    const trial = admitted(success.breaker.tryAdmit(H, undefined, 'tls'));
    admitted(success.breaker.tryAdmit(H, undefined, 'plain')); // the host's probe: a new generation, still out
    trial.succeeded(); // stale: neither closes the host nor spaces the stranger
    expect(success.breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed' });
    const dial = make({ openDuration: (n) => n * 1_000 });
    dial.breaker.admit(H, undefined, 'plain').succeeded();
    const early = admitted(dial.breaker.tryAdmit(H, undefined, 'tls')); // a plain dial, the host closed
    dial.breaker.admit(H, undefined, 'tls').failed(); // TLS filed
    for (let i = 0; i < 2; i++) dial.breaker.admit(H, undefined, 'plain').failed(); // opens it: the host's own transport failed
    expect(dial.breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed' });
    early.failed(new Error('late')); // stale, and no trial
    expect(dial.breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed' });
  });

  it("a stranger refused inside its window is told to listeners as 'open', and counted", () => {
    const { breaker } = restarted({ openDuration: (n) => n * 1_000 });
    const seen: unknown[] = [];
    breaker.on('refused', (e) => seen.push(e));
    const before = breaker.stats().refused;
    refusalOf(breaker.tryAdmit(H, undefined, 'tls'));
    expect(seen).toEqual([{ host: H, state: 'open' }]);
    expect(breaker.stats().refused).toBe(before + 1);
  });

  it("a trial of the host's own transport failing forgets the stranger's windows and spaces nothing", () => {
    const { breaker } = make({ openDuration: (n) => n * 10_000 });
    breaker.admit(H, undefined, 'plain').succeeded();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls').failed(); // the stranger opens it: spaced 10 s
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 10_000 });
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed(); // its own transport's trial fails: a restart
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'closed' }); // tried at once
    admitted(breaker.tryAdmit(H, undefined, 'tls')).abandoned();
  });

  it("a success of the transport that reached the host forgets the stranger's windows: the next outage starts it at the first", () => {
    const { clock, breaker } = restarted({ openDuration: (n) => n * 1_000 });
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(); // level 2
    admitted(breaker.tryAdmit(H, undefined, 'plain')).succeeded(); // the host's probe: closed
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed(); // another restart
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(); // its trial, the host open only to plain's failures
    expect(breaker.state(H, undefined, 'tls')).toMatchObject({ state: 'open', retryAfter: 1_000 }); // level 1 again
  });

  it('no transport reached the host yet, or the dial named none: the probe goes to whoever comes first, as before', () => {
    const fresh = make({ openDuration: 1_000 });
    for (let i = 0; i < 3; i++) fresh.breaker.admit(H, undefined, 'plain').failed();
    admitted(fresh.breaker.tryAdmit(H, undefined, 'tls')).failed();
    fresh.clock.advance(1_000);
    expect(admitted(fresh.breaker.tryAdmit(H, undefined, 'tls')).probe).toBe(true);
    expect(fresh.breaker.stats().probesGranted).toBe(1);
    expect(refusalOf(fresh.breaker.tryAdmit(H, undefined, 'plain')).state).toBe('half-open');

    const unnamed = restarted({ openDuration: 1_000 });
    unnamed.clock.advance(1_000);
    unnamed.breaker.admit(H).abandoned(); // a dial naming no transport is never a stranger: the host's probe
    expect(unnamed.breaker.stats().probesGranted).toBe(1);

    const anyProven = make({ openDuration: 1_000 });
    anyProven.breaker.admit(H).succeeded(); // a dial that named none reached it: every transport did
    for (let i = 0; i < 3; i++) anyProven.breaker.admit(H, undefined, 'plain').failed();
    admitted(anyProven.breaker.tryAdmit(H, undefined, 'tls')).failed();
    anyProven.clock.advance(1_000);
    expect(admitted(anyProven.breaker.tryAdmit(H, undefined, 'tls')).probe).toBe(true);
    expect(anyProven.breaker.stats().probesGranted).toBe(1);
  });

  it('the other way round: TLS reached the host, a plain client of it is the stranger', () => {
    const { clock, breaker } = make({ openDuration: 1_000 });
    breaker.admit(H, undefined, 'tls:a.example').succeeded();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:a.example').failed();
    admitted(breaker.tryAdmit(H, undefined, 'plain')).failed();
    clock.advance(1_000);
    const plain = admitted(breaker.tryAdmit(H, undefined, 'plain')); // a trial of its own
    expect(breaker.stats().probesGranted).toBe(0);
    expect(admitted(breaker.tryAdmit(H, undefined, 'tls:a.example')).probe).toBe(true);
    expect(breaker.stats().probesGranted).toBe(1);
    plain.failed();
    expect(breaker.state(H, undefined, 'plain')).toMatchObject({ state: 'open', retryAfter: 1_000 });
  });

  it("two right names that both reached the host share its probe while it is dead: neither is a stranger (an outside review: each on its own pace was twice one name's dials, 4 names 3.2 times)", () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 1_000 });
    admitted(breaker.tryAdmit(H, undefined, 'tls:a.example')).succeeded();
    admitted(breaker.tryAdmit(H, undefined, 'tls:b.example')).succeeded(); // the last to reach it
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:a.example').failed(new Error('connect ECONNREFUSED')); // it dies
    admitted(breaker.tryAdmit(H, undefined, 'tls:b.example')).failed(new Error('connect ECONNREFUSED')); // b's trial
    for (let window = 1; window <= 3; window++) {
      clock.advance(window * 1_000 * 1.5);
      const probe = admitted(breaker.tryAdmit(H, undefined, 'tls:a.example'));
      expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:b.example')).state).toBe('half-open'); // behind a's probe, not a dial of its own
      probe.failed(new Error('connect ECONNREFUSED'));
      expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:b.example')).state).toBe('open');
    }
    expect(breaker.stats()).toMatchObject({ probesGranted: 3 });
  });

  it("a wrong name first seen in the outage takes the probe and is hung up on once the host is back: the host's other names are tried at once, not refused for the window its failure draws (an outside review: ~7 s, or not within 9 s, where plain clients were back in 0.1-0.3 s)", () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 1_000 });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:right.example').failed(new Error('connect ECONNREFUSED')); // the restart
    admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('connect ECONNREFUSED')); // its first dial, a trial
    clock.advance(1_000); // the server is back
    const wrong = admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')); // not known as wrong: the host's probe
    expect(breaker.stats().probesGranted).toBe(1);
    wrong.progressed(); // TCP up
    wrong.failed(new Error('socket hang up')); // the server hangs up on its name
    expect(breaker.stats().opened).toBe(3); // the right name's, the wrong name's first trial's, its probe's
    expect(refusalOf(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).state).toBe('open');
    const right = admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')); // a trial of its own, at once
    right.succeeded();
    expect(breaker.state(H, undefined, 'tls:right.example')).toMatchObject({ state: 'closed', failures: 0 });

    // A probe that never reached the host (refused, or its TCP connect timed out) leaves every name's failure standing.
    const dead = make({ openDuration: (n) => n * 1_000 });
    admitted(dead.breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded();
    for (let i = 0; i < 3; i++) dead.breaker.admit(H, undefined, 'tls:right.example').failed(new Error('connect ECONNREFUSED'));
    admitted(dead.breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('connect ECONNREFUSED'));
    dead.clock.advance(1_000);
    admitted(dead.breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('connect ECONNREFUSED'));
    expect(refusalOf(dead.breaker.tryAdmit(H, undefined, 'tls:right.example')).state).toBe('open');
  });

  it("a right name's first failure in a streak of a wrong name's starts the outage anew: a sub-second restart does not open the host (an outside review: opened within 0.1-0.4 s of the kill, right clients on kept-alive connections back 0.25-0.7 s after the server, plain 0.03-0.2 s)", () => {
    const { clock, breaker } = make({ minOutage: 1_500, openDuration: 1_000 });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // then kept alive: no more dials of theirs
    for (let i = 0; i < 15; i++) {
      admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('socket hang up')); // hung up on its name, all along
      clock.advance(100);
    }
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(new Error('connect ECONNREFUSED')); // the restart, 1.5 s into the wrong name's streak
    clock.advance(100);
    admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('connect ECONNREFUSED'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(new Error('connect ECONNREFUSED'));
    clock.advance(300);
    expect(breaker.state(H, undefined, 'tls:right.example')).toMatchObject({ state: 'closed' });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // back 400 ms after the kill
    expect(breaker.stats().opened).toBe(0);

    // A host that stays dead opens 1.5 s after the right name's first failure.
    for (let i = 0; i < 14; i++) {
      admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('socket hang up'));
      clock.advance(100);
    }
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(new Error('connect ECONNREFUSED'));
    clock.advance(1_499);
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(new Error('connect ECONNREFUSED'));
    expect(breaker.stats().opened).toBe(0);
    clock.advance(1);
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(new Error('connect ECONNREFUSED'));
    expect(breaker.stats().opened).toBe(1);
  });

  it("a right name refused once in a restart after minutes of a wrong name's failures waits the schedule's first window, not the wrong name's grown one (before: 4.6 s after the server was back, where plain clients took 0.1 s)", () => {
    const clock = new ManualClock(1_000);
    const breaker = new HostBreaker({ clock }); // the defaults: minOutage 1.5 s, windows 1 s doubling to 30 s, 250 ms while refused
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // then kept alive: no more dials of theirs
    for (let t = 0; t < 300_000; t += 100) {
      const answer = breaker.tryAdmit(H, undefined, 'tls:wrong.example');
      if (!(answer instanceof HostUnavailableError)) {
        answer.progressed();
        answer.failed(new Error('socket hang up'));
      }
      clock.advance(100);
    }
    expect(breaker.state(H, undefined, 'tls:wrong.example')!.retryAfter).toBeGreaterThan(1_000); // its window has grown
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:443'), { code: 'ECONNREFUSED', syscall: 'connect' });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(refused); // the server restarts: a trial of its own, refused
    const right = breaker.state(H, undefined, 'tls:right.example')!;
    expect(right.state).toBe('open');
    expect(right.retryAfter).toBeLessThanOrEqual(313); // the restart window (250 ms, +25 % jitter at most)
    clock.advance(right.retryAfter);
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // back
    expect(breaker.state(H, undefined, 'tls:right.example')).toMatchObject({ state: 'closed' });
  });

  it("a name stops being a stranger once it reaches the host itself; the others stay strangers; the name that succeeds is never made one", () => {
    const { clock, breaker } = make({ failureThreshold: 4, openDuration: (n) => n * 1_000 });
    const refused = (): Error => new Error('connect ECONNREFUSED');
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded();
    admitted(breaker.tryAdmit(H, undefined, 'tls:w1.example')).failed(new Error('socket hang up'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:w2.example')).failed(new Error('socket hang up'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(refused()); // its own failure: never a stranger by its success
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // w1 and w2 are strangers now
    admitted(breaker.tryAdmit(H, undefined, 'tls:w1.example')).succeeded(); // the server serves w1 now: not a stranger; w2 still is
    for (let i = 0; i < 4; i++) breaker.admit(H, undefined, 'tls:right.example').failed(refused()); // an outage
    admitted(breaker.tryAdmit(H, undefined, 'tls:w2.example')).failed(refused()); // a stranger's trial: a window of its own
    clock.advance(10_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).abandoned(); // right is no stranger: the host's probe
    expect(breaker.stats().probesGranted).toBe(1);
    admitted(breaker.tryAdmit(H, undefined, 'tls:w2.example')).abandoned(); // still a stranger: a trial, not refused behind a probe
    admitted(breaker.tryAdmit(H, undefined, 'tls:w1.example')).failed(refused()); // w1 shares the host's fate: its first failure here
    clock.advance(10_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls:w1.example')).abandoned(); // failed, and no stranger: the host's probe
    expect(breaker.stats().probesGranted).toBe(2);
  });

  it('at most 8 strange names: a ninth failing beside a right one is tried as the host\'s own', () => {
    const { clock, breaker } = make({ openDuration: 1_000 });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded();
    for (let i = 1; i <= 8; i++) admitted(breaker.tryAdmit(H, undefined, `tls:w${i}.example`)).failed(new Error('socket hang up'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // w1..w8 strange
    admitted(breaker.tryAdmit(H, undefined, 'tls:w9.example')).failed(new Error('socket hang up'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // w9 would be the ninth: not kept
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:right.example').failed(new Error('connect ECONNREFUSED'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:w9.example')).failed(new Error('connect ECONNREFUSED')); // its first failure: a trial
    clock.advance(5_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls:w9.example')).abandoned();
    expect(breaker.stats().probesGranted).toBe(1); // the host's probe: w9 is not a stranger
  });

  it("a transport's first failure moves the outage's start only forward: a dial of it admitted before the streak began, failing late, neither counts nor starts it earlier", () => {
    const { clock, breaker } = make({ minOutage: 1_500 });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded();
    const slow = admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')); // admitted at 0 ms, still out
    for (let i = 0; i < 3; i++) {
      clock.advance(100);
      admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('socket hang up')); // the streak: from 100 ms
    }
    clock.advance(1_299); // 1 599 ms: 1 499 ms into the streak
    slow.failed(new Error('connect ETIMEDOUT')); // its transport's first failure, admitted before the streak
    expect(breaker.state(H)).toMatchObject({ state: 'closed' }); // counted from 0 ms it would have opened
  });

  it("a failed trial of the host's own transport reopens it (the event says reopened, and the outage keeps its start)", () => {
    const { clock, breaker } = make({ openDuration: 1_000 });
    const opened: boolean[] = [];
    breaker.on('opened', (e) => opened.push(e.reopened));
    let closedAfter = -1;
    breaker.on('closed', (e) => (closedAfter = e.openedFor));
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'plain').failed(new Error('connect ECONNREFUSED'));
    clock.advance(500);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).failed(new Error('connect ECONNREFUSED')); // TLS's own outage starts now
    expect(opened).toEqual([false, true]);
    clock.advance(1_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls')).succeeded();
    expect(closedAfter).toBe(1_500); // open since the first failure's window, not the trial's
  });

  it("a transport that is neither 'plain' nor TLS ('h3' from JavaScript) counts as any: its failure refuses every transport", () => {
    const { breaker } = make();
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'h3' as never).failed(new Error('connect ECONNREFUSED'));
    for (const t of ['plain', 'tls', 'tls:a.example'] as const) expect(breaker.tryAdmit(H, undefined, t)).toBeInstanceOf(HostUnavailableError);
  });

  it("another TLS server name than the one that reached the host last is a stranger too: a wrong-name client's dial after a restart does not take the probe (an outside review: a client sending a name the server hangs up on, through a 2 s restart, kept the right-name clients refused ~7 s, 0.3-0.4 s without it)", () => {
    const { clock, breaker } = make({ openDuration: (n) => n * 1_000 });
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded();
    admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('socket hang up')); // its name is refused by SNI
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).succeeded(); // the right clients are served between
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:right.example').failed(new Error('connect ECONNREFUSED')); // the restart
    admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')).failed(new Error('connect ECONNREFUSED')); // a trial of its own
    expect(breaker.state(H, undefined, 'tls:wrong.example')).toMatchObject({ state: 'open', retryAfter: 1_000 });
    clock.advance(2_000); // the server is back
    const wrong = admitted(breaker.tryAdmit(H, undefined, 'tls:wrong.example')); // first to come: a trial of its own
    expect(breaker.stats().probesGranted).toBe(0);
    const right = admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')); // the host's probe, not refused behind the wrong name
    expect(breaker.stats().probesGranted).toBe(1);
    wrong.failed(new Error('socket hang up'));
    expect(breaker.stats().opened).toBe(1); // its hang-up reopened nothing
    right.succeeded();
    expect(breaker.state(H, undefined, 'tls:right.example')).toMatchObject({ state: 'closed', failures: 0 });
    // A name that reached the host is the one that did last: the other name is a stranger only while it is not.
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:right.example').failed(new Error('connect ECONNREFUSED'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:other.example')).succeeded(); // another right name, tried apart, reached it
    for (let i = 0; i < 3; i++) breaker.admit(H, undefined, 'tls:other.example').failed(new Error('connect ECONNREFUSED'));
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example')).failed(new Error('connect ECONNREFUSED')); // now the stranger
    clock.advance(3_000);
    admitted(breaker.tryAdmit(H, undefined, 'tls:right.example'));
    expect(breaker.stats().probesGranted).toBe(1);
    admitted(breaker.tryAdmit(H, undefined, 'tls:other.example'));
    expect(breaker.stats().probesGranted).toBe(2);
  });
});

describe('HostBreaker.resetAll: a test suite sharing one breaker', () => {
  it('forgets every host (open, isolated, closed): each is admitted as never seen; the counters stay', () => {
    const { breaker } = make({ failureThreshold: 1, minOutage: 0 });
    breaker.admit('a:1').failed();
    breaker.admit('b:1').succeeded();
    breaker.isolate('c:1');
    expect(() => breaker.admit('a:1')).toThrow(HostUnavailableError);
    expect(breaker.resetAll()).toBe(3);
    expect(breaker.stats()).toMatchObject({ hosts: 0, failed: 1, succeeded: 1, opened: 1 });
    for (const h of ['a:1', 'b:1', 'c:1']) {
      expect(breaker.state(h)).toBeUndefined();
      expect(breaker.admit(h).probe).toBe(false);
    }
    expect(breaker.resetAll()).toBe(3);
    expect(breaker.resetAll()).toBe(0);
    breaker.admit('a:1').failed(); // the table works after it: a fresh host opens again
    expect(() => breaker.admit('a:1')).toThrow(HostUnavailableError);
  });
});
