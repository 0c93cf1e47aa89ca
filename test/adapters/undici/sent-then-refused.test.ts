/**
 * A request GuardedAgent sent once never ends as "not sent" (r142, as r138 was for gRPC). An
 * idempotent PUT reached the server, which ran it and then dropped the connection (a crash under
 * the request); GuardedAgent retried, the port now refused, and the call ended with the last
 * attempt's own ECONNREFUSED, which classify read as a dial, not sent: a layer above that is not
 * idempotent (a `retry({ idempotent: false })`, a ServerSet) sent it again, and the handler ran
 * twice. The error the caller gets keeps its class, code and message (code written for undici
 * still reads ECONNREFUSED) but says the request may have been sent; through fetch too. A call
 * none of whose attempts was sent still says "not sent" (a ServerSet moves on). Real sockets on
 * 127.0.0.1; the handler runs are counted.
 */
import http from 'node:http';
import type net from 'node:net';
import { fetch, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { classify } from '../../../src/core/classify.js';
import { retry } from '../../../src/retry/retry.js';
import { guarded, leakChecked, unwrapFetch } from './helpers.js';

leakChecked();

/**
 * A server that runs each request's handler (counted), then dies: the connection reset, the port
 * closed. `revive()` starts it again on its port, serving (and counting) every request.
 */
async function crashingServer(): Promise<{ origin: string; runs: () => number; closed: Promise<void>; revive(): Promise<void>; stop(): Promise<void> }> {
  let runs = 0;
  let revived: http.Server | undefined;
  const sockets = new Set<net.Socket>();
  let done!: () => void;
  const closed = new Promise<void>((resolve) => (done = resolve));
  const server = http.createServer((req) => {
    req.resume();
    req.on('end', () => {
      runs++;
      server.close(() => done());
      for (const s of sockets) s.resetAndDestroy();
    });
  });
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    runs: () => runs,
    closed,
    async revive() {
      await closed;
      revived = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          runs++;
          res.end('ok');
        });
      });
      await new Promise<void>((resolve) => revived!.listen(port, '127.0.0.1', () => resolve()));
    },
    async stop() {
      const r = revived;
      if (r === undefined) return;
      r.closeAllConnections();
      await new Promise<void>((resolve) => r.close(() => resolve()));
    },
  };
}

/** A port nothing listens on. */
async function refusedOrigin(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

describe('GuardedAgent: a request sent once never ends as "not sent"', () => {
  it('PUT run, connection reset, retries refused: ECONNREFUSED as undici says it, but not "not sent" (was: a dial, not sent)', async () => {
    const server = await crashingServer();
    const { agent } = guarded({ maxAttempts: 3 });
    const err = await request(`${server.origin}/x`, { method: 'PUT', body: 'once', dispatcher: agent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    await server.closed;
    expect(server.runs()).toBe(1);
    expect(err).toBeInstanceOf(Error);
    expect((err as { code?: unknown }).code).toBe('ECONNREFUSED'); // what undici code reads, unchanged
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: false });
  });

  it('through fetch (a GET: fetch hands its body as a stream, sent once): the TypeError wrapping it is not "not sent" either', async () => {
    const server = await crashingServer();
    const { agent } = guarded({ maxAttempts: 3 });
    const err = await fetch(`${server.origin}/x`, { dispatcher: agent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    await server.closed;
    expect(server.runs()).toBe(1);
    expect((unwrapFetch(err) as { code?: unknown }).code).toBe('ECONNREFUSED');
    expect(classify(err).notSent).toBe(false);
  });

  it('wrapped in retry({ idempotent: false }) while the server comes back: the handler runs once (was: twice)', async () => {
    const server = await crashingServer();
    const { agent } = guarded({ maxAttempts: 3 });
    const outer = retry(async (a) => {
      if (a.number > 1) await server.revive(); // the deploy's new process: a resend would run
      return request(`${server.origin}/x`, { method: 'PUT', body: 'once', dispatcher: agent });
    }, {
      idempotent: false,
      maxAttempts: 3,
      budget: null,
      backoff: () => 0,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const ended = await outer;
    await server.stop();
    expect(ended).toBeInstanceOf(Error);
    expect(server.runs()).toBe(1);
  });

  it('refused on every attempt: still a dial, not sent', async () => {
    const origin = await refusedOrigin();
    const { agent } = guarded({ maxAttempts: 3 });
    const err = await request(`${origin}/x`, { method: 'PUT', body: 'once', dispatcher: agent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as { code?: unknown }).code).toBe('ECONNREFUSED');
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true });
  });
});
