/**
 * A peer resets an upload's stream with NO_ERROR before any response while part of the body still
 * waits on flow control (a server that never reads the body and gives up on it; a proxy answering
 * 413 to several large uploads and closing the rest). node:http2 then ends the stream's readable
 * side (`rstCode` 0, `closed` true) but never emits 'close': the writable side still holds the
 * unsent body. Http2Client waited for that 'close', so the call hung (until its `timeout`, for
 * ever without one) and, even after the timeout, the undestroyed stream kept the session and its
 * socket open past `close()`: the process never exited (an outside review). Real h2c server on
 * loopback; requests counted at the server; handles checked after each test.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/**
 * A server that never reads `/up` and resets it with `code` 50 ms after it arrives (after
 * answering 413 first, with `answer`); `/small` answers.
 */
async function resettingServer(code: number, answer = false): Promise<{ origin: string; uploads: () => number }> {
  let uploads = 0;
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('error', () => {});
    s.on('close', () => sessions.delete(s));
  });
  server.on('stream', (s, h) => {
    s.on('error', () => {});
    if (h[':path'] === '/small') {
      s.respond({ ':status': 200 });
      s.end('ok');
      return;
    }
    uploads++;
    if (answer) {
      s.respond({ ':status': 413 });
      s.end('too large');
    }
    setTimeout(() => s.close(code), 50);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(async () => {
    for (const s of sessions) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, uploads: () => uploads };
}

/** `p`'s outcome, or 'pending' after `ms`. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('Http2Client: an upload reset with NO_ERROR before any response', () => {
  it.each([
    ['no timeout', undefined],
    ['a 3 s timeout', 3_000],
  ])('%s: rejects at the reset with ERR_HTTP2_STREAM_ERROR and rstCode 0, sent once; close() leaves nothing open', { timeout: 10_000 }, async (_name, timeout) => {
    const { origin, uploads } = await resettingServer(http2.constants.NGHTTP2_NO_ERROR);
    const client = new Http2Client({ breaker: new HostBreaker(), closeTimeout: 500 });
    cleanup.push(() => client.close());
    await client.request(`${origin}/small`); // the session is up, so the reset is the only thing the call can meet
    const started = performance.now();
    const outcome = client.request(`${origin}/up`, { method: 'POST', body: Buffer.alloc(1024 * 1024, 1), timeout }).then(
      () => 'resolved',
      (err: unknown) => err,
    );
    const err = await within(outcome, 2_000);
    expect(err, 'was: pending (no timeout), or DIALGUARD_REQUEST_TIMEOUT at 3 s').toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: 0 });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(uploads()).toBe(1); // a POST the server received is never sent again
    expect(client.stats().leases).toBe(0);
    await client.close(); // and the leak check after this test finds no socket or session left
  });

  it('a GET with a body, reset the same way, is not sent again either (the server had it)', { timeout: 10_000 }, async () => {
    const { origin, uploads } = await resettingServer(http2.constants.NGHTTP2_NO_ERROR);
    const client = new Http2Client({ breaker: new HostBreaker(), closeTimeout: 500 });
    cleanup.push(() => client.close());
    await client.request(`${origin}/small`);
    const err = await within(client.request(`${origin}/up`, { method: 'PUT', body: Buffer.alloc(512 * 1024, 1) }).catch((e: unknown) => e), 2_000);
    expect(err).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: 0 });
    expect(uploads()).toBe(1);
  });

  it('answered 413 first, then reset: resolves with the 413, and close() leaves nothing open', { timeout: 10_000 }, async () => {
    const { origin, uploads } = await resettingServer(http2.constants.NGHTTP2_NO_ERROR, true);
    const client = new Http2Client({ breaker: new HostBreaker(), closeTimeout: 500 });
    cleanup.push(() => client.close());
    await client.request(`${origin}/small`);
    const res = await within(client.request(`${origin}/up`, { method: 'POST', body: Buffer.alloc(1024 * 1024, 1) }), 2_000);
    expect(res).toMatchObject({ status: 413 });
    expect(uploads()).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the reset arrives after the answer
    await client.close();
  });
});
