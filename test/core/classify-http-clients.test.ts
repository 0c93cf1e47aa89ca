/**
 * classify() against the errors axios, got and node:http really produce (captured live on
 * loopback), for the shapes a retry layer must read right: a body cut after a 200 (axios said
 * HTTP_200, an answer, so an idempotent GET was not retried), each client's own timeout (axios's
 * ECONNABORTED read as a dead connection; node:http's AbortError around an AbortSignal.timeout
 * read as the caller's cancellation, not retried), axios's cancellation (unknown) and got's
 * HTTPError (unknown, its status on its response).
 */
import http from 'node:http';
import type net from 'node:net';
import axios from 'axios';
import got from 'got';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { retry } from '../../src/retry/retry.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/** A node:http server on loopback; its URL. */
async function server(handler: http.RequestListener): Promise<string> {
  const sockets = new Set<net.Socket>();
  const srv = http.createServer(handler);
  srv.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        srv.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/`;
}

/** Sends a 200 with a longer content-length than it writes, then closes the socket. */
const cutAfter200: http.RequestListener = (_req, res) => {
  res.writeHead(200, { 'content-length': '1000' });
  res.write('partial');
  setTimeout(() => res.socket?.destroy(), 20);
};
/** Never answers (the socket is closed by the test's clean-up). */
const silent: http.RequestListener = () => {};

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('the request succeeded');
}

function agent(): http.Agent {
  const a = new http.Agent({ keepAlive: false });
  cleanup.push(() => a.destroy());
  return a;
}

describe('classify: real axios, got and node:http failures', () => {
  it('axios: a body cut after a 200 is the connection (maybe sent), not an answer', async () => {
    const url = await server(cutAfter200);
    const err = await failure(axios.get(url, { httpAgent: agent(), responseType: 'text' }));
    expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false, transient: true });
  });

  it("axios: its own timeout is a timeout, the connection not dead", async () => {
    const url = await server(silent);
    const err = await failure(axios.get(url, { httpAgent: agent(), timeout: 100 }));
    expect(classify(err)).toMatchObject({ kind: 'timeout', notSent: false, connectionDead: false, transient: true, code: 'ECONNABORTED' });
  });

  it('axios: a cancellation by a signal is cancelled', async () => {
    const url = await server(silent);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const err = await failure(axios.get(url, { httpAgent: agent(), signal: controller.signal }));
    expect(classify(err)).toMatchObject({ kind: 'cancelled', code: 'ERR_CANCELED' });
  });

  it("axios: a cancellation by an AbortSignal.timeout signal is a timeout (axios drops the reason; its config's signal keeps it; was: cancelled, never retried; an outside review)", async () => {
    const url = await server(silent);
    const err = await failure(axios.get(url, { httpAgent: agent(), signal: AbortSignal.timeout(100) }));
    expect(err).toMatchObject({ code: 'ERR_CANCELED' });
    expect(classify(err)).toMatchObject({ kind: 'timeout', code: 'TIMEOUT_ERR', notSent: false, connectionDead: false, transient: true });
    // Combined with the caller's own signal, as retry()'s attempts do: whichever fired decides.
    const caller = new AbortController();
    const timedOut = await failure(axios.get(url, { httpAgent: agent(), signal: AbortSignal.any([caller.signal, AbortSignal.timeout(100)]) }));
    expect(classify(timedOut)).toMatchObject({ kind: 'timeout' });
    setTimeout(() => caller.abort(), 50);
    const cancelled = await failure(axios.get(url, { httpAgent: agent(), signal: AbortSignal.any([caller.signal, AbortSignal.timeout(5_000)]) }));
    expect(classify(cancelled)).toMatchObject({ kind: 'cancelled', code: 'ERR_CANCELED' });
  });

  it("got: an HTTPError's status is read from its response", async () => {
    const url = await server((_req, res) => {
      res.statusCode = 503;
      res.end('busy');
    });
    const err = await failure(got(url, { retry: { limit: 0 }, agent: { http: agent() } }));
    expect(classify(err)).toMatchObject({ kind: 'application', code: 'HTTP_503', transient: false });
  });

  it("node:http: an AbortSignal.timeout signal's abort is a timeout (the reason Node wraps in an AbortError)", async () => {
    const url = await server(silent);
    const err = await failure(
      new Promise((resolve, reject) => {
        const req = http.get(url, { agent: agent(), signal: AbortSignal.timeout(100) }, resolve);
        req.on('error', reject);
      }),
    );
    expect(classify(err)).toMatchObject({ kind: 'timeout', connectionDead: false, transient: true });
  });

  describe("a 5xx whose body relays its upstream's EOF (seed 004), read from axios's and got's errors", () => {
    /** 500 `rpc error: EOF` to the first request, 200 after; counts what it served. */
    function relayOnce(): { handler: http.RequestListener; requests: () => number } {
      let n = 0;
      return {
        requests: () => n,
        handler: (_req, res) => {
          if (++n === 1) {
            res.writeHead(500, { 'content-type': 'text/plain' });
            res.end('rpc error: EOF');
          } else res.end('ok');
        },
      };
    }

    it('axios and got: maybe sent, connection alive, transient (was: HTTP_500, not transient: their messages carry only the status)', async () => {
      for (const client of ['axios', 'got'] as const) {
        const relay = relayOnce();
        const url = await server(relay.handler);
        const err = await failure(client === 'axios' ? axios.get(url, { httpAgent: agent() }) : got(url, { retry: { limit: 0 }, agent: { http: agent() } }));
        expect({ client, ...classify(err) }).toMatchObject({ client, kind: 'connection', code: 'EOF', notSent: false, connectionDead: false, transient: true });
      }
    });

    it('retry() around an idempotent axios GET: sent twice, served', async () => {
      const relay = relayOnce();
      const url = await server(relay.handler);
      const res = await retry(() => axios.get(url, { httpAgent: agent() }), { idempotent: true, budget: null, backoff: () => 0 });
      expect(res.data).toBe('ok');
      expect(relay.requests()).toBe(2);
    });

    it('the body is read for a 5xx only: a 400 saying it stays the server\'s answer; a 500 JSON body saying it, parsed by axios, is the EOF (was: the server\'s answer, never retried; an outside review)', async () => {
      const bad = await server((_req, res) => {
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end('rpc error: EOF');
      });
      expect(classify(await failure(axios.get(bad, { httpAgent: agent() })))).toMatchObject({ kind: 'application', code: 'HTTP_400', transient: false });
      const json = await server((_req, res) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'rpc error: EOF' }));
      });
      expect(classify(await failure(axios.get(json, { httpAgent: agent() })))).toMatchObject({ kind: 'connection', code: 'EOF', transient: true, connectionDead: false });
    });
  });
});
