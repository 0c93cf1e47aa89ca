/**
 * Http2Client tries again a request whose session could not be established (its `retry`
 * option): a dial refused while a server restarts is dialled again after a jittered wait, inside
 * the request's own timeout, for any method (nothing of it was sent). Never a breaker refusal, a
 * certificate the client rejects, or a dial that timed out. Dials are counted per breaker key
 * (`dialguard:dial:settled`), requests and connections at the peer.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { HostUnavailableError, PoolClosedError, RequestTimeoutError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client, type Http2ClientOptions } from '../../src/http2/client.js';
import { retriesOf } from '../../src/http2/index.js';
import { subscribe } from '../../src/observe/channels.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { acceptAndHold } from '../../src/testing/tcp-peers.js';
import { TEST_CERT } from '../../src/testing/test-cert.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { type AlertProxy, alertProxy } from '../helpers/tls-alert-proxy.js';
import { dialsPerKey } from '../helpers/per-address.js';

const cleanup = leakCheckEach();
const dials = dialsPerKey();

function client(options: Http2ClientOptions = {}): Http2Client {
  const c = new Http2Client({ breaker: new HostBreaker(), connectTimeout: 1_000, ...options });
  cleanup.push(() => c.close());
  return c;
}

const code = (r: PromiseSettledResult<unknown>): unknown => (r.status === 'rejected' ? ((r.reason as { code?: unknown }).code ?? r.reason) : 'ok');

describe('Http2Client: a request whose dial was refused is tried again', () => {
  it('a 300 ms restart: every request sent while the port was closed is served once, POSTs too; with retry: false every one fails', async () => {
    await using peer = await http2Peer();
    const key = `127.0.0.1:${peer.port}`;
    for (const retry of [undefined, false] as const) {
      const c = client({ retry });
      await c.request(`${peer.origin}/warm`);
      await peer.kill(); // the session goes, the port is closed: every dial is refused
      await c.close(); // a fresh session is needed either way; the next client dials
      const d = client({ retry, breaker: new HostBreaker({ minOutage: 1_000 }) });
      dials.clear();
      const streams = peer.streams;
      const calls = Array.from({ length: 20 }, (_, i) => d.request(`${peer.origin}/${i}`, { method: i % 2 === 0 ? 'GET' : 'POST', body: i % 2 === 0 ? undefined : 'x' }));
      const back = new Promise((resolve) => setTimeout(resolve, 300)).then(() => peer.listen());
      const results = await Promise.allSettled(calls);
      await back;
      if (retry === undefined) {
        expect(results.map(code)).toEqual(Array(20).fill('ok'));
        expect(peer.streams - streams).toBe(20); // each served once: none sent twice
        // The 20 shared each dial: the refused one, then the one that found the server back.
        expect(dials.get(key)).toBe(2);
      } else {
        expect(results.map(code)).toEqual(Array(20).fill('ECONNREFUSED'));
        expect(peer.streams - streams).toBe(0);
        expect(dials.get(key)).toBe(1);
      }
    }
  });

  it('a warm client whose peer restarts for 600 ms: GETs sent right after the kill ride the dead session, are resent, and are still served once the port is back (was: 5 of 5 ECONNREFUSED at ~500 ms: the resend spent an attempt, and the one wait left did not span the restart)', async () => {
    await using peer = await http2Peer();
    const c = client({ breaker: new HostBreaker({ minOutage: 2_000 }) });
    await c.request(`${peer.origin}/warm`);
    await peer.kill();
    const streams = peer.streams;
    const calls = Array.from({ length: 5 }, (_, i) => c.request(`${peer.origin}/${i}`, { timeout: 5_000 }));
    const back = new Promise((resolve) => setTimeout(resolve, 600)).then(() => peer.listen());
    const results = await Promise.allSettled(calls);
    await back;
    expect(results.map(code)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
    expect(peer.streams - streams).toBe(5); // each served once
  });

  it('a TLS handshake the peer ends with a transient alert (internal_error): dialled again, POSTs too, and served once each', async () => {
    let posts = 0;
    await using peer = await http2Peer({
      tls: true,
      handler: (stream, headers) => {
        if (headers[':method'] === 'POST') posts++;
        stream.respond({ ':status': 200 });
        stream.end('ok');
      },
    });
    // Every other connection's ClientHello answered with the alert (a terminator whose backend restarts).
    const proxy = await alertProxy(peer.port, (i) => i % 2 === 0);
    cleanup.push(() => proxy.close());
    for (const method of ['GET', 'POST']) {
      const c = client({ tls: { ca: TEST_CERT }, retry: { backoff: constant(5), budget: null } });
      const r = await c.request(`https://localhost:${proxy.port}/x`, { method, body: method === 'POST' ? 'x' : undefined });
      expect(r.status).toBe(200);
      await c.close();
    }
    expect(proxy.accepted).toBe(4); // each: the refused handshake, then the one that was served
    expect(posts).toBe(1);
  });

  it('a peer that accepts and hangs up before its SETTINGS (a proxy whose backend restarts): dialled again, POSTs too (was: TransportClosedError at once)', async () => {
    await using peer = await http2Peer();
    const port = peer.port;
    await peer.kill();
    let hungUp = 0;
    const fin = net.createServer((socket) => {
      hungUp++;
      socket.on('error', () => {});
      socket.end(); // a FIN before any byte of HTTP/2
      socket.resume().on('end', () => socket.destroy());
    });
    cleanup.push(() => new Promise<void>((resolve) => (fin.listening ? fin.close(() => resolve()) : resolve())));
    await new Promise<void>((resolve) => fin.listen(port, '127.0.0.1', resolve));
    const c = client({ retry: { backoff: constant(150), budget: null } });
    const calls = Promise.allSettled([c.request(`${peer.origin}/a`), c.request(`${peer.origin}/b`, { method: 'POST', body: 'x' })]);
    while (hungUp === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    fin.close();
    await peer.listen();
    expect((await calls).map(code)).toEqual(['ok', 'ok']);
    expect(peer.streams).toBe(2);
    expect(hungUp).toBe(1);
  });

  it('a server down for good: maxAttempts dials, then the last dial\'s own error', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const c = client({ retry: { maxAttempts: 3, backoff: constant(5), budget: null } });
    const err = await c.request(`${peer.origin}/`).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ECONNREFUSED' });
    expect((retriesOf(err) as RetriesExhaustedError).errors.map((e) => (e as { code?: string }).code)).toEqual(Array(3).fill('ECONNREFUSED'));
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(3);
    const once = client({ retry: { maxAttempts: 1 } });
    dials.clear();
    const alone = await once.request(`${peer.origin}/`).catch((e: unknown) => e);
    expect(alone).toMatchObject({ code: 'ECONNREFUSED' });
    expect(retriesOf(alone)).toBeUndefined(); // never retried: no verdict
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(1);
  });

  it('a wait that would outlast the request timeout is not waited: it fails at once as its dial did', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const c = client({ retry: { backoff: constant(5_000), budget: null } });
    const t0 = performance.now();
    await expect(c.request(`${peer.origin}/`, { timeout: 1_000 })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(performance.now() - t0).toBeLessThan(900);
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(1);
  });

  it('retries fill the request timeout and stop short of it: dials at about 0, 200 and 400 ms, none after', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const c = client({ retry: { backoff: constant(200), budget: null, maxAttempts: 100 } });
    const t0 = performance.now();
    const err = await c.request(`${peer.origin}/`, { timeout: 500 }).catch((e: unknown) => e);
    const ms = performance.now() - t0;
    expect(err).toMatchObject({ code: 'ECONNREFUSED' }); // the next dial would start at 600 ms
    expect(err).not.toBeInstanceOf(RequestTimeoutError);
    expect(ms).toBeLessThan(500);
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(3);
  });

  it('the request timeout passing during a later dial rejects with RequestTimeoutError, as on any other path', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const c = client({ connectTimeout: 5_000, retry: { backoff: constant(150), budget: null } });
    const call = c.request(`${peer.origin}/`, { timeout: 600 }).catch((e: unknown) => e);
    // Refused at once; by the retry, the port accepts and never speaks HTTP/2: that dial outlasts the timeout.
    await using hold = await acceptAndHold({ port: peer.port });
    const err = await call;
    expect(err).toBeInstanceOf(RequestTimeoutError);
    expect((err as RequestTimeoutError).timeout).toBe(600);
    expect(hold.attempts).toBe(1);
  });

  it('the caller\'s abort and close() end a request waiting to dial again, at once', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const c = client({ retry: { backoff: constant(10_000), budget: null } });
    const controller = new AbortController();
    const aborted = c.request(`${peer.origin}/`, { signal: controller.signal }).catch((e: unknown) => e);
    const closed = c.request(`${peer.origin}/`).catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 100)); // both refused, both waiting 10 s
    const t0 = performance.now();
    controller.abort(new Error('caller gave up'));
    expect(((await aborted) as Error).message).toBe('caller gave up');
    await c.close();
    expect(await closed).toBeInstanceOf(PoolClosedError);
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(1); // one shared dial, never another
  });

  it('twenty requests waiting to dial again print no MaxListenersExceededWarning (close() is heard by each)', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    cleanup.push(() => process.off('warning', onWarning));
    const c = client({ retry: { backoff: constant(10_000), budget: null } });
    const calls = Promise.allSettled(Array.from({ length: 20 }, (_, i) => c.request(`${peer.origin}/${i}`)));
    await new Promise((resolve) => setTimeout(resolve, 100)); // all refused, all waiting
    await c.close();
    expect((await calls).map(code)).toEqual(Array(20).fill('DIALGUARD_POOL_CLOSED'));
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    expect(warnings.map((w) => w.name)).toEqual([]);
  });

  it('the budget bounds the retries: with none left, the refusal is the answer', async () => {
    await using peer = await http2Peer();
    await peer.kill();
    const budget = new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 1, ttl: 60_000 }); // 60 retries a minute, whatever the traffic
    for (let i = 0; i < 59; i++) budget.tryWithdraw(); // all but one spent
    const c = client({ retry: { backoff: constant(5), budget, maxAttempts: 5 } });
    const err = await c.request(`${peer.origin}/`).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ECONNREFUSED' });
    // The verdict rides on it (it said nothing of the budget; an outside review).
    expect(retriesOf(err)).toBeInstanceOf(RetryBudgetExhaustedError);
    expect(dials.get(`127.0.0.1:${peer.port}`)).toBe(2); // the first, and the one retry the budget had
    expect(budget.stats()).toMatchObject({ deposited: 1, withdrawn: 60, refused: 1 });
  });
  it('every call deposits in the budget once, whatever maxAttempts (was: none with maxAttempts 1, so its resends drew on an empty budget)', async () => {
    await using peer = await http2Peer();
    for (const maxAttempts of [1, 3]) {
      const budget = new RetryBudget({ percentCanRetry: 0.5, minRetriesPerSec: 0 });
      const c = client({ retry: { maxAttempts, budget } });
      for (let i = 0; i < 4; i++) expect((await c.request(`${peer.origin}/${i}`)).status).toBe(200);
      expect(budget.stats()).toMatchObject({ deposited: 4, withdrawn: 0 });
      expect(budget.available).toBe(2);
    }
  });
});

describe('Http2Client: a request whose session died under it goes back only as the budget allows', () => {
  it('three GETs in flight when the peer dies: resent and served with budget, failed without (was: resent either way)', async () => {
    for (const [budget, maxAttempts] of [
      [null, 10],
      [new RetryBudget({ percentCanRetry: 0, minRetriesPerSec: 0 }), 10],
    ] as const) {
      let holds = 0;
      await using peer = await http2Peer({
        handler: (stream, headers) => {
          if (headers[':path'] === '/hold' && ++holds <= 3) return; // the first three are never answered
          stream.respond({ ':status': 200 });
          stream.end('ok');
        },
      });
      const c = client({ retry: { backoff: constant(20), budget, maxAttempts } });
      await c.request(`${peer.origin}/warm`); // the session has served a request: a resend may follow
      const calls = Promise.allSettled(Array.from({ length: 3 }, () => c.request(`${peer.origin}/hold`)));
      while (holds < 3) await new Promise((resolve) => setTimeout(resolve, 5));
      await peer.kill();
      await peer.listen();
      const results = await calls;
      if (budget === null) {
        expect(results.map(code)).toEqual(['ok', 'ok', 'ok']);
        expect(holds).toBe(6);
      } else {
        expect(results.map(code)).toEqual(Array(3).fill('DIALGUARD_CONNECTION_GONE'));
        expect(holds).toBe(3);
        expect(budget.stats()).toMatchObject({ refused: 3, withdrawn: 0 });
      }
    }
  });
  it('maxAttempts 1 or retry: false: a GET whose warm session died under it is sent once, the budget not even asked (was: resent, up to retiredRetries)', async () => {
    for (const retry of [{ maxAttempts: 1, budget: new RetryBudget() }, false] as const) {
      let holds = 0;
      await using peer = await http2Peer({
        handler: (stream, headers) => {
          if (headers[':path'] === '/hold' && ++holds <= 3) return;
          stream.respond({ ':status': 200 });
          stream.end('ok');
        },
      });
      const c = client({ retry });
      await c.request(`${peer.origin}/warm`);
      const calls = Promise.allSettled(Array.from({ length: 3 }, () => c.request(`${peer.origin}/hold`)));
      while (holds < 3) await new Promise((resolve) => setTimeout(resolve, 5));
      await peer.kill();
      await peer.listen();
      expect((await calls).map(code)).toEqual(Array(3).fill('DIALGUARD_CONNECTION_GONE'));
      expect(holds).toBe(3);
      if (retry !== false) expect(retry.budget.stats()).toMatchObject({ refused: 0, withdrawn: 0 });
      expect(c.stats().turns).toBe(0);
    }
  });
});

describe('Http2Client: what is not tried again', () => {
  it('a refusal by the breaker: at once, no dial', async () => {
    const breaker = new HostBreaker();
    const c = client({ breaker });
    breaker.isolate('127.0.0.1:1');
    await expect(c.request('http://127.0.0.1:1/')).rejects.toBeInstanceOf(HostUnavailableError);
    expect(dials.size).toBe(0);
  });

  it('a certificate the client rejects: one handshake, at once', async () => {
    await using peer = await http2Peer({ tls: true });
    const c = client({ tls: {} }); // the test CA not trusted
    await expect(c.request(`${peer.origin}/`)).rejects.toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    expect(peer.attempts).toBe(1);
    // The same client trusting it is served, on the same breaker: nothing counted against the host.
    const good = client({ tls: { ca: TEST_CERT } });
    expect((await good.request(`${peer.origin}/`)).status).toBe(200);
  });

  it('a stream the server reset: the request ran, so it is the answer (raw node:http2 says the same)', async () => {
    await using peer = await http2Peer({ handler: (stream) => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR) });
    const c = client({ retry: { backoff: constant(5), budget: null } });
    await expect(c.request(`${peer.origin}/`)).rejects.toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR' });
    expect(peer.streams).toBe(1);
  });

  it('a TLS record error after the request reached the session: the POST is not sent again (was: classed as a handshake\'s error and resent, 3 POSTs)', async () => {
    // Once the POST reached the server, a plaintext alert record goes into the encrypted stream:
    // the client fails with ERR_SSL_BAD_RECORD_TYPE, a code a handshake also fails with.
    let posts = 0;
    let proxy: AlertProxy | undefined;
    await using peer = await http2Peer({
      tls: true,
      handler: (stream, headers) => {
        stream.on('error', () => {}); // the session dies under it
        if (headers[':method'] !== 'POST') {
          stream.respond({ ':status': 200 });
          stream.end('ok');
          return;
        }
        posts++;
        proxy?.inject();
      },
    });
    proxy = await alertProxy(peer.port);
    cleanup.push(() => proxy.close());
    const origin = `https://localhost:${proxy.port}`;
    const c = client({ tls: { ca: TEST_CERT }, retry: { backoff: constant(5), budget: null } });
    expect((await c.request(`${origin}/warm`)).status).toBe(200);
    await expect(c.request(`${origin}/p`, { method: 'POST', body: 'x' })).rejects.toMatchObject({ code: 'ERR_SSL_BAD_RECORD_TYPE' });
    expect(posts).toBe(1);
    expect(proxy.accepted).toBe(1); // no dial after it
  });

  it('names a bad retry option', () => {
    expect(() => new Http2Client({ retry: 'yes' as never })).toThrow(/^retry must be an object or false, got "yes"/);
    expect(() => new Http2Client({ retry: { maxAttempts: 0 } })).toThrow(/^retry.maxAttempts must be between 1 and 100, got 0/);
    expect(() => new Http2Client({ retry: { backoff: 5 as never } })).toThrow(/^retry.backoff must be a function, got 5/);
    expect(() => new Http2Client({ retry: { budget: {} as never } })).toThrow(/^retry.budget must be a RetryBudget or null/);
  });
});

describe('Http2Client: every request is reported once when it ends', () => {
  it('a request dialled again is on http2:settled only, not also on retry:settled (was: both, two call.duration records for one request; an outside review)', async () => {
    await using peer = await http2Peer();
    const port = peer.port;
    await peer.kill(); // refused until it listens again
    const c = client({ breaker: new HostBreaker({ minOutage: 5_000 }), retry: { backoff: constant(50), budget: null } });
    const heard = { http2: 0, retry: 0 };
    const stops = [subscribe('dialguard:http2:settled', () => void heard.http2++), subscribe('dialguard:retry:settled', () => void heard.retry++)];
    try {
      const calls = [0, 1, 2].map((i) => c.request(`http://127.0.0.1:${port}/${i}`, { timeout: 3_000 }));
      const back = new Promise((resolve) => setTimeout(resolve, 80)).then(() => peer.listen());
      const results = await Promise.allSettled(calls);
      await back;
      expect(results.map(code)).toEqual(['ok', 'ok', 'ok']); // each was dialled again, then served
    } finally {
      for (const stop of stops) stop();
    }
    expect(heard).toEqual({ http2: 3, retry: 0 });
  });
});
