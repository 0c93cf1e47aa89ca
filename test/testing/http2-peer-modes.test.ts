/**
 * `http2Peer` switched between its modes on open sessions, as a user's test switches it: serve()
 * while already serving (or after rstStreams()) piped each relay a second time, so every byte went
 * twice and the client's session died with a protocol error (an outside review of the kit).
 * Switching back after silence() must make the same session flow again.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/** One GET on `session`: its status, or the error's code. */
function get(session: http2.ClientHttp2Session): Promise<string> {
  return new Promise((resolve) => {
    const stream = session.request({ ':path': '/' });
    stream.on('response', (h) => resolve(String(h[':status'])));
    stream.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    stream.resume();
    stream.end();
  });
}

describe('http2Peer: modes switched on an open session', () => {
  it.each([
    ['serve() while serving', (p: Awaited<ReturnType<typeof http2Peer>>) => p.serve()],
    ['rstStreams() then serve()', (p: Awaited<ReturnType<typeof http2Peer>>) => (p.rstStreams(http2.constants.NGHTTP2_REFUSED_STREAM), p.serve())],
    ['silence() then serve()', (p: Awaited<ReturnType<typeof http2Peer>>) => (p.silence(), p.serve())],
    ['serve() twice after silence()', (p: Awaited<ReturnType<typeof http2Peer>>) => (p.silence(), p.serve(), p.serve())],
  ])('%s: the same session serves on (was: ERR_HTTP2_SESSION_ERROR)', async (_name, switchModes) => {
    const peer = await http2Peer();
    cleanup.push(() => peer.close());
    const session = http2.connect(peer.origin);
    session.on('error', () => {});
    cleanup.push(() => session.destroy());
    expect(await get(session)).toBe('200');
    switchModes(peer);
    expect(await get(session)).toBe('200');
    expect(await get(session)).toBe('200');
    expect(session.destroyed).toBe(false);
    expect(peer.attempts).toBe(1); // one connection throughout
  });
});

describe('http2Peer: what it counts, and a port it cannot have', () => {
  it('sessions counts HTTP/2 sessions (SETTINGS received), not TCP connections: 3 silent connects and an HTTP/1.1 request count none', async () => {
    const peer = await http2Peer();
    try {
      const silent = await Promise.all([1, 2, 3].map(() => new Promise<net.Socket>((resolve) => { const s = net.connect(peer.port, '127.0.0.1', () => resolve(s)); s.on('error', () => {}); })));
      await new Promise<void>((resolve) => {
        const s = net.connect(peer.port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n'));
        s.on('error', () => {});
        s.on('close', () => resolve());
        setTimeout(() => { s.destroy(); }, 300);
      });
      for (const s of silent) s.destroy();
      expect(peer.attempts).toBe(4);
      expect(peer.sessions).toBe(0); // was 5
      const session = http2.connect(`http://127.0.0.1:${peer.port}`);
      session.on('error', () => {});
      await get(session);
      expect(peer.sessions).toBe(1);
      session.destroy();
    } finally {
      await peer.close();
    }
  });

  it('a port in use or out of range: it rejects, and nothing of it is left running (its internal server kept the process alive)', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      await expect(http2Peer({ port: (taken.address() as net.AddressInfo).port })).rejects.toMatchObject({ code: 'EADDRINUSE' });
      await expect(http2Peer({ port: 70_000 })).rejects.toThrow();
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});
