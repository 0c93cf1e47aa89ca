/**
 * Defects found reviewing the HTTP/2 client after the morning's merges, each reproduced on
 * loopback and counted (connections the server saw, failed dials), not only timed.
 */
import http2 from 'node:http2';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

describe('Http2Client review: settings node:http2 refuses', () => {
  it.each([
    [{ maxFrameSize: 1 }, RangeError],
    [{ initialWindowSize: 2 ** 31 }, RangeError],
    [{ enablePush: 'yes' as unknown as boolean }, TypeError],
  ])('%o is an error naming settings at construction: no connection opened, no failed dial against the host', async (settings, type) => {
    let connections = 0;
    const server = http2.createServer((_req, res) => res.end('ok'));
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const origin = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0 });
    // Unchecked, each request connected, then failed on the bad setting: three such opened the
    // host for every client on the breaker, and each left its socket open.
    expect(() => new Http2Client({ breaker, settings })).toThrow(type);
    expect(() => new Http2Client({ breaker, settings })).toThrow(/^settings: Invalid value for setting/);
    expect(connections).toBe(0);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    const other = new Http2Client({ breaker });
    cleanup.push(() => other.close());
    expect((await other.request(`${origin}/`)).status).toBe(200);
  });
});

describe('Http2Client review: server push', () => {
  it('is off unless the settings turn it on: the client has no API for a pushed stream, and unread pushes filled the session (ENHANCE_YOUR_CALM on 2 of 30 GETs; an outside review)', async () => {
    const allowed: boolean[] = [];
    const server = http2.createServer();
    server.on('stream', (stream) => {
      allowed.push(stream.pushAllowed);
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const sessions = new Set<http2.ServerHttp2Session>();
    server.on('session', (s) => sessions.add(s));
    cleanup.push(() => new Promise<void>((resolve) => {
      for (const s of sessions) s.destroy();
      server.close(() => resolve());
    }));
    const origin = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    for (const settings of [undefined, { maxConcurrentStreams: 50 }, { enablePush: true }]) {
      const client = new Http2Client({ breaker: new HostBreaker(), ...(settings === undefined ? {} : { settings }) });
      cleanup.push(() => client.close());
      expect((await client.request(`${origin}/`)).status).toBe(200);
    }
    expect(allowed).toEqual([false, false, true]);
  });
});
