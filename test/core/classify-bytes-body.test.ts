/**
 * A 5xx body saying EOF (a Go server's `http.Error(w, "EOF", 502)`) is read whatever form the
 * client keeps it in. Read only as text or as parsed JSON, the same response was retried or not
 * by the body type the client was set to produce: axios `responseType: 'arraybuffer'` and got
 * `responseType: 'buffer'` keep a Buffer, and an idempotent call under retry() was sent once where
 * the text forms were sent 3 times; undici's `interceptors.responseError()` keeps the body on the
 * error itself (`ResponseError.body`), also unread (an outside review). Sends counted at a real
 * server; a binary body (its content-type says so) is still not read.
 */
import http from 'node:http';
import type net from 'node:net';
import axios from 'axios';
import got from 'got';
import { errors as undiciErrors } from 'undici';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { factsOf } from '../../src/core/classify-rules.js';
import { retry } from '../../src/retry/retry.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanups = leakCheckEach();

async function eofServer(type = 'text/plain; charset=utf-8', body = 'EOF\n'): Promise<{ url: string; readonly sends: number }> {
  let sends = 0;
  const server = http.createServer((req, res) => {
    sends++;
    req.resume();
    res.writeHead(502, { 'content-type': type, connection: 'close' });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`,
    get sends() {
      return sends;
    },
  };
}

const quick = { idempotent: true, maxAttempts: 3, backoff: () => 1, budget: null } as const;

describe('classify reads a 5xx body kept as bytes', () => {
  const byteClients: Array<[string, (url: string) => Promise<unknown>]> = [
    ['axios, arraybuffer', (url) => axios.get(url, { responseType: 'arraybuffer' })],
    ['got, buffer', (url) => got(url, { responseType: 'buffer', retry: { limit: 0 } })],
  ];
  it.each(byteClients)('%s: "EOF" is the connection, retried as the text form is (was: once)', async (_name, call) => {
    const server = await eofServer();
    await expect(retry(() => call(server.url), quick)).rejects.toBeDefined();
    expect(server.sends).toBe(3);
  });

  it('JSON bytes: {"error":"read tcp ...: EOF"} is read too', async () => {
    const server = await eofServer('application/json', '{"error":"read tcp 10.0.0.1:443: EOF"}');
    const err = await axios.get(server.url, { responseType: 'arraybuffer' }).catch((e: unknown) => e);
    expect(classify(err)).toMatchObject({ kind: 'connection', transient: true });
  });

  it('a binary body (its content-type says so) is not read', async () => {
    const server = await eofServer('application/octet-stream', 'EOF');
    const err = await axios.get(server.url, { responseType: 'arraybuffer' }).catch((e: unknown) => e);
    expect(classify(err).kind).toBe('application');
  });

  it("undici's ResponseError: its own body, text or parsed JSON", () => {
    const text = new undiciErrors.ResponseError('Response Error', 502, { headers: { 'content-type': 'text/plain' }, body: 'EOF\n' });
    const json = new undiciErrors.ResponseError('Response Error', 502, { headers: { 'content-type': 'application/json' }, body: { error: 'EOF' } });
    expect(classify(text)).toMatchObject({ kind: 'connection', transient: true });
    expect(classify(json)).toMatchObject({ kind: 'connection', transient: true });
    // A 4xx body is never read.
    const four = new undiciErrors.ResponseError('Response Error', 400, { headers: {}, body: 'EOF' });
    expect(classify(four).kind).toBe('application');
  });

  it('bytes read as text reads it: whole up to 6 144 bytes (head 4 096 and tail 2 048 past it), an empty content-type as none', () => {
    const bodyOf = (bytes: Buffer, headers: Record<string, string> = {}): readonly string[] | undefined => factsOf({ status: 502, response: { data: bytes, headers } })?.body;
    for (const n of [3_000, 6_144]) {
      const text = 'a'.repeat(n - 5) + ': EOF';
      expect(bodyOf(Buffer.from(text))).toEqual([text]);
    }
    const long = 'h'.repeat(4_096) + 'm'.repeat(10) + 't'.repeat(2_048);
    expect(bodyOf(Buffer.from(long))).toEqual([`${'h'.repeat(4_096)} … ${'t'.repeat(2_048)}`]);
    expect(bodyOf(Buffer.from('EOF'), { 'content-type': '' })).toEqual(['EOF']);
    expect(bodyOf(Buffer.from('EOF'), { 'content-type': 'application/problem+json' })).toEqual(['EOF']);
    expect(bodyOf(Buffer.from('EOF'), { 'content-type': 'image/png' })).toBeUndefined();
    // An ArrayBuffer (a fetch-style body) too.
    expect(bodyOf(new Uint8Array(Buffer.from('EOF')).buffer as unknown as Buffer)).toEqual(['EOF']);
  });

  it('a 4xx error body, bytes or ResponseError, is never read', () => {
    expect(factsOf({ status: 404, response: { data: Buffer.from('EOF'), headers: {} } })?.body).toBeUndefined();
    expect(factsOf(new undiciErrors.ResponseError('Response Error', 404, { headers: {}, body: 'EOF' }))?.body).toBeUndefined();
  });

  it('a long body: its head and tail are read, at a bounded cost', () => {
    const big = Buffer.concat([Buffer.alloc(1_000_000, 'x'), Buffer.from(': EOF')]);
    const err = Object.assign(new Error('Request failed with status code 502'), { response: { status: 502, data: big, headers: {} }, status: 502 });
    expect(classify(err).kind).toBe('connection');
  });
});
