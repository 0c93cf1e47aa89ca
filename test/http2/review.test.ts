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
