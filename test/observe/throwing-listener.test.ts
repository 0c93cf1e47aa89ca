/**
 * A listener or subscriber that throws on a per-call event: contained, and reported once per
 * listener, not once per event. 10 000 refusals with one throwing `subscribe()` subscriber and one
 * throwing `breaker.on()` listener wrote 20 000 warning lines (and took 18 times as long as with
 * quiet subscribers): a dead host turned into a log flood.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { subscribe } from '../../src/observe/channels.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

afterEach(() => vi.restoreAllMocks());

describe('throwing listeners on a per-call event', () => {
  it('10 000 refusals: each throwing listener and subscriber is reported once, every refusal still made', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000, clock: new ManualClock() });
    breaker.admit('dead.test:1').failed(new Error('down'));
    const calls = { subscriber: 0, listener: 0, other: 0 };
    const stops = [
      subscribe('dialguard:breaker:refused', () => {
        calls.subscriber++;
        throw new Error('metrics backend down');
      }),
      breaker.on('refused', () => {
        calls.listener++;
        throw new Error('listener bug');
      }),
      breaker.on('refused', () => {
        calls.other++;
        throw new Error('another listener bug');
      }),
    ];
    try {
      for (let i = 0; i < 10_000; i++) expect(breaker.tryAdmit('dead.test:1')).toBeInstanceOf(Error);
    } finally {
      for (const stop of stops) stop();
    }
    expect(calls).toEqual({ subscriber: 10_000, listener: 10_000, other: 10_000 }); // each still hears every event
    expect(breaker.stats().refused).toBe(10_000);
    expect(warn.mock.calls.map((c) => String(c[0])).sort()).toEqual([
      "dialguard: a listener of 'refused' threw (reported once): Error: another listener bug",
      "dialguard: a listener of 'refused' threw (reported once): Error: listener bug",
      "dialguard: a subscriber of 'dialguard:breaker:refused' threw (reported once): Error: metrics backend down",
    ]); // was 30 000
  });
});
