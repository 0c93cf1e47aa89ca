/**
 * An HTTP/2 answer cut short: the session dies, or the peer resets the stream, after the
 * headers and part of the body. node:http2 ends the stream's readable side in both cases (the
 * close code is already set), so a client that trusts 'end' takes a truncated body for a whole
 * one. Http2Client must fail it, never send a streamed call again once its headers reached the
 * caller (its answer has begun), and carry the reset's code on the error. Real h2c peers on
 * loopback; requests counted at the peer.
 */
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client, type Http2ClientOptions } from '../../src/http2/client.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

function client(options: Http2ClientOptions = {}): Http2Client {
  const c = new Http2Client({ breaker: new HostBreaker(), ...options });
  cleanup.push(() => c.close());
  return c;
}

/** Reads `body` to its end: the text, and how it ended. */
async function drain(body: ReadableStream<Uint8Array>): Promise<{ text: string; error: unknown }> {
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of body) text += decoder.decode(chunk, { stream: true });
    return { text, error: undefined };
  } catch (error) {
    return { text, error };
  }
}

/**
 * A peer that answers `/feed` with its headers and part of a body, then holds the stream open; a
 * `client` (made with `options`) reading it from a turn later. The caller decides how it ends.
 */
async function heldFeed(options: ConstructorParameters<typeof Http2Client>[0]): Promise<{
  peer: Awaited<ReturnType<typeof http2Peer>>;
  c: Http2Client;
  reading: Promise<{ text: string; error: unknown }>;
}> {
  const peer = await http2Peer({
    handler: (stream) => {
      stream.on('error', () => {});
      stream.respond({ ':status': 200 });
      stream.write('part;');
    },
  });
  cleanup.push(() => peer.close());
  const c = new Http2Client({ breaker: new HostBreaker(), ...options });
  cleanup.push(() => c.close());
  const res = await c.stream(`${peer.origin}/feed`);
  const reading = drain(res.body);
  await new Promise((resolve) => setTimeout(resolve, 20));
  return { peer, c, reading };
}

/**
 * Sends RST_STREAM `code` on a server stream now. node:http2's own `close(code)` ends the
 * response first (END_STREAM) when it was begun, so a client never sees the reset mid-answer;
 * the handle's own reset is what a server whose stream failed sends. Throws if this Node has no
 * such handle (the test then fails, never passes unchecked).
 */
function resetNow(stream: http2.ServerHttp2Stream, code: number): void {
  const key = Object.getOwnPropertySymbols(stream).find((k) => String(k) === 'Symbol(kHandle)');
  const handle = key === undefined ? undefined : (stream as unknown as Record<symbol, { rstStream?: (code: number) => void }>)[key];
  if (typeof handle?.rstStream !== 'function') throw new Error('this Node has no stream handle to reset');
  handle.rstStream(code);
}

describe('Http2Client: an answer cut short after its headers', () => {
  for (const method of ['GET', 'POST']) {
    it(`stream() ${method}, the session destroyed mid-body: the body errors, the request is sent once, and close() is prompt`, async () => {
      let cut!: () => void;
      await using peer = await http2Peer({
        handler: (stream) => {
          stream.respond({ ':status': 200 });
          stream.write('part;');
          cut = () => stream.session!.destroy();
        },
      });
      const c = client();
      const res = await c.stream(`${peer.origin}/feed`, { method });
      expect(res.status).toBe(200);
      const reading = drain(res.body);
      await new Promise((resolve) => setTimeout(resolve, 20));
      cut();
      const { text, error } = await reading;
      expect(text).toBe('part;');
      expect(error).toBeInstanceOf(Error); // was: a clean end, the truncation unnoticed
      expect(peer.streams).toBe(1); // was 2 for GET: sent again on a fresh session, its answer orphaned
      expect(c.stats()).toMatchObject({ leases: 0, turns: 0 });
      const t0 = performance.now();
      await c.close();
      expect(performance.now() - t0).toBeLessThan(1_000); // was 5 s: closeTimeout waited for the orphan
    });
  }

  it('request(), a session that served a request destroyed mid-body (its answer not yet the caller\'s): a GET goes back once and gets the whole answer, a POST rejects', async () => {
    let served = 0;
    let cutNext = false;
    await using peer = await http2Peer({
      handler: (stream) => {
        served++;
        stream.respond({ ':status': 200 });
        if (cutNext) {
          cutNext = false;
          stream.write('part;', () => setTimeout(() => stream.session?.destroy(), 10));
        } else stream.end('whole');
      },
    });
    const c = client();
    expect((await c.request(`${peer.origin}/`)).body.toString()).toBe('whole'); // the session works
    cutNext = true;
    const res = await c.request(`${peer.origin}/`);
    expect(res.body.toString()).toBe('whole');
    expect(served).toBe(3);
    expect((await c.request(`${peer.origin}/`)).body.toString()).toBe('whole');
    cutNext = true;
    await expect(c.request(`${peer.origin}/`, { method: 'POST' })).rejects.toBeInstanceOf(Error);
    expect(served).toBe(5); // the POST was sent once
  });

  it('request() with retries off, or maxAttempts 2, a warm session destroyed mid-body: the GET is sent as often as the attempts allow (was: once more, whatever they said)', async () => {
    for (const [retry, sends] of [
      [false, 1],
      [{ maxAttempts: 1 }, 1],
      [{ maxAttempts: 2 }, 2],
    ] as const) {
      let served = 0;
      let cut = 0;
      await using peer = await http2Peer({
        handler: (stream) => {
          served++;
          stream.respond({ ':status': 200 });
          if (cut > 0) {
            cut--;
            stream.write('part;', () => setTimeout(() => stream.session?.destroy(), 10));
          } else stream.end('whole');
        },
      });
      const c = client({ retry });
      expect((await c.request(`${peer.origin}/`)).body.toString()).toBe('whole'); // the session works
      served = 0;
      cut = 5; // every send cut mid-body
      await expect(c.request(`${peer.origin}/`)).rejects.toBeInstanceOf(Error);
      expect({ retry, served }).toEqual({ retry, served: sends });
      await c.close();
    }
  });

  it('request(), a fresh session destroyed mid-body under its first GET: sent once, as node:http2 alone (the session may have died of it)', async () => {
    let served = 0;
    await using peer = await http2Peer({
      handler: (stream) => {
        served++;
        stream.respond({ ':status': 200 });
        stream.write('part;', () => setTimeout(() => stream.session?.destroy(), 10));
      },
    });
    const c = client();
    // Was: sent 4 times in a row (retiredRetries 3), with no wait between them.
    await expect(c.request(`${peer.origin}/`)).rejects.toBeInstanceOf(Error);
    expect(served).toBe(1);
    expect(c.stats().turns).toBe(0);
  });

  it('a reset mid-body (INTERNAL_ERROR): request() rejects and stream()\'s body errors, with ERR_HTTP2_STREAM_ERROR and its rstCode, sent once each', async () => {
    const code = http2.constants.NGHTTP2_INTERNAL_ERROR;
    await using peer = await http2Peer({
      handler: (stream) => {
        stream.on('error', () => {});
        stream.respond({ ':status': 200 });
        // destroy(err) resets at once; close(code) would end the response cleanly first.
        stream.write('part;', () => setTimeout(() => stream.destroy(new Error('the handler failed')), 10));
      },
    });
    const c = client();
    const failure = await c.request(`${peer.origin}/`).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: code }); // rstCode was missing
    const res = await c.stream(`${peer.origin}/`);
    const { text, error } = await drain(res.body);
    expect(text).toBe('part;');
    expect(error).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: code });
    expect(peer.streams).toBe(2); // a reset is the server's answer: never sent again
  });

  it('a reset before any response carries its rstCode too (REFUSED_STREAM, INTERNAL_ERROR)', async () => {
    const C = http2.constants;
    await using peer = await http2Peer({
      handler: (stream, headers) => {
        stream.on('error', () => {});
        stream.close(headers[':path'] === '/refused' ? C.NGHTTP2_REFUSED_STREAM : C.NGHTTP2_INTERNAL_ERROR);
      },
    });
    const c = client();
    for (const [path, code] of [
      ['/refused', C.NGHTTP2_REFUSED_STREAM],
      ['/internal', C.NGHTTP2_INTERNAL_ERROR],
    ] as const) {
      const failure = await c.request(`${peer.origin}${path}`, { method: 'POST' }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failure).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: code });
    }
  });
  it('stream(), a peer that goes silent mid-body: the keep-alive timeout errors the body (was: a clean end, the body truncated)', async () => {
    const { peer, reading } = await heldFeed({ keepAliveInterval: 50, keepAliveTimeout: 100 });
    peer.silence();
    const { text, error } = await reading;
    expect(text).toBe('part;');
    expect(error).toMatchObject({ code: 'DIALGUARD_CONNECTION_GONE' });
    expect(peer.streams).toBe(1);
  });

  it('stream(), close() while its body is still being read: after closeTimeout the body errors (was: a clean end, the body truncated)', async () => {
    const { peer, c, reading } = await heldFeed({ closeTimeout: 100 });
    await c.close();
    const { text, error } = await reading;
    expect(text).toBe('part;');
    expect(error).toBeInstanceOf(Error);
    expect(peer.streams).toBe(1);
  });

  it('stream(), a peer that sends GOAWAY (a graceful drain) and then goes silent mid-body: the session is found dead all the same (was: keep-alive stopped at the GOAWAY, the body hung forever)', async () => {
    const { peer, reading } = await heldFeed({ keepAliveInterval: 50, keepAliveTimeout: 100 });
    peer.goaway();
    await new Promise((resolve) => setTimeout(resolve, 20));
    peer.silence();
    const t0 = performance.now();
    const bound = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 3_000).unref());
    const outcome = await Promise.race([reading, bound]);
    expect(outcome).not.toBe('hung');
    expect((outcome as { error: unknown }).error).toMatchObject({ code: 'DIALGUARD_CONNECTION_GONE' });
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(peer.streams).toBe(1);
  });

  it('a quiet answer on a session draining after GOAWAY is waited for past one keep-alive bound (the peer is alive, only slow): answered, sent once', async () => {
    await using peer = await http2Peer({
      handler: (stream) => {
        stream.on('error', () => {});
        stream.session!.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id); // drain: this stream is processed
        setTimeout(() => {
          if (!stream.destroyed) {
            stream.respond({ ':status': 200 });
            stream.end('late');
          }
        }, 300); // quiet for 300 ms: past one bound (150 ms), within the draining one (450 ms)
      },
    });
    const c = new Http2Client({ breaker: new HostBreaker(), keepAliveInterval: 50, keepAliveTimeout: 100 });
    cleanup.push(() => c.close());
    const res = await c.request(`${peer.origin}/poll`);
    expect(res.body.toString()).toBe('late');
    expect(peer.streams).toBe(1);
  });

  it('REFUSED_STREAM after the response began (103 Early Hints, headers, part of the body) is the server\'s answer: a POST or a GET is sent once, request() rejects with rstCode 7 (was: read as never processed, sent 3 times; an outside review)', async () => {
    const C = http2.constants;
    const runs = new Map<string, number>();
    await using peer = await http2Peer({
      handler: (stream, headers) => {
        stream.on('error', () => {});
        const path = String(headers[':path']);
        runs.set(path, (runs.get(path) ?? 0) + 1);
        if (path.startsWith('/hints')) {
          // 103 Early Hints: informational headers, the request under way; then refused.
          stream.additionalHeaders({ ':status': 103, link: '</style.css>; rel=preload' });
          return void setTimeout(() => resetNow(stream, C.NGHTTP2_REFUSED_STREAM), 10);
        }
        stream.respond({ ':status': 200 });
        if (path.startsWith('/headers')) return void setTimeout(() => resetNow(stream, C.NGHTTP2_REFUSED_STREAM), 10);
        stream.write('part;', () => setTimeout(() => resetNow(stream, C.NGHTTP2_REFUSED_STREAM), 10));
      },
    });
    const c = client();
    for (const method of ['POST', 'GET']) {
      for (const path of [`/hints-${method}`, `/headers-${method}`, `/body-${method}`]) {
        const failure = await c.request(`${peer.origin}${path}`, { method }).then(
          () => undefined,
          (err: unknown) => err,
        );
        expect({ path, failure }).toMatchObject({ path, failure: { code: 'ERR_HTTP2_STREAM_ERROR', rstCode: C.NGHTTP2_REFUSED_STREAM } });
      }
      const res = await c.stream(`${peer.origin}/body-stream-${method}`, { method });
      expect(await drain(res.body)).toMatchObject({ text: 'part;', error: { rstCode: C.NGHTTP2_REFUSED_STREAM } });
    }
    expect(Object.fromEntries(runs)).toEqual({ '/hints-POST': 1, '/headers-POST': 1, '/body-POST': 1, '/body-stream-POST': 1, '/hints-GET': 1, '/headers-GET': 1, '/body-GET': 1, '/body-stream-GET': 1 });
  });

  it('RST_STREAM(NO_ERROR) before the body its content-length names is a body cut short: request() rejects and stream()\'s body errors, sent once (was: a 200 with 8 of 100 bytes; an outside review)', async () => {
    const C = http2.constants;
    let runs = 0;
    await using peer = await http2Peer({
      handler: (stream, headers) => {
        stream.on('error', () => {});
        runs++;
        const whole = headers[':path'] === '/whole';
        stream.respond({ ':status': 200, 'content-length': whole ? '8' : '100' });
        stream.write('8 bytes.', () => setTimeout(() => resetNow(stream, C.NGHTTP2_NO_ERROR), 10));
      },
    });
    const c = client();
    const failure = await c.request(`${peer.origin}/short`).then(
      (r) => r,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: 'ERR_HTTP2_STREAM_ERROR', rstCode: C.NGHTTP2_NO_ERROR });
    const res = await c.stream(`${peer.origin}/short`);
    expect(await drain(res.body)).toMatchObject({ text: '8 bytes.', error: { code: 'ERR_HTTP2_STREAM_ERROR', rstCode: C.NGHTTP2_NO_ERROR } });
    expect(runs).toBe(2); // each sent once: the server answered
    // A NO_ERROR reset after the whole body (a server stopping the client's upload) is a whole answer.
    expect((await c.request(`${peer.origin}/whole`)).body.toString()).toBe('8 bytes.');
  });
});

