import { describe, expect, it } from 'vitest';
import { hostKey } from '../../src/guard/host-key.js';

describe('hostKey', () => {
  it.each([
    ['example.com', undefined, 'example.com'],
    ['Example.COM', undefined, 'example.com'],
    ['example.com.', undefined, 'example.com'],
    ['example.com:443', undefined, 'example.com:443'],
    ['EXAMPLE.com.:443', undefined, 'example.com:443'],
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
