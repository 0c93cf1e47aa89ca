/**
 * A dial that timed out on a bound shorter than its host's dials take is its caller's choice, not
 * the host's failure (an outside review, r131): a GuardedHttpsAgent with `connectTimeout: 1`
 * (meant as seconds) timed out in TLS against a live nginx, each timeout counted, and the host
 * opened within 1.5 s for every client of the shared breaker: a healthy keep-alive agent beside
 * it had 9-50 of its new connections refused in 6 s (plain agents: 0). The breaker learns how
 * long the host's dials take from its successes; while it is closed, a timeout whose bound was
 * shorter counts nothing. Driven on a ManualClock.
 */
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, HostUnavailableError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const HOST = 'h.test:443';

function breaker(clock: ManualClock): HostBreaker {
  return new HostBreaker({ clock, failureThreshold: 3, minOutage: 0, random: () => 0 });
}

/** One dial admitted now that succeeds `took` ms later. */
function succeed(b: HostBreaker, clock: ManualClock, took: number): void {
  const permit = b.tryAdmit(HOST);
  if (permit instanceof HostUnavailableError) throw permit;
  clock.advance(took);
  permit.succeeded();
}

/** One dial admitted now that times out on its bound `timeout` ms (in `phase`), `wrap`ped as a client would. */
function timeOut(b: HostBreaker, clock: ManualClock, timeout: number, wrap = (e: Error): unknown => e): void {
  const permit = b.tryAdmit(HOST);
  if (permit instanceof HostUnavailableError) throw permit;
  clock.advance(timeout);
  permit.failed(wrap(new ConnectTimeoutError(HOST, timeout, 'tls')));
}

describe('HostBreaker: a timeout shorter than the host needs is not the host\'s failure', () => {
  it('a host whose dials take 8 ms: 20 dials timing out at 1 ms leave it closed (were: open after 3)', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    for (let i = 0; i < 20; i++) timeOut(b, clock, 1);
    expect(b.state(HOST)?.state).toBe('closed');
    expect(b.state(HOST)?.failures).toBe(0);
    expect(b.stats().abandoned).toBe(20);
    expect(b.tryAdmit(HOST)).not.toBeInstanceOf(HostUnavailableError);
  });

  it('a bound the host had time enough in still counts: 3 timeouts at 2 500 ms open it', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    for (let i = 0; i < 3; i++) timeOut(b, clock, 2_500);
    expect(b.state(HOST)?.state).toBe('open');
  });

  it('with no success yet nothing is known: short timeouts count', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    for (let i = 0; i < 3; i++) timeOut(b, clock, 1);
    expect(b.state(HOST)?.state).toBe('open');
  });

  it('found on the cause chain, as clients wrap it (fetch failed, a gRPC status)', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    for (let i = 0; i < 5; i++) timeOut(b, clock, 1, (e) => new TypeError('fetch failed', { cause: e }));
    expect(b.state(HOST)?.state).toBe('closed');
  });

  it('what the host needs falls to a faster success at once, and rises a quarter of the way to a slower one', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    succeed(b, clock, 408); // needs: 8 + 400 / 4 = 108
    timeOut(b, clock, 100); // shorter than 108: not counted
    expect(b.state(HOST)?.failures).toBe(0);
    timeOut(b, clock, 110); // longer: counted
    expect(b.state(HOST)?.failures).toBe(1);
    succeed(b, clock, 4); // needs: 4
    timeOut(b, clock, 5); // counted
    expect(b.state(HOST)?.failures).toBe(1);
    timeOut(b, clock, 3); // not
    expect(b.state(HOST)?.failures).toBe(1);
  });

  it('the first success sets the need as it took; a bound equal to the need is time enough; a 0 ms success then a slower one', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    timeOut(b, clock, 2); // 2 < 8: not counted
    expect(b.state(HOST)?.failures).toBe(0);
    timeOut(b, clock, 8); // as long as the host needs: counted
    expect(b.state(HOST)?.failures).toBe(1);
    const c = breaker(clock);
    const fresh = c.tryAdmit(HOST);
    if (fresh instanceof HostUnavailableError) throw fresh;
    fresh.succeeded(); // 0 ms: needs 0
    succeed(c, clock, 4); // a quarter of the way up: 1
    const permit = c.tryAdmit(HOST);
    if (permit instanceof HostUnavailableError) throw permit;
    clock.advance(2);
    permit.failed(new ConnectTimeoutError(HOST, 2, 'tcp')); // 2 >= 1: counted
    expect(c.state(HOST)?.failures).toBe(1);
  });

  it('once open, a short timeout of the probe still fails it: its caller waits the window, not a probe per call', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    for (let i = 0; i < 3; i++) timeOut(b, clock, 2_500); // the host went silent: open
    expect(b.state(HOST)?.state).toBe('open');
    clock.advance(b.state(HOST)!.retryAfter);
    timeOut(b, clock, 1); // the probe, on a 1 ms bound
    expect(b.state(HOST)?.state).toBe('open');
    expect(b.tryAdmit(HOST)).toBeInstanceOf(HostUnavailableError);
  });

  it('other failures are untouched: refusals and resets count as before', () => {
    const clock = new ManualClock(0);
    const b = breaker(clock);
    succeed(b, clock, 8);
    for (let i = 0; i < 3; i++) {
      const permit = b.tryAdmit(HOST);
      if (permit instanceof HostUnavailableError) throw permit;
      permit.failed(Object.assign(new Error('connect ECONNRESET'), { code: 'ECONNRESET' }));
    }
    expect(b.state(HOST)?.state).toBe('open');
  });
});
