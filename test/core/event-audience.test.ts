import diagnosticsChannel from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import { Audience, EventHub } from '../../src/core/events.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { onRetryEvent, retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

// An event that fires per call (a refusal, a call's end) is checked with a held Audience instead
// of two map lookups: the record must see whoever starts listening after it was taken, by either
// route, and stop seeing them when they leave.

interface Events {
  ping: { n: number };
  pong: { n: number };
}
const NAMES = { ping: true, pong: true } as const;

describe('EventHub audiences', () => {
  it('one record per event for the hub’s life, naming its channel', () => {
    const hub = new EventHub<Events>('audience-test-a', NAMES);
    const ping = hub.audience('ping');
    expect(ping).toBeInstanceOf(Audience);
    expect(hub.audience('ping')).toBe(ping);
    expect(hub.audience('pong')).not.toBe(ping);
    expect(ping.channel.name).toBe('dialguard:audience-test-a:ping');
    expect(ping.heard).toBe(false);
  });

  it('hears a listener added after the record was taken, and not once it stopped', () => {
    const hub = new EventHub<Events>('audience-test-b', NAMES);
    const ping = hub.audience('ping');
    const heard: number[] = [];
    const stop = hub.on('ping', (p) => heard.push(p.n));
    expect(ping.heard).toBe(true);
    expect(hub.active('ping')).toBe(true);
    expect(hub.audience('pong').heard).toBe(false); // another event's listener is not this one's
    hub.emit('ping', { n: 1 });
    stop();
    expect(ping.heard).toBe(false);
    expect(hub.active('ping')).toBe(false);
    hub.emit('ping', { n: 2 });
    expect(heard).toEqual([1]);
  });

  it('hears a diagnostics_channel subscriber added after the record was taken', () => {
    const hub = new EventHub<Events>('audience-test-c', NAMES);
    const ping = hub.audience('ping');
    const got: unknown[] = [];
    const onMessage = (m: unknown): void => {
      got.push(m);
    };
    diagnosticsChannel.subscribe('dialguard:audience-test-c:ping', onMessage);
    try {
      expect(ping.heard).toBe(true);
      hub.emit('ping', { n: 3 });
      expect(got).toEqual([{ n: 3 }]);
    } finally {
      diagnosticsChannel.unsubscribe('dialguard:audience-test-c:ping', onMessage);
    }
    expect(ping.heard).toBe(false);
  });

  it('a breaker’s refusals reach a `refused` listener that came after the breaker was made', () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, failureThreshold: 1, minOutage: 0 });
    breaker.admit('audience.test', 80).failed(new Error('down'));
    expect(breaker.tryAdmit('audience.test', 80)).toBeInstanceOf(Error); // refused, nobody listening
    const refused: string[] = [];
    using _stop = breaker.on('refused', (e) => refused.push(`${e.host} ${e.state}`));
    expect(breaker.tryAdmit('audience.test', 80)).toBeInstanceOf(Error);
    expect(refused).toEqual(['audience.test:80 open']);
  });

  it('a call’s end reaches a `settled` listener that subscribed while the call ran', async () => {
    const ends: boolean[] = [];
    let stop: (() => void) | undefined;
    await retry(async () => {
      stop = onRetryEvent('settled', (e) => ends.push(e.ok));
      return 1;
    });
    stop!();
    await retry(async () => 2);
    expect(ends).toEqual([true]);
  });
});

describe('EventHub.on checks what it is given', () => {
  it('an event it never emits, or a listener that is not a function, is a TypeError at once (it broke the next event: an outside review)', () => {
    const hub = new EventHub<Events>('audience-test-d', NAMES);
    expect(() => hub.on('nope' as 'ping', () => {})).toThrow(/unknown event "nope" \(the events are "ping", "pong"\)/);
    for (const bad of [undefined, 1, {}, 'f']) expect(() => hub.on('ping', bad as unknown as () => void)).toThrow(TypeError);
    const heard: number[] = [];
    hub.on('ping', (e) => heard.push(e.n));
    hub.emit('ping', { n: 1 });
    expect(heard).toEqual([1]);
  });
});
