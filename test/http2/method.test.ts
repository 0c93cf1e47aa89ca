/**
 * Http2Client sends a method as node:http2 and fetch do: HTTP methods are case-sensitive, so a
 * method of its own goes out as given (`patch` stayed `patch` with node:http2 and fetch, and went
 * out as `PATCH` here); the six fetch normalises are upper-cased. A method that is not a token is
 * a TypeError from the returned promise, before anything is sent. A body is sent whatever the
 * method: node:http2 ends a GET, HEAD or DELETE stream with its headers unless told otherwise, so
 * the server ran a DELETE without its body and the call failed `ERR_STREAM_WRITE_AFTER_END`.
 */
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenH2 } from './listen.js';

const cleanup = leakCheckEach();

async function server(): Promise<{ origin: string; seen: string[] }> {
  const seen: string[] = [];
  const srv = http2.createServer((req, res) => {
    seen.push(req.method);
    res.end();
  });
  return { origin: `http://127.0.0.1:${await listenH2(srv, cleanup)}`, seen };
}

describe('Http2Client: the method on the wire', () => {
  it('own methods as given, the six fetch normalises upper-cased', async () => {
    const { origin, seen } = await server();
    const client = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => client.close());
    for (const method of ['patch', 'PATCH', 'get', 'Delete', 'put', 'propfind', 'M-SEARCH']) await client.request(`${origin}/`, { method });
    expect(seen).toEqual(['patch', 'PATCH', 'GET', 'DELETE', 'PUT', 'propfind', 'M-SEARCH']);
  });

  it('a method that is not a token is refused before anything is sent', async () => {
    const { origin, seen } = await server();
    const client = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => client.close());
    for (const method of ['', 'GET /', 'G\nET', 5]) {
      const call = client.request(`${origin}/`, { method: method as string });
      await expect(call).rejects.toThrow(TypeError);
    }
    expect(seen).toEqual([]);
    expect(client.stats().targets).toBe(0);
  });

  it('a body goes with any method: a DELETE, GET or HEAD with a body is sent whole, never ended at its headers', async () => {
    const bodies: Array<[string, string, boolean]> = [];
    const srv = http2.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        bodies.push([req.method, Buffer.concat(chunks).toString(), req.stream.endAfterHeaders]);
        res.end('done');
      });
    });
    const origin = `http://127.0.0.1:${await listenH2(srv, cleanup)}`;
    const client = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => client.close());
    for (const method of ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST']) {
      const res = await client.request(`${origin}/items/1`, { method, body: `{"m":"${method}"}` });
      expect(res.status).toBe(200);
    }
    // Without one, a GET still ends at its headers (no empty DATA frame), as with node:http2 alone.
    await client.request(`${origin}/`);
    expect(bodies).toEqual([
      ['DELETE', '{"m":"DELETE"}', false],
      ['GET', '{"m":"GET"}', false],
      ['HEAD', '{"m":"HEAD"}', false],
      ['OPTIONS', '{"m":"OPTIONS"}', false],
      ['POST', '{"m":"POST"}', false],
      ['GET', '', true],
    ]);
  });
});
