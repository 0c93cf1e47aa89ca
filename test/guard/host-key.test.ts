import { describe, expect, it, vi } from 'vitest';
import { hostKey, hostKeyMemoStats } from '../../src/guard/host-key.js';

describe('hostKey', () => {
  it.each([
    ['example.com', undefined, 'example.com'],
    ['Example.COM', undefined, 'example.com'],
    ['example.com.', undefined, 'example.com.'], // the absolute name: not `example.com` (search domains)
    ['example.com:443', undefined, 'example.com:443'],
    ['EXAMPLE.com.:443', undefined, 'example.com.:443'],
    ['https://Example.com./x', undefined, 'example.com.:443'],
    ['example.com', 8443, 'example.com:8443'],
    ['example.com:1', 2, 'example.com:2'],
    ['https://Example.com/a/b?c', undefined, 'example.com:443'],
    ['http://example.com', undefined, 'example.com:80'],
    ['http://example.com:8080/x', undefined, 'example.com:8080'],
    ['[::1]:80', undefined, '[::1]:80'],
    ['[::1]', undefined, '[::1]'],
    ['::1', undefined, '[::1]'],
    ['::1', 80, '[::1]:80'],
    ['[FE80::1]:443', undefined, '[fe80::1]:443'],
    ['http://[::1]:9000/', undefined, '[::1]:9000'],
    ['127.0.0.1:0', undefined, '127.0.0.1:0'],
    ['a.test:65535', undefined, 'a.test:65535'], // the highest port
    ['a.test:', undefined, 'a.test'], // an empty port is no port
    ['ftp://files.test/pub', undefined, 'files.test'], // a scheme with no known port
    ['svc.test', '8080', 'svc.test:8080'],
    // A unix socket's path, or a grpc target naming one, is its own key: paths are case-sensitive
    // and may hold a colon (was: lower-cased, so a dead `/run/Svc.sock` refused a live
    // `/run/svc.sock`; and `a:b` read as a port; an outside review).
    ['/run/Svc.sock', undefined, '/run/Svc.sock'],
    ['/run/a:b.sock', undefined, '/run/a:b.sock'],
    ['unix:/run/Svc.sock', undefined, 'unix:/run/Svc.sock'],
    ['unix:///run/Svc.sock', undefined, 'unix:///run/Svc.sock'],
    ['unix-abstract:Svc', undefined, 'unix-abstract:Svc'],
    ['vsock:3:5000', undefined, 'vsock:3:5000'],
  ])('%s (port %s) -> %s', (host, port, key) => {
    expect(hostKey(host, port)).toBe(key);
    expect(hostKey(host, port)).toBe(key); // memoised path gives the same answer
  });

  it.each([
    ['', undefined, /non-empty/],
    ['a:b', undefined, /port "b"/],
    ['a:65536', undefined, /port/],
    ['a:-1', undefined, /port/],
    ['[::1', undefined, /unclosed/],
    ['[::1]x', undefined, /malformed/],
    ['http://', undefined, /not a valid URL/],
    ['a', 70_000, /port "70000"/],
    ['a', 1.5, /port/],
    [':80', undefined, /":80" has no name/],
    ['[]:80', undefined, /has no name/],
  ])('rejects %s (port %s)', (host, port, message) => {
    expect(() => hostKey(host, port)).toThrow(message);
  });

  it('rejects non-strings with a TypeError naming what it got', () => {
    for (const bad of [undefined, null, 42, {}, []]) expect(() => hostKey(bad as unknown as string)).toThrow(TypeError);
    expect(() => hostKey(42 as unknown as string)).toThrow('host must be a non-empty string, got number');
    expect(() => hostKey('')).toThrow('host must be a non-empty string, got ""');
  });

  it('remembers a spelling together with its port: the same name on two ports is two keys', () => {
    expect(hostKey('memo.test', 1)).toBe('memo.test:1');
    expect(hostKey('memo.test', 2)).toBe('memo.test:2');
    expect(hostKey('memo.test')).toBe('memo.test');
    expect(hostKey('memo.test', 1)).toBe('memo.test:1');
  });

  it('stays bounded under a stream of distinct hosts', () => {
    for (let i = 0; i < 10_000; i++) expect(hostKey(`H${i}.example`)).toBe(`h${i}.example`);
  });
});

/**
 * Issue 17: a warm (host, port) pair costs one Map lookup by the spelling as given, and no key is
 * made again (before, every call concatenated `host:port` and hashed the new string). Counted
 * (Map.get calls, keys made), so it holds on any machine.
 */
describe('hostKey: a host with a numeric port', () => {
  function ip(i: number): string {
    return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  }

  function countGets(run: () => void): number {
    const get = vi.spyOn(Map.prototype, 'get');
    try {
      run();
      return get.mock.calls.length;
    } finally {
      get.mockRestore();
    }
  }

  it('4 096 warm hosts asked in rotation with their port: no key made, one Map lookup per call', () => {
    const hosts = Array.from({ length: 4_096 }, (_, i) => ip(i));
    const expected = hosts.map((h) => `${h}:11211`);
    for (const h of hosts) hostKey(h, 11211);
    const before = hostKeyMemoStats();
    const got: string[] = [];
    const gets = countGets(() => {
      for (let pass = 0; pass < 3; pass++) for (const h of hosts) got.push(hostKey(h, 11211));
    });
    const after = hostKeyMemoStats();
    expect(gets).toBe(3 * 4_096);
    expect([after.built - before.built, after.parses - before.parses, after.portKeys - before.portKeys]).toEqual([0, 0, 0]);
    expect(got).toEqual([...expected, ...expected, ...expected]);
  });

  it('one host alone takes the same path as one of thousands: one Map lookup per call, no key made', () => {
    hostKey('alone.test', 443);
    const before = hostKeyMemoStats().built;
    const gets = countGets(() => {
      for (let i = 0; i < 100; i++) expect(hostKey('alone.test', 443)).toBe('alone.test:443');
    });
    expect(gets).toBe(100);
    expect(hostKeyMemoStats().built - before).toBe(0);
  });

  it('a name dialled on several ports keeps a key per port: each made once, the first port one lookup, the others two', () => {
    const before = hostKeyMemoStats();
    for (const port of [1, 2, 3, 0, 65_535]) expect(hostKey('multi.test', port)).toBe(`multi.test:${port}`);
    const mid = hostKeyMemoStats();
    expect([mid.built - before.built, mid.portKeys - before.portKeys]).toEqual([5, 5]);
    for (let pass = 0; pass < 3; pass++) for (const port of [65_535, 0, 3, 2, 1]) expect(hostKey('multi.test', port)).toBe(`multi.test:${port}`);
    expect(hostKeyMemoStats().built - mid.built).toBe(0);
    expect(countGets(() => hostKey('multi.test', 1))).toBe(1);
    expect(countGets(() => hostKey('multi.test', 3))).toBe(2);
    expect(hostKey('multi.test')).toBe('multi.test'); // no port: not one of its port keys
    expect(hostKey('multi.test', '2')).toBe('multi.test:2');
  });

  it('a spelling that is not its own key (upper case, trailing dot, URL, IPv6) is parsed once with its port, then neither parsed nor made again', () => {
    const cases: Array<[string, number, string]> = [
      ['Mixed.CASE.test', 8080, 'mixed.case.test:8080'],
      ['dotted.test.', 80, 'dotted.test.:80'],
      ['https://Url.test/x', 9443, 'url.test:9443'],
      ['::7', 80, '[::7]:80'],
      ['[::8]:1', 2, '[::8]:2'],
    ];
    const before = hostKeyMemoStats();
    for (const [host, port, key] of cases) expect(hostKey(host, port)).toBe(key);
    const mid = hostKeyMemoStats();
    expect([mid.parses - before.parses, mid.built - before.built, mid.portKeys - before.portKeys]).toEqual([5, 5, 5]);
    expect(mid.entries).toBe(before.entries); // remembered once, not in the spelling memo as well
    for (let i = 0; i < 10; i++) for (const [host, port, key] of cases) expect(hostKey(host, port)).toBe(key);
    const after = hostKeyMemoStats();
    expect([after.parses, after.built, after.portKeys]).toEqual([mid.parses, mid.built, mid.portKeys]);
  });

  it('a bad host or port throws every time, also for a warm name, and nothing is remembered', () => {
    expect(hostKey('warm.test', 80)).toBe('warm.test:80');
    const before = hostKeyMemoStats().portKeys;
    for (let i = 0; i < 2; i++) {
      expect(() => hostKey('warm.test', 70_000)).toThrow(/port "70000"/);
      expect(() => hostKey('warm.test', -1)).toThrow(/port "-1"/);
      expect(() => hostKey('warm.test', 1.5)).toThrow(/port "1.5"/);
      expect(() => hostKey('warm.test', Number.NaN)).toThrow(/port "NaN"/);
      expect(() => hostKey('', 80)).toThrow(/non-empty/);
      expect(() => hostKey(null as unknown as string, 80)).toThrow('host must be a non-empty string, got object');
      expect(() => hostKey('[::1', 80)).toThrow(/unclosed/);
    }
    expect(hostKeyMemoStats().portKeys).toBe(before);
    expect(hostKey('warm.test', 80)).toBe('warm.test:80');
  });

  it('a hostile stream of distinct names, or of ports on one name, holds at most two generations of keys', () => {
    const { generation } = hostKeyMemoStats();
    for (let i = 0; i < 3 * generation; i++) expect(hostKey(`stream-${i}.test`, 1)).toBe(`stream-${i}.test:1`);
    const names = hostKeyMemoStats().portKeys;
    expect(names).toBeLessThanOrEqual(2 * generation);
    expect(names).toBeGreaterThan(generation); // the recent ones are kept: a rotation still hits
    for (let port = 0; port < 3 * generation; port++) expect(hostKey('ports.test', port)).toBe(`ports.test:${port}`);
    const ports = hostKeyMemoStats().portKeys;
    expect(ports).toBeLessThanOrEqual(2 * generation);
    expect(ports).toBeGreaterThan(generation);
  });

  it('a generation holds exactly its size: the keys held peak at twice it, then fall to it plus one', () => {
    const { generation } = hostKeyMemoStats();
    const held: number[] = [];
    for (let i = 0; i < 2 * generation + 2; i++) {
      hostKey(`peak-${i}.test`, 1);
      held.push(hostKeyMemoStats().portKeys);
    }
    const peak = Math.max(...held);
    expect(peak).toBe(2 * generation);
    expect(held[held.indexOf(peak) + 1]).toBe(generation + 1);
  });

  it('a name of the previous generation asked on a new port gets its key, made once', () => {
    const { generation } = hostKeyMemoStats();
    expect(hostKey('lone.test', 5)).toBe('lone.test:5');
    for (let i = 0; i < generation; i++) hostKey(`lone-filler-${i}.test`, 1); // one new generation since
    const before = hostKeyMemoStats().built;
    expect(hostKey('lone.test', 6)).toBe('lone.test:6');
    expect(hostKey('lone.test', 5)).toBe('lone.test:5');
    expect(hostKeyMemoStats().built - before).toBe(1);
  });

  it('a key of the previous generation is carried over, not made again, and is then found in one lookup', () => {
    const { generation } = hostKeyMemoStats();
    expect(hostKey('carry.test', 6)).toBe('carry.test:6');
    expect(hostKey('carry.test', 7)).toBe('carry.test:7');
    // generation - 1 more keys: exactly one new generation began since, so both are in the previous one.
    for (let i = 0; i < generation - 1; i++) hostKey(`filler-${i}.test`, 1);
    const before = hostKeyMemoStats();
    expect(hostKey('carry.test', 7)).toBe('carry.test:7');
    expect(hostKey('carry.test', 6)).toBe('carry.test:6');
    const after = hostKeyMemoStats();
    expect(after.built - before.built).toBe(0);
    expect(countGets(() => hostKey('carry.test', 7))).toBe(1);
    expect(countGets(() => hostKey('carry.test', 6))).toBe(2);
    // A key dropped with its generation is made again, once.
    for (let i = 0; i < 2 * generation; i++) hostKey(`flood-${i}.test`, 1);
    const flooded = hostKeyMemoStats().built;
    expect(hostKey('carry.test', 6)).toBe('carry.test:6');
    expect(hostKey('carry.test', 6)).toBe('carry.test:6');
    expect(hostKeyMemoStats().built).toBe(flooded + 1);
  });
});
