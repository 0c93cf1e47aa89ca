/**
 * TlsSessionCache: bounded (the least recently stored goes first), none kept at capacity 0, and
 * `remember` keeps a TLS 1.2 session (emitted before anyone could listen: read from the socket)
 * and TLS 1.3 tickets (heard afterwards), against a real TLS server on loopback.
 */
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { TlsSessionCache } from '../../src/guard/tls-sessions.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();
const bytes = (s: string): Buffer => Buffer.from(s);

describe('TlsSessionCache', () => {
  it('keeps at most capacity sessions, dropping the least recently stored; storing again refreshes', () => {
    const cache = new TlsSessionCache(2);
    cache.set('a', bytes('a1'));
    cache.set('b', bytes('b1'));
    cache.set('a', bytes('a2')); // a is now the most recent
    cache.set('c', bytes('c1')); // b goes
    expect(cache.get('a')?.toString()).toBe('a2');
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('c')?.toString()).toBe('c1');
  });

  it('a full cache storing a key it holds drops nothing else', () => {
    const cache = new TlsSessionCache(2);
    cache.set('a', bytes('a1'));
    cache.set('b', bytes('b1'));
    cache.set('b', bytes('b2'));
    expect(cache.get('a')?.toString()).toBe('a1');
    expect(cache.get('b')?.toString()).toBe('b2');
  });

  it('capacity 0 keeps nothing, and remember() adds no listener', () => {
    const cache = new TlsSessionCache(0);
    cache.set('a', bytes('a'));
    expect(cache.get('a')).toBeUndefined();
    const socket = new tls.TLSSocket(new net.Socket());
    cleanups.push(() => socket.destroy());
    cache.remember('a', socket);
    expect(socket.listenerCount('session')).toBe(0);
  });

  it.each(['TLSv1.2', 'TLSv1.3'] as const)('remember() keeps what a %s connection is handed, and the next connection offering it is resumed', async (version) => {
    const reused: boolean[] = [];
    const server = tls.createServer({ cert: TEST_CERT, key: TEST_KEY, minVersion: version, maxVersion: version }, (s) => {
      reused.push(s.isSessionReused());
      s.end('hi');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    const port = (server.address() as net.AddressInfo).port;
    const cache = new TlsSessionCache(10);
    for (let i = 0; i < 2; i++) {
      const session = cache.get('origin');
      const socket = tls.connect({ host: '127.0.0.1', port, ca: TEST_CERT, servername: 'localhost', ...(session === undefined ? {} : { session }) });
      await new Promise((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
      cache.remember('origin', socket);
      if (i === 0) await eventually(() => cache.get('origin'), (s) => s !== undefined);
      socket.resume();
      await new Promise((resolve) => socket.once('close', resolve));
    }
    expect(reused).toEqual([false, true]);
  });
});
