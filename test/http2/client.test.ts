import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import {
  ConnectTimeoutError,
  ConnectionGoneError,
  HostUnavailableError,
  KeepAliveTimeoutError,
  PoolClosedError,
  RequestTimeoutError,
} from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client, type Http2ClientOptions } from '../../src/http2/client.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { blackhole } from '../../src/testing/blackhole.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { acceptAndHold } from '../../src/testing/tcp-peers.js';
import { TEST_CERT } from '../../src/testing/test-cert.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

function client(options: Http2ClientOptions = {}): { client: Http2Client; breaker: HostBreaker } {
  const breaker = options.breaker ?? new HostBreaker();
  const c = new Http2Client({ connectTimeout: 1_000, tls: { ca: TEST_CERT }, ...options, breaker });
  cleanup.push(() => c.close());
  return { client: c, breaker };
}

describe('Http2Client: one shared session per origin', () => {
  it('16 concurrent requests ride 1 connection (and 16 raw sessions would be 16)', async () => {
    await using peer = await http2Peer({ delay: 20 });
    const { client: c } = client();
    const responses = await Promise.all(Array.from({ length: 16 }, () => c.request(`${peer.origin}/x`)));
    expect(responses.map((r) => r.status)).toEqual(Array(16).fill(200));
    expect(new Set(responses.map((r) => r.connectionId)).size).toBe(1);
    expect(peer.attempts).toBe(1);
    expect(peer.streams).toBe(16);

    // The same count catches the naive client: a session per request opens 16 connections.
    await using naive = await http2Peer();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        const session = http2.connect(naive.origin);
        session.on('error', () => {});
        await new Promise<void>((resolve, reject) => {
          const req = session.request({ ':path': '/' });
          req.on('error', reject);
          req.resume();
          req.on('end', () => resolve());
        });
        await new Promise<void>((resolve) => session.close(() => resolve()));
      }),
    );
    expect(naive.attempts).toBe(16);
  });

  it('speaks TLS (ALPN h2) with one secure context per origin, body and status intact', async () => {
    await using peer = await http2Peer({
      tls: true,
      handler: (stream, headers) => {
        let body = '';
        stream.on('data', (d) => (body += String(d)));
        stream.on('end', () => {
          stream.respond({ ':status': 201 });
          stream.end(`${headers[':method']} ${headers[':path']} ${body}`);
        });
      },
    });
    const { client: c } = client();
    const r = await c.request(`https://localhost:${peer.port}/echo?q=1`, { method: 'POST', body: 'hi' });
    expect(r).toMatchObject({ status: 201, body: Buffer.from('POST /echo?q=1 hi') });
    const again = await c.request(`https://localhost:${peer.port}/echo`, { method: 'PUT', body: 'x' });
    expect(again.connectionId).toBe(r.connectionId);
    expect(peer.attempts).toBe(1);
  });
});

describe('Http2Client: bounded establishment', () => {
  it('a peer that accepts TCP and never sends SETTINGS fails in one connect timeout (phase handshake)', async () => {
    await using peer = await acceptAndHold();
    const { client: c, breaker } = client({ connectTimeout: 300 });
    const t0 = performance.now();
    const err = await c.request(`http://${peer.address}/`).catch((e: unknown) => e);
    const ms = performance.now() - t0;
    expect(err).toBeInstanceOf(ConnectTimeoutError);
    expect(err).toMatchObject({ phase: 'handshake', timeout: 300 });
    expect(ms).toBeLessThan(300 + 1_000);
    expect(breaker.state(peer.address)?.failures).toBe(1);
  });

  it('over TLS the same peer stalls in phase tls', async () => {
    await using peer = await acceptAndHold();
    const { client: c } = client({ connectTimeout: 200 });
    await expect(c.request(`https://${peer.address}/`)).rejects.toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tls' });
  });

  it('many concurrent requests to a blackholed origin share one dial and settle together', async () => {
    await using peer = await blackhole();
    const { client: c, breaker } = client({ connectTimeout: 300 });
    const results = await Promise.allSettled(Array.from({ length: 200 }, () => c.request(`http://${peer.address}/`)));
    expect(results.every((r) => r.status === 'rejected' && r.reason instanceof ConnectTimeoutError)).toBe(true);
    expect(breaker.stats()).toMatchObject({ failed: 1, succeeded: 0 });
  });

  it('a blocked origin is refused at once, without a dial', async () => {
    await using peer = await acceptAndHold();
    const { client: c } = client({ connectTimeout: 100, breaker: new HostBreaker({ minOutage: 0, failureThreshold: 1 }) });
    await expect(c.request(`http://${peer.address}/`)).rejects.toBeInstanceOf(ConnectTimeoutError);
    for (let i = 0; i < 20; i++) await expect(c.request(`http://${peer.address}/`)).rejects.toBeInstanceOf(HostUnavailableError);
    expect(peer.attempts).toBe(1);
  });
});

describe('Http2Client: what a failure does to the session', () => {
  it.each([
    ['REFUSED_STREAM', http2.constants.NGHTTP2_REFUSED_STREAM],
    ['INTERNAL_ERROR', http2.constants.NGHTTP2_INTERNAL_ERROR],
  ])('RST_STREAM %s fails the request and retires nothing', async (_name, code) => {
    await using peer = await http2Peer();
    const { client: c } = client();
    await c.request(`${peer.origin}/`);
    peer.rstStreams(code);
    const err = await c.request(`${peer.origin}/`).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR' });
    peer.serve();
    await c.request(`${peer.origin}/`);
    expect(peer.attempts).toBe(1);
  });

  it('RST_STREAM ENHANCE_YOUR_CALM fails the request and retires its session: the next request goes on a new one (see calm-session.test.ts)', async () => {
    await using peer = await http2Peer();
    const { client: c } = client();
    await c.request(`${peer.origin}/`);
    peer.rstStreams(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    const err = await c.request(`${peer.origin}/`).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR' });
    peer.serve();
    await c.request(`${peer.origin}/`);
    expect(peer.attempts).toBe(2);
  });

  it('a request timeout fails that request only', async () => {
    await using peer = await http2Peer({ delay: 5_000 });
    const { client: c } = client();
    const err = await c.request(`${peer.origin}/slow`, { timeout: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RequestTimeoutError);
    expect(c.stats()).toMatchObject({ connections: 1, gone: 0 });
  });

  it('a caller abort cancels the stream, not the session, and counts against nothing', async () => {
    await using peer = await http2Peer({ delay: 5_000 });
    const { client: c, breaker } = client();
    const controller = new AbortController();
    const p = c.request(`${peer.origin}/`, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('user navigated away')), 50);
    await expect(p).rejects.toThrow('user navigated away');
    expect(c.stats()).toMatchObject({ connections: 1, gone: 0 });
    expect(breaker.stats()).toMatchObject({ failed: 0, abandoned: 0 });
  });

  it('GOAWAY retires the session: its streams finish, new requests open a new one, the old one closes', async () => {
    await using peer = await http2Peer({ delay: 200 });
    const { client: c } = client();
    const inFlight = c.request(`${peer.origin}/long`);
    await eventually(() => peer.streams, (n) => n === 1);
    peer.goaway();
    const r = await inFlight;
    expect(r.status).toBe(200);
    const next = await c.request(`${peer.origin}/after`);
    expect(next.connectionId).toBe(r.connectionId + 1);
    expect(peer.sessions).toBe(2);
    await eventually(() => c.stats().connections, (n) => n === 1);
  });

  it('a peer that dies with streams in flight releases all of them at once, and traffic resumes when it is back', async () => {
    // /hold is never answered: only the peer dying ends those requests.
    const peer = await http2Peer({
      handler: (stream, headers) => {
        if (headers[':path'] === '/hold') return;
        stream.respond({ ':status': 200 });
        stream.end('ok');
      },
    });
    const { client: c } = client({ connectTimeout: 1_000 });
    await c.request(`${peer.origin}/warm`);
    const inFlight = Array.from({ length: 20 }, () => c.request(`${peer.origin}/hold`, { method: 'POST', body: 'x' }));
    const settled = Promise.allSettled(inFlight);
    await eventually(() => peer.streams, (n) => n >= 21);
    const t0 = performance.now();
    await peer.kill();
    const results = await settled;
    const ms = performance.now() - t0;
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(ms).toBeLessThan(1_000); // released at once, not left to a timeout
    expect(c.stats()).toMatchObject({ gone: 1, leases: 0 });
    await peer.listen();
    const back = await c.request(`${peer.origin}/`);
    expect(back.status).toBe(200);
    expect(peer.attempts).toBe(2);
    await peer.close();
  });

  it('keep-alive marks a silent peer gone within interval + timeout and releases its requests', async () => {
    await using peer = await http2Peer({ delay: 60_000 });
    const { client: c } = client({ keepAliveInterval: 200, keepAliveTimeout: 200 });
    const inFlight = c.request(`${peer.origin}/`, { method: 'POST', body: 'x' }).catch((e: unknown) => e);
    await eventually(() => peer.streams, (n) => n === 1);
    peer.silence();
    const t0 = performance.now();
    const err = await inFlight;
    const ms = performance.now() - t0;
    expect(err).toBeInstanceOf(ConnectionGoneError);
    expect((err as Error).cause).toBeInstanceOf(KeepAliveTimeoutError);
    expect(ms).toBeLessThan(200 + 200 + 1_000);
    expect(c.stats().gone).toBe(1);
  });
});

describe('Http2Client: lifecycle', () => {
  it('closes idle sessions at the sweep and reopens on demand', async () => {
    await using peer = await http2Peer();
    const { client: c } = client({ idleTimeout: 50, sweepInterval: 0 });
    await c.request(`${peer.origin}/`);
    await new Promise((r) => setTimeout(r, 80));
    const r = await c.request(`${peer.origin}/`);
    expect(r.connectionId).toBe(2);
    expect(peer.attempts).toBe(2);
  });

  it('reports whole-call latency including the connect', async () => {
    await using peer = await http2Peer();
    const { client: c } = client();
    const cold = await c.request(`${peer.origin}/`);
    expect(cold.latency).toBeGreaterThan(0);
  });

  it('close() rejects new requests and leaves no session, socket or timer behind', async () => {
    await using peer = await http2Peer();
    const { client: c } = client({ keepAliveInterval: 50 });
    await Promise.all(Array.from({ length: 4 }, (_, i) => c.request(`${peer.origin}/${i}`)));
    await c.close();
    await expect(c.request(`${peer.origin}/`)).rejects.toBeInstanceOf(PoolClosedError);
    expect(c.stats()).toMatchObject({ connections: 0, leases: 0 });
    await eventually(() => peer.openSessions, (n) => n === 0);
  });

  it('rejects a non-http URL and bad options naming them', () => {
    const { client: c } = client();
    expect(() => new Http2Client({ keepAliveTimeout: 0 })).toThrow(/keepAliveTimeout/);
    expect(() => new Http2Client({ requestTimeout: -1 })).toThrow(/requestTimeout/);
    return expect(c.request('ftp://x/')).rejects.toThrow(/http: or https:/);
  });

  it('a signal that is not one (the controller itself) rejects naming it, never throws', async () => {
    const { client: c } = client();
    let call: Promise<unknown> | undefined;
    expect(() => {
      call = c.request('http://127.0.0.1:1/', { signal: new AbortController() as unknown as AbortSignal });
    }).not.toThrow();
    await expect(call).rejects.toThrow(/^signal must be an AbortSignal/);
    // A signal-like (a polyfill) whose addEventListener throws: a rejection too, and no timer left.
    const deaf = { aborted: false, addEventListener: () => { throw new TypeError('no listeners here'); }, removeEventListener: () => {} } as unknown as AbortSignal;
    const clock = new ManualClock();
    const d = new Http2Client({ breaker: null, clock });
    cleanup.push(() => d.close());
    let deafCall: Promise<unknown> | undefined;
    expect(() => {
      deafCall = d.request('http://127.0.0.1:1/', { signal: deaf, timeout: 5_000 });
    }).not.toThrow();
    await expect(deafCall).rejects.toThrow('no listeners here');
    expect(clock.pending).toBe(0);
  });
});
