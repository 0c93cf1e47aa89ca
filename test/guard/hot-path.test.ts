/**
 * The refusal's hot path keeps the rules whatever order hosts are asked in: recency when the
 * newest host is asked again (the breaker relinks it like any other), and hostKey's memoised key
 * of each host and port however they alternate. These pin that.
 */
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { hostKey } from '../../src/guard/host-key.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

describe('HostBreaker: recency when the newest host is asked again', () => {
  it('asking the newest host again and again still leaves the least recent one to evict', () => {
    const breaker = new HostBreaker({ capacity: 2 });
    breaker.admit('a:1').succeeded();
    breaker.admit('b:1').succeeded();
    for (let i = 0; i < 5; i++) breaker.admit('b:1').succeeded(); // b is already newest
    breaker.admit('c:1').succeeded();
    expect(breaker.state('a:1')).toBeUndefined();
    expect(breaker.state('b:1')).toBeDefined();

    breaker.admit('b:1').succeeded(); // moves b behind c
    for (let i = 0; i < 5; i++) breaker.admit('b:1').succeeded();
    breaker.admit('d:1').succeeded();
    expect(breaker.state('c:1')).toBeUndefined();
    expect(breaker.state('b:1')).toBeDefined();
    expect(breaker.stats()).toMatchObject({ hosts: 2, evictedCapacity: 2 });
  });

  it('a host isolated after the newest one was asked is newer than it: asking that one again moves it', () => {
    const breaker = new HostBreaker({ capacity: 3 });
    breaker.admit('a:1').succeeded();
    breaker.admit('b:1').succeeded(); // b newest
    breaker.isolate('c:1', 0); // c inserted after b (its isolation over at once: an isolated host is never evicted)
    breaker.admit('b:1').succeeded(); // b must move behind c
    breaker.admit('d:1').succeeded(); // evicts a
    breaker.admit('e:1').succeeded(); // evicts the least recent of c and b: c
    expect(breaker.state('a:1')).toBeUndefined();
    expect(breaker.state('c:1')).toBeUndefined();
    expect(breaker.state('b:1')).toBeDefined();
  });

  it('a newest host that was swept as idle comes back as a new entry, and is then kept', () => {
    const clock = new ManualClock();
    const breaker = new HostBreaker({ clock, idleRetention: 1_000, sweepInterval: 0, failureThreshold: 1 });
    breaker.admit('a:1').failed(); // a opens, and is the newest
    clock.advance(2_000);
    breaker.admit('b:1').succeeded(); // the sweep forgets a (idle), then b is added
    expect(breaker.state('a:1')).toBeUndefined();
    breaker.admit('a:1').succeeded(); // a fresh, closed entry
    expect(breaker.state('a:1')?.state).toBe('closed');
    clock.advance(500);
    breaker.admit('a:1').succeeded(); // newest again: its use is still recorded
    clock.advance(700); // b idle 1 200 ms, a 700 ms
    breaker.admit('a:1').succeeded();
    expect(breaker.state('b:1')).toBeUndefined();
    expect(breaker.state('a:1')).toBeDefined();
  });
});

describe('hostKey: hosts and ports asked in turn', () => {
  it('gives each host and port its own key, however they alternate', () => {
    expect(hostKey('Example.COM', 80)).toBe('example.com:80');
    expect(hostKey('Example.COM', 80)).toBe('example.com:80');
    expect(hostKey('Example.COM', 81)).toBe('example.com:81');
    expect(hostKey('Example.COM', '80')).toBe('example.com:80');
    expect(hostKey('other.example', 81)).toBe('other.example:81');
    expect(hostKey('Example.COM:9')).toBe('example.com:9');
    expect(hostKey('Example.COM', 81)).toBe('example.com:81');
  });

  it('still refuses a bad port or host right after a good one', () => {
    expect(hostKey('example.com', 80)).toBe('example.com:80');
    expect(() => hostKey('example.com', 70_000)).toThrow(TypeError);
    expect(() => hostKey('', 80)).toThrow(TypeError);
    expect(hostKey('example.com', 80)).toBe('example.com:80');
  });
});
