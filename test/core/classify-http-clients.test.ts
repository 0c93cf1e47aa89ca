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
});
