/**
 * A session node:http2 closes on its own, with no event yet: a request with a header past the
 * server's limit is refused, and the client's own session sends GOAWAY and closes. Requests sent
 * right after went on that session, failed at once with ERR_HTTP2_GOAWAY_SESSION or
 * ERR_HTTP2_INVALID_SESSION (certainly unsent: the server never saw them), and reached their
 * callers (an outside review: 168 of 400, POSTs as DIALGUARD_CONNECTION_GONE). The session is
 * now retired (or dropped) as the request finds it so, and the request goes to a fresh one.
 * A stock node:http2 server counts what it ran.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { TEST_CERT, TEST_KEY } from '../../src/testing/test-cert.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/**
 * Starts `server` on loopback: each stream is recorded by `ran` (its request headers), its body
 * read, then answered 200 "ok". Its sessions are destroyed and it is closed after the test.
 */
async function serve(server: http2.Http2Server | http2.Http2SecureServer, ran: (headers: http2.IncomingHttpHeaders) => void): Promise<number> {
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s: http2.ServerHttp2Session) => {
    sessions.add(s);
    s.on('error', () => {});
    s.on('close', () => sessions.delete(s));
  });
  server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    stream.on('error', () => {});
    ran(headers);
    stream.resume();
    stream.on('end', () => {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  cleanup.push(() => sessions.forEach((s) => s.destroy()));
  return (server.address() as net.AddressInfo).port;
}

describe('Http2Client: a session node:http2 closed on its own', () => {
  it('requests sent right after an oversized header are served on a fresh session, each run once (GET and POST)', async () => {
    const ran = new Map<string, number>();
    const port = await serve(http2.createSecureServer({ key: TEST_KEY, cert: TEST_CERT }), (headers) => {
      const path = String(headers[':path']);
      ran.set(path, (ran.get(path) ?? 0) + 1);
    });
    const origin = `https://127.0.0.1:${port}`;
    const failures: string[] = [];
    let n = 0;
    for (let rep = 0; rep < 10; rep++) {
      const client = new Http2Client({ tls: { ca: TEST_CERT }, breaker: new HostBreaker(), closeTimeout: 100 });
      cleanup.push(() => client.close());
      await client.request(`${origin}/warm`);
      await client.request(`${origin}/big`, { headers: { 'x-big': 'v'.repeat(70_000) }, timeout: 3_000 }).catch(() => {});
      await new Promise((resolve) => setImmediate(resolve));
      const calls = Array.from({ length: 10 }, (_, i) => {
        const method = i % 2 === 0 ? 'GET' : 'POST';
        const path = `/f${n++}`;
        return client
          .request(`${origin}${path}`, { method, timeout: 3_000, ...(method === 'POST' ? { body: 'x' } : {}) })
          .then((r) => expect(r.status).toBe(200))
          .catch((err: { code?: unknown }) => void failures.push(`${method} ${path}: ${String(err.code)}`));
      });
      await Promise.all(calls);
      await client.close();
    }
    expect(failures).toEqual([]);
    for (let i = 0; i < n; i++) expect(ran.get(`/f${i}`), `/f${i}`).toBe(1);
  });
});

describe('Http2Client: a still-connecting session node:http2 destroys as it refuses a header', () => {
  it('the next GET (and POST) goes to a fresh session and is served; the bad request fails with its own error', async () => {
    const ran: string[] = [];
    const port = await serve(http2.createServer(), (headers) => void ran.push(`${String(headers[':method'])} ${String(headers[':path'])}`));
    const origin = `http://127.0.0.1:${port}`;
    const client = new Http2Client({ breaker: new HostBreaker(), closeTimeout: 100 });
    cleanup.push(() => client.close());
    // The client's first request, on a session still connecting: node:http2 destroys it at once.
    const bad = await client.request(`${origin}/bad`, { headers: { 'bad name': '1' } }).then(() => 'ok', (err: { code?: unknown }) => err.code);
    expect(bad).toBe('ERR_INVALID_HTTP_TOKEN');
    const get = await client.request(`${origin}/get`).then((r) => r.status, (err: { code?: unknown }) => err.code);
    expect(get).toBe(200); // was DIALGUARD_CONNECTION_GONE: released as cut by the session's death, never sent
    const post = await client.request(`${origin}/post`, { method: 'POST', body: 'x' }).then((r) => r.status, (err: { code?: unknown }) => err.code);
    expect(post).toBe(200);
    expect(ran).toEqual(['GET /get', 'POST /post']);
  });
});
