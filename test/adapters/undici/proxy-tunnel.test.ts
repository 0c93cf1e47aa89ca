/**
 * The README's proxy recipe (undici's ProxyAgent, the proxy's dial guarded, `guardedRetry()`
 * composed over it) when the proxy answers CONNECT with 502: the tunnel never opened and the
 * origin saw nothing, yet undici's `RequestAbortedError` ("Proxy response (502) !== 200 when HTTP
 * Tunneling") was read as the caller's cancellation and never retried, so a 300 ms origin restart
 * behind a proxy failed calls at once (an outside review). A gateway status (502, 503, 504) to
 * CONNECT is now a failed dial, never sent: retried for any method; any other status (407) is
 * not retried.
 */
import http from 'node:http';
import net from 'node:net';
import { Client, ProxyAgent, errors, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { guardedConnector, guardedRetry } from '../../../src/adapters/undici/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { answer, httpServer, leakChecked } from './helpers.js';

leakChecked();

/** A CONNECT proxy on loopback answering the first `refusals` CONNECTs with `status`, then tunnelling. */
async function proxy(refusals: number, status: number): Promise<{ uri: string; connects: () => number; close: () => Promise<void> }> {
  let connects = 0;
  const sockets = new Set<net.Socket>();
  const server = http.createServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req: http.IncomingMessage, client: net.Socket) => {
    sockets.add(client);
    client.on('error', () => {});
    client.once('close', () => sockets.delete(client));
    if (++connects <= refusals) {
      client.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    const [host, port] = String(req.url).split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    upstream.once('close', () => sockets.delete(upstream));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    uri: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connects: () => connects,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function recipe(uri: string): ProxyAgent {
  const breaker = new HostBreaker();
  return new ProxyAgent({ uri, clientFactory: (url, o) => new Client(url, { ...o, connect: guardedConnector({ breaker }) }) });
}

describe("ProxyAgent with the README's recipe: the proxy answers CONNECT with a gateway error", () => {
  it('classify: a gateway status to CONNECT is a failed dial, never sent, transient; another status is not transient', () => {
    expect(classify(new errors.RequestAbortedError('Proxy response (502) !== 200 when HTTP Tunneling'))).toMatchObject({ kind: 'dial', notSent: true, transient: true, code: 'PROXY_502' });
    expect(classify(new errors.RequestAbortedError('Proxy response (504) !== 200 when HTTP Tunneling'))).toMatchObject({ kind: 'dial', transient: true, code: 'PROXY_504' });
    expect(classify(new errors.RequestAbortedError('Proxy response (407) !== 200 when HTTP Tunneling'))).toMatchObject({ kind: 'dial', notSent: true, transient: false, code: 'PROXY_407' });
    expect(classify(new errors.RequestAbortedError('Request aborted')).kind).toBe('cancelled'); // the caller's own abort stays so
    expect(classify(new errors.RequestAbortedError('Proxy response (502) !== 200 when HTTP Tunneling, says someone')).kind).toBe('cancelled');
  });

  for (const method of ['GET', 'POST'] as const) {
    it(`${method}: sent again after the 502 and served, the origin seeing it once (it failed at once)`, async () => {
      await using origin = await httpServer(answer(200, 'ok'));
      const p = await proxy(1, 502);
      const agent = recipe(p.uri);
      try {
        const dispatcher = agent.compose(guardedRetry({ timeout: 4_000, backoff: () => 20, budget: null }));
        const res = await request(`${origin.origin}/`, { method, body: method === 'POST' ? 'x' : undefined, dispatcher });
        expect(res.statusCode).toBe(200);
        await res.body.dump();
        expect(p.connects()).toBe(2);
        expect(origin.requests).toBe(1);
      } finally {
        await agent.close();
        await p.close();
      }
    });
  }

  it('407 (proxy authentication required): not sent again', async () => {
    await using origin = await httpServer(answer(200, 'ok'));
    const p = await proxy(5, 407);
    const agent = recipe(p.uri);
    try {
      const dispatcher = agent.compose(guardedRetry({ timeout: 4_000, backoff: () => 20, budget: null }));
      await expect(request(`${origin.origin}/`, { dispatcher })).rejects.toMatchObject({ code: 'UND_ERR_ABORTED' });
      expect(p.connects()).toBe(1);
      expect(origin.requests).toBe(0);
    } finally {
      await agent.close();
      await p.close();
    }
  });
});
