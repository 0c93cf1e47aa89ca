/**
 * Cost that stays flat as the hosts grow (issue 17), proved by counting, not timing: how many
 * spellings `hostKey` parses, how many it remembers, and how many hosts one admit forgets.
 */
import { describe, expect, it, vi } from 'vitest';
import net from 'node:net';
import { connect, isLiteral } from '../../src/guard/connect.js';
import { HostBreaker, spellingsHeld } from '../../src/guard/host-breaker.js';
import { HostUnavailableError } from '../../src/core/errors.js';
import { hostKey, hostKeyMemoStats } from '../../src/guard/host-key.js';
import { ManualClock } from '../../src/testing/index.js';
import { seededRandom } from '../../src/testing/index.js';
import { collectGarbage } from '../helpers/gc.js';

function ip(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

describe('hostKey at scale', () => {
  it('a breaker at capacity 4096 refusing URL spellings in rotation parses each spelling once, not once per refusal (the 1 024-entry cliff)', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, capacity: 4_096, openDuration: 600_000 });
    const hosts = Array.from({ length: 4_096 }, (_, i) => `https://Rotation-${i}.example`);
    for (const h of hosts) breaker.admit(h).failed();
    const before = hostKeyMemoStats().parses;
    for (let pass = 0; pass < 3; pass++) for (const h of hosts) expect(breaker.tryAdmit(h)).toBeInstanceOf(Error);
    expect(hostKeyMemoStats().parses - before).toBe(0);
    expect(breaker.stats()).toMatchObject({ hosts: 4_096, refused: 3 * 4_096 });
  });

  it('a raised capacity (65 536) keeps every one of its spellings memoised too', () => {
    const n = 20_000;
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, capacity: 65_536, openDuration: 600_000 });
    expect(hostKeyMemoStats().generation).toBeGreaterThanOrEqual(2 * 65_536);
    const hosts = Array.from({ length: n }, (_, i) => `Raised-${i}.EXAMPLE:11211`);
    for (const h of hosts) breaker.admit(h).failed();
    const before = hostKeyMemoStats().parses;
    for (const h of hosts) expect(breaker.tryAdmit(h)).toBeInstanceOf(Error);
    expect(hostKeyMemoStats().parses - before).toBe(0);
  });

  it('a spelling that is already its key (what connect() and every breaker key pass) is never parsed nor put in the spelling memo, however many there are; with a numeric port its key is remembered, bounded', () => {
    const before = hostKeyMemoStats();
    let wrong = 0;
    for (let i = 0; i < 100_000; i++) {
      if (hostKey(ip(i), 11211) !== `${ip(i)}:11211`) wrong++;
      if (hostKey(`${ip(i)}:80`) !== `${ip(i)}:80`) wrong++;
    }
    expect(wrong).toBe(0);
    const after = hostKeyMemoStats();
    expect(after.parses).toBe(before.parses);
    expect(after.entries).toBe(before.entries);
    expect(after.built - before.built).toBe(100_000); // each host:port once; `host:port` spellings are returned as given
    expect(after.portKeys).toBeLessThanOrEqual(2 * after.generation);
  });

  it.each([
    ['az09-._', undefined, 'az09-._'],
    ['a', 0, 'a:0'],
    ['z', 65_535, 'z:65535'],
    ['a.b:0', undefined, 'a.b:0'],
    ['a.b:1', undefined, 'a.b:1'],
    ['a.b:65535', undefined, 'a.b:65535'],
    ['9.9.9.9:10', undefined, '9.9.9.9:10'],
  ])('%s (port %s) is its own key: %s, with no parse and no memo entry', (host, port, key) => {
    const before = hostKeyMemoStats();
    expect(hostKey(host, port)).toBe(key);
    const after = hostKeyMemoStats();
    expect([after.parses - before.parses, after.entries - before.entries]).toEqual([0, 0]);
  });

  it.each([
    ['parse-upper-A', undefined, 'parse-upper-a'],
    ['parse-dot.', undefined, 'parse-dot.'],
    ['parse-zero.test:080', undefined, 'parse-zero.test:80'],
    ['parse-port.test:', undefined, 'parse-port.test'],
    ['parse-string-port.test', '80', 'parse-string-port.test:80'],
    ['parse-override.test:1', 2, 'parse-override.test:2'],
    ['[::2]:80', undefined, '[::2]:80'],
    ['parse-at@', undefined, 'parse-at@'],
    ['parse-brace{', undefined, 'parse-brace{'],
    ['parse-slash/', undefined, 'parse-slash/'],
    ['parse-backtick`', undefined, 'parse-backtick`'],
  ])('%s (port %s) is not its own key: parsed once to %s, then remembered', (host, port, key) => {
    const before = hostKeyMemoStats().parses;
    expect(hostKey(host, port)).toBe(key);
    expect(hostKey(host, port)).toBe(key);
    expect(hostKeyMemoStats().parses - before).toBe(1);
  });

  it('a hostile stream of distinct URL spellings (past two generations) holds at most two generations of the memo', () => {
    const { generation } = hostKeyMemoStats();
    const before = hostKeyMemoStats().parses;
    for (let i = 0; i < 2 * generation + 1_000; i++) hostKey(`https://Hostile-${i}.example/`);
    const { entries, parses } = hostKeyMemoStats();
    expect(parses - before).toBe(2 * generation + 1_000);
    expect(entries).toBeLessThanOrEqual(2 * generation);
    expect(entries).toBeGreaterThanOrEqual(generation); // still remembering the recent ones
  });

  it('the unparsed path and the parsed path agree on every spelling (1 500 random ones, each also upper-cased with a trailing dot)', () => {
    const random = seededRandom(17);
    const pick = (alphabet: string, n: number): string =>
      Array.from({ length: n }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    const outcome = (f: () => string): string => {
      try {
        return f();
      } catch (err) {
        return `throws ${(err as Error).name}`;
      }
    };
    for (let i = 0; i < 1_500; i++) {
      let name = pick('abcxyz0189-_.', 1 + Math.floor(random() * 8));
      if (name.endsWith('.')) name += 'a';
      const port = random() < 0.3 ? '' : `:${pick('0123456789', Math.floor(random() * 7))}`;
      const plain = `${name}${port}`;
      const variant = `${name.toUpperCase()}.${port}`; // never its own key: always parsed
      // The trailing dot stays in the key (the absolute name is another host): without it, the same.
      const undotted = (key: string): string => key.replace(/\.(?=:\d+$|$)/, '');
      expect(outcome(() => hostKey(plain))).toBe(outcome(() => undotted(hostKey(variant))));
      const n = [0, 1, 80, 65_535, 65_536, -1, 1.5, Math.floor(random() * 70_000)][i % 8]!;
      expect(outcome(() => hostKey(name, n))).toBe(outcome(() => undotted(hostKey(`${name.toUpperCase()}.`, String(n)))));
    }
  });
});

describe('HostBreaker: the idle sweep at capacity', () => {
  it('a table gone idle at once is forgotten 64 hosts per admit, never in one full scan', () => {
    const clock = new ManualClock(0);
    const breaker = new HostBreaker({ clock, capacity: 1_000, idleRetention: 1_000, sweepInterval: 100 });
    for (let i = 0; i < 1_000; i++) breaker.admit(ip(i), 1).succeeded();
    clock.advance(2_000); // all 1 000 idle
    const perAdmit: number[] = [];
    let last = 0;
    for (let i = 0; i < 40; i++) {
      breaker.admit(ip(10_000 + i), 1).succeeded();
      const { evictedIdle } = breaker.stats();
      perAdmit.push(evictedIdle - last);
      last = evictedIdle;
    }
    expect(Math.max(...perAdmit)).toBe(64);
    expect(last).toBe(1_000); // all forgotten within 16 admits
    expect(perAdmit.slice(0, 16).reduce((a, b) => a + b, 0)).toBe(1_000);
    expect(breaker.stats().hosts).toBe(40); // only the fresh ones are left
    expect(breaker.stats().evictedCapacity).toBe(0);
  });

  it('a host used since it was put at the fresh end is moved there by the sweep, not forgotten; forgotten once idle', () => {
    const clock = new ManualClock(0);
    const breaker = new HostBreaker({ clock, idleRetention: 10_000, sweepInterval: 1_000 });
    breaker.admit('a.test', 1).succeeded();
    breaker.admit('b.test', 1).succeeded();
    clock.advance(6_000);
    breaker.admit('a.test', 1).succeeded(); // a: used since, its place (the stale end) stale
    clock.advance(4_500);
    breaker.admit('c.test', 1).succeeded(); // the sweep moves a, forgets b (idle 10.5 s)
    expect(['a.test', 'b.test', 'c.test'].map((h) => breaker.state(h, 1) !== undefined)).toEqual([true, false, true]);
    clock.advance(6_000);
    breaker.admit('d.test', 1).succeeded(); // a idle 10.5 s: forgotten; c (6 s) kept
    expect(['a.test', 'c.test', 'd.test'].map((h) => breaker.state(h, 1) !== undefined)).toEqual([false, true, true]);
    expect(breaker.stats().evictedIdle).toBe(2);
  });

  it('once the idle hosts are gone the sweep waits for sweepInterval again', () => {
    const clock = new ManualClock(0);
    const breaker = new HostBreaker({ clock, capacity: 200, idleRetention: 1_000, sweepInterval: 5_000 });
    for (let i = 0; i < 100; i++) breaker.admit(ip(i), 1).succeeded();
    clock.advance(5_000);
    breaker.admit('fresh.test', 1).succeeded(); // forgets 64
    breaker.admit('fresh.test', 1).succeeded(); // forgets the other 36: the sweep is done
    expect(breaker.stats().evictedIdle).toBe(100);
    for (let i = 0; i < 10; i++) breaker.admit(ip(500 + i), 1).succeeded();
    clock.advance(4_999); // all 11 idle, but no sweep is due yet
    breaker.admit('other.test', 1).succeeded();
    expect(breaker.stats().evictedIdle).toBe(100);
    clock.advance(1);
    breaker.admit('other.test', 1).succeeded();
    expect(breaker.stats().evictedIdle).toBe(111);
  });
});

describe('HostBreaker: recency without rehashing', () => {
  it('admitting and refusing known hosts writes nothing to any Map (no re-insertion, so no periodic whole-table rehash)', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, capacity: 4_096 });
    const hosts = Array.from({ length: 4_096 }, (_, i) => ip(i));
    for (const [i, h] of hosts.entries()) {
      const permit = breaker.admit(h, 1);
      if (i % 2 === 0) permit.failed();
      else permit.succeeded();
    }
    breaker.tryAdmit(hosts[0]!, 1); // the first refusal looks up its event channel once
    const set = vi.spyOn(Map.prototype, 'set');
    const del = vi.spyOn(Map.prototype, 'delete');
    try {
      for (let pass = 0; pass < 2; pass++) {
        for (const h of hosts) {
          const answer = breaker.tryAdmit(h, 1);
          if (!(answer instanceof Error)) answer.succeeded();
        }
      }
      expect(set.mock.calls.length + del.mock.calls.length).toBe(0);
    } finally {
      set.mockRestore();
      del.mockRestore();
    }
    expect(breaker.stats()).toMatchObject({ hosts: 4_096, refused: 4_097, evictedCapacity: 0 });
  });

  it('an admitted dial at 4 096 hosts, asked by its key, costs one Map lookup, admit and settlement together (the settlement reads its entry, not the table)', () => {
    const breaker = new HostBreaker({ capacity: 4_096 });
    const keys = Array.from({ length: 4_096 }, (_, i) => `${ip(i)}:11211`);
    for (const k of keys) breaker.admit(k).succeeded();
    const built = hostKeyMemoStats().built;
    const get = vi.spyOn(Map.prototype, 'get');
    let calls: number;
    try {
      for (const k of keys) breaker.admit(k).succeeded();
      calls = get.mock.calls.length;
    } finally {
      get.mockRestore();
    }
    expect(calls).toBe(4_096); // two before: the settlement looked its key up again
    expect(hostKeyMemoStats().built - built).toBe(0);
    expect(breaker.stats()).toMatchObject({ hosts: 4_096, succeeded: 2 * 4_096, stale: 0 });
  });

  it('an admitted dial at 4 096 hosts asked by host and port makes no key and costs one Map lookup, by the caller\'s own spelling (before: the key memo\'s and the table\'s; before that, a host:port string built and hashed per call)', () => {
    const breaker = new HostBreaker({ capacity: 4_096 });
    const hosts = Array.from({ length: 4_096 }, (_, i) => ip(i));
    for (const h of hosts) breaker.admit(h, 11211).succeeded();
    const built = hostKeyMemoStats().built;
    const get = vi.spyOn(Map.prototype, 'get');
    let calls: number;
    try {
      for (let pass = 0; pass < 2; pass++) for (const h of hosts) breaker.admit(h, 11211).succeeded();
      calls = get.mock.calls.length;
    } finally {
      get.mockRestore();
    }
    expect(calls).toBe(2 * 4_096);
    expect(hostKeyMemoStats().built - built).toBe(0);
    expect(breaker.stats()).toMatchObject({ hosts: 4_096, succeeded: 3 * 4_096, stale: 0 });
  });

  it('refusing 4 096 open hosts by host and port, and one host alone, makes no key', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, capacity: 4_096, openDuration: 600_000 });
    const hosts = Array.from({ length: 4_096 }, (_, i) => ip(i));
    for (const h of hosts) breaker.admit(h, 11211).failed();
    const built = hostKeyMemoStats().built;
    let refused = 0;
    for (let pass = 0; pass < 2; pass++) for (const h of hosts) if (breaker.tryAdmit(h, 11211) instanceof HostUnavailableError) refused++;
    for (let i = 0; i < 100; i++) if (breaker.tryAdmit(hosts[7]!, 11211) instanceof HostUnavailableError) refused++;
    expect(refused).toBe(2 * 4_096 + 100);
    expect(hostKeyMemoStats().built - built).toBe(0);
  });

  it('connect() refusing 256 open loopback hosts by host and port makes no key, and dials nothing', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 600_000 });
    const targets = Array.from({ length: 256 }, (_, i) => ({ host: `127.0.9.${i}`, port: 9 }));
    for (const t of targets) breaker.admit(t.host, t.port).failed();
    const built = hostKeyMemoStats().built;
    for (let pass = 0; pass < 2; pass++) {
      const settled = await Promise.allSettled(targets.map((t) => connect(t, { breaker, timeout: 1_000 })));
      expect(settled.every((r) => r.status === 'rejected' && r.reason instanceof HostUnavailableError)).toBe(true);
    }
    expect(hostKeyMemoStats().built - built).toBe(0);
    expect(breaker.stats()).toMatchObject({ refused: 2 * 256, succeeded: 0, failed: 256 });
  });

  it('an eviction passes over at most 32 hosts used since they were put at the fresh end (moved there), then forgets the one at the stale end: never a walk of the table', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, capacity: 100 });
    const hosts = Array.from({ length: 100 }, (_, i) => ip(i));
    for (const h of hosts) breaker.admit(h, 1).failed();
    for (const h of hosts) breaker.tryAdmit(h, 1); // every one used since
    breaker.admit('new.test', 1);
    const gone = hosts.filter((h) => breaker.state(h, 1) === undefined);
    expect(gone).toEqual([hosts[32]]);
    breaker.admit('newer.test', 1); // the stale end is hosts[33..]: used, 32 more passed over
    expect(hosts.filter((h) => breaker.state(h, 1) === undefined)).toEqual([hosts[32], hosts[65]]);
    expect(breaker.stats()).toMatchObject({ hosts: 100, evictedCapacity: 2 });
  });

  it('the host refused most recently is the last evicted, the one not asked for longest the first', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, capacity: 3 });
    for (const h of ['a', 'b', 'c']) breaker.admit(h, 1).failed();
    breaker.tryAdmit('a', 1); // refused, and now the most recent
    breaker.admit('d', 1); // evicts b
    expect(breaker.state('b', 1)).toBeUndefined();
    breaker.tryAdmit('c', 1);
    breaker.admit('e', 1); // evicts a (c was just refused)
    expect(breaker.state('a', 1)).toBeUndefined();
    expect(breaker.state('c', 1)?.state).toBe('open');
    expect(breaker.stats().evictedCapacity).toBe(2);
  });
});

describe('HostBreaker: the spelling index (a warm admit is one lookup by the caller\'s string)', () => {
  const open = { failureThreshold: 1, minOutage: 0, openDuration: 600_000 } as const;

  it('every spelling of one host reaches one entry: a failure through one is refused through the others, and the table holds one host', () => {
    const breaker = new HostBreaker(open);
    const spellings: Array<[string, number | undefined]> = [
      ['Example.COM', 443],
      ['example.com', 443],
      ['https://example.com/', undefined],
      ['example.com:443', undefined],
      ['EXAMPLE.com:443', undefined],
    ];
    for (const [h, p] of spellings) breaker.admit(h, p).succeeded(); // each spelling indexed while closed
    breaker.admit('example.com', 443).failed();
    for (const [h, p] of spellings) expect(breaker.tryAdmit(h, p), `${h} ${p}`).toBeInstanceOf(HostUnavailableError);
    expect(breaker.stats()).toMatchObject({ hosts: 1, refused: spellings.length });
  });

  it('a name with a trailing dot is another host: its failures never refuse the name without one', () => {
    // `localhost.` (absolute) and `localhost` (through the search domains) can resolve differently:
    // one key for both got the live one refused on the other's ENOTFOUND (an outside review).
    const breaker = new HostBreaker(open);
    breaker.admit('Example.COM.', 443).failed();
    expect(breaker.tryAdmit('example.com.', 443)).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit('https://example.com./')).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit('example.com', 443)).not.toBeInstanceOf(Error);
    expect(breaker.tryAdmit('https://example.com/')).not.toBeInstanceOf(Error);
    expect(breaker.stats().hosts).toBe(2);
  });

  it('one spelling on two ports, and with and without a port, is three hosts', () => {
    const breaker = new HostBreaker(open);
    breaker.admit('a.test', 1).failed();
    expect(breaker.tryAdmit('a.test', 2)).not.toBeInstanceOf(Error);
    expect(breaker.tryAdmit('a.test')).not.toBeInstanceOf(Error);
    expect(breaker.tryAdmit('a.test', 1)).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit('a.test:1')).toBeInstanceOf(HostUnavailableError);
    expect(breaker.tryAdmit('a.test', 2)).not.toBeInstanceOf(HostUnavailableError); // still closed
    expect(breaker.stats().hosts).toBe(3);
  });

  it.each([
    ['reset', (b: HostBreaker) => b.reset('b.test', 1)],
    ['isolate for 0 ms', (b: HostBreaker) => b.isolate('b.test:1', 0)],
    ['eviction at capacity', (b: HostBreaker) => b.admit('other.test', 1).succeeded()],
  ])('an entry forgotten by %s is never found through its spelling again: the next admit is a fresh, closed host in the table', (_, forget) => {
    const breaker = new HostBreaker({ ...open, capacity: 1 });
    breaker.admit('B.test', 1).failed(); // indexed under "B.test"
    expect(breaker.tryAdmit('B.test', 1)).toBeInstanceOf(HostUnavailableError);
    forget(breaker);
    const permit = breaker.tryAdmit('B.test', 1);
    expect(permit).not.toBeInstanceOf(Error);
    expect(breaker.state('b.test', 1)).toMatchObject({ state: 'closed', failures: 0 });
    (permit as { failed(e?: unknown): void }).failed();
    expect(breaker.tryAdmit('b.test', 1)).toBeInstanceOf(HostUnavailableError); // the fresh entry is the one the table holds
    expect(breaker.stats().hosts).toBe(1);
  });

  it('an entry the idle sweep forgets in the very admit that found it through its spelling is replaced, not revived outside the table', () => {
    const clock = new ManualClock(0);
    const breaker = new HostBreaker({ ...open, clock, idleRetention: 1_000, sweepInterval: 1_000 });
    breaker.admit('Idle.test', 1).failed();
    clock.advance(700_000); // idle past retention, its open window over, a sweep due
    const permit = breaker.tryAdmit('Idle.test', 1);
    expect(permit).not.toBeInstanceOf(Error);
    expect(breaker.stats()).toMatchObject({ evictedIdle: 1, hosts: 1 });
    expect((permit as { probe: boolean }).probe).toBe(false); // a fresh closed host, not the old one's probe
    (permit as { failed(e?: unknown): void }).failed();
    expect(breaker.tryAdmit('idle.test', 1)).toBeInstanceOf(HostUnavailableError);
  });

  it('a host found in the table under a spelling the index has not seen yet is made the most recent too', () => {
    const breaker = new HostBreaker({ capacity: 2 });
    breaker.admit('a.test', 1).succeeded();
    breaker.admit('b.test', 1).succeeded();
    breaker.admit('A.test', 1).succeeded(); // a.test by a new spelling: now the newest
    breaker.admit('c.test', 1).succeeded(); // evicts the oldest: b.test
    expect([breaker.state('a.test', 1) !== undefined, breaker.state('b.test', 1) !== undefined]).toEqual([true, false]);
  });

  it('a bad host or port throws before anything is indexed, every time', () => {
    const breaker = new HostBreaker(open);
    for (let i = 0; i < 3; i++) {
      expect(() => breaker.tryAdmit('', 1)).toThrow(TypeError);
      expect(() => breaker.tryAdmit('c.test', 70_000)).toThrow(TypeError);
      expect(() => breaker.tryAdmit('c.test', 1.5)).toThrow(TypeError);
    }
    expect(spellingsHeld(breaker).spellings).toBe(0);
    expect(breaker.stats().hosts).toBe(0);
  });

  it('a stream of 10 000 distinct hosts through capacity 100 holds at most 400 spellings, and every answer stays right', () => {
    const breaker = new HostBreaker({ ...open, capacity: 100 });
    let most = 0;
    let refusedEarly = 0;
    for (let i = 0; i < 10_000; i++) {
      breaker.admit(ip(i), 1).failed();
      // The host 20 back is still tracked (two touches a step: 40 of the last 100), and open.
      if (i >= 20 && breaker.tryAdmit(ip(i - 20), 1) instanceof HostUnavailableError) refusedEarly++;
      most = Math.max(most, spellingsHeld(breaker).spellings);
    }
    // Eviction gives a host used since it was put at the fresh end a second chance (CLOCK): when
    // the table first fills, 80 such hosts are passed over and 18 of the unused newest go first;
    // from then on every host 20 back is still tracked.
    expect(refusedEarly).toBeGreaterThanOrEqual(10_000 - 20 - 20);
    expect(most).toBe(400);
    expect(breaker.stats().hosts).toBe(100);
    const evicted = breaker.tryAdmit(ip(0), 1);
    expect(evicted).not.toBeInstanceOf(Error); // forgotten: found in the index, not tracked, so a fresh closed entry
    expect(breaker.stats().hosts).toBe(100);
  });

  it('a forgotten host still in the index lets go of its refusal and its last error (reachability, after GC)', async () => {
    const breaker = new HostBreaker({ ...open, capacity: 1 });
    // In a function of its own: a block of the test's async body could keep them in its frame.
    const refuse = (): { refusal: WeakRef<object>; cause: WeakRef<object> } => {
      const cause = new Error('ECONNREFUSED');
      breaker.admit('Gone.test', 1).failed(cause);
      const refusal = breaker.tryAdmit('Gone.test', 1);
      if (!(refusal instanceof HostUnavailableError)) throw new Error('setup: Gone.test was not refused');
      return { refusal: new WeakRef(refusal), cause: new WeakRef(cause) };
    };
    const refs = refuse();
    breaker.admit('other.test', 1).succeeded(); // evicts Gone.test; its spelling stays in the index
    expect(spellingsHeld(breaker).spellings).toBe(2);
    await collectGarbage();
    expect([refs.refusal.deref() === undefined, refs.cause.deref() === undefined]).toEqual([true, true]);
  });

  it('other spellings of tracked hosts are bounded at 4 × capacity: past it the index is dropped and refills, and every answer stays right', () => {
    const breaker = new HostBreaker({ ...open, capacity: 10 });
    breaker.admit('abcdef.test', 1).failed();
    let refused = 0;
    // The same host under ever new spellings: upper-case variants of abcdef.test, each a new index entry.
    const variants = Array.from({ length: 64 }, (_, i) => 'abcdef.test'.split('').map((c, j) => ((i >> j) & 1 ? c.toUpperCase() : c)).join(''));
    let most = 0;
    for (let pass = 0; pass < 3; pass++) {
      for (const v of variants) {
        if (breaker.tryAdmit(v, 1) instanceof HostUnavailableError) refused++;
        most = Math.max(most, spellingsHeld(breaker).spellings);
      }
    }
    expect(refused).toBe(3 * 64);
    expect(most).toBe(40);
    expect(spellingsHeld(breaker).spellings).toBeGreaterThan(0);
    expect(breaker.stats().hosts).toBe(1);
  });

  it('a disabled breaker (failureThreshold 0) still checks the host and admits every dial, indexing nothing', () => {
    const breaker = new HostBreaker({ failureThreshold: 0 });
    for (let i = 0; i < 3; i++) {
      const permit = breaker.tryAdmit('E.test', 1);
      expect(permit).toMatchObject({ host: 'e.test:1', probe: false });
    }
    expect(() => breaker.tryAdmit('', 1)).toThrow(TypeError);
    expect(spellingsHeld(breaker)).toEqual({ spellings: 0, ports: 0 });
  });

  it('a stream of 10 000 ports, with hosts that never validate or on a disabled breaker, makes no per-port map', () => {
    const breaker = new HostBreaker(open);
    const disabled = new HostBreaker({ failureThreshold: 0 });
    for (let port = 1; port <= 10_000; port++) {
      expect(() => breaker.tryAdmit('', port)).toThrow(TypeError);
      disabled.tryAdmit('f.test', port);
    }
    expect([spellingsHeld(breaker), spellingsHeld(disabled)]).toEqual([
      { spellings: 0, ports: 0 },
      { spellings: 0, ports: 0 },
    ]);
  });

  it('valid hosts on ever new ports are bounded with the spellings: past 4 × capacity every per-port map is dropped', () => {
    const breaker = new HostBreaker({ capacity: 10 });
    let most = 0;
    for (let port = 1; port <= 1_000; port++) {
      breaker.admit('g.test', port).succeeded();
      most = Math.max(most, spellingsHeld(breaker).ports);
    }
    expect(most).toBe(40);
    expect(breaker.tryAdmit('g.test', 1_000)).not.toBeInstanceOf(Error);
  });
});

describe('connect(): an IP literal is told by a scan, not a memo (past 1 024 hosts the memo was cleared, and every refusal ran net.isIP again)', () => {
  it.each([
    ['0.0.0.0', true],
    ['255.255.255.255', true],
    ['10.0.0.1', true],
    ['1.2.3.256', false],
    ['01.2.3.4', false],
    ['1.2.3.04', false],
    ['1.2.3', false],
    ['1.2.3.4.5', false],
    ['1..3.4', false],
    ['1.2.3.4.', false],
    ['.1.2.3', false],
    ['1234.1.1.1', false],
    ['a.b.c.d', false],
    ['example.com', false],
    ['1.2.3.4a', false],
    ['[::1]', true],
    ['::1', true],
    ['fe80::1%eth0', true],
    ['', false],
  ])('%s: %s', (host, literal) => {
    expect(isLiteral(host)).toBe(literal);
  });

  it('agrees with net.isIP on 20 000 random dotted strings (a bracket or a colon is always a literal: no name has one)', () => {
    const random = seededRandom(4);
    const part = (): string => {
      const r = random();
      if (r < 0.05) return '';
      if (r < 0.1) return `0${Math.floor(random() * 30)}`;
      if (r < 0.15) return 'a';
      return String(Math.floor(random() * 300));
    };
    let wrong = 0;
    for (let i = 0; i < 20_000; i++) {
      const parts = 2 + Math.floor(random() * 4);
      const host = Array.from({ length: parts }, part).join('.');
      if (isLiteral(host) !== (net.isIP(host) !== 0)) wrong++;
    }
    expect(wrong).toBe(0);
  });

  it('connect() refusing 2 048 open IP hosts in rotation never calls net.isIP', async () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 600_000 });
    const targets = Array.from({ length: 2_048 }, (_, i) => ({ host: `127.1.${i >> 8}.${i & 255}`, port: 9 }));
    for (const t of targets) breaker.admit(t.host, t.port).failed();
    const isIP = vi.spyOn(net, 'isIP');
    try {
      const settled = await Promise.allSettled(targets.map((t) => connect(t, { breaker, timeout: 1_000 })));
      expect(settled.filter((r) => r.status === 'rejected' && r.reason instanceof HostUnavailableError)).toHaveLength(2_048);
      expect(isIP).not.toHaveBeenCalled();
    } finally {
      isIP.mockRestore();
    }
  });
});
