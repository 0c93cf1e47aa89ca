/**
 * A request Http2Client sent once never ends as "not sent" (r142; as r138 was for gRPC). On a
 * session that had served, an idempotent PUT reached the server, which ran it and died (every
 * session destroyed, the port closed); the pool resent it, the redial was refused, Http2Client
 * redialled as for any idempotent request, and the call ended with the last dial's own
 * ECONNREFUSED, which classify read as a dial, not sent: a layer above that is not idempotent (a
 * `retry({ idempotent: false })`, a ServerSet) sent it again and the handler ran twice. The error
 * keeps its class and code (ECONNREFUSED, as raw node:http2 says); ConnectionPool.use() tells its
 * resends' failures likewise. A call none of whose sends left still says "not sent". Real h2c on
 * 127.0.0.1; handler runs counted.
 */
import http2 from 'node:http2';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { retry } from '../../src/retry/retry.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/** An h2c server: `/warm` answers; any other path runs (counted), then the server dies. `revive()` serves again on its port. */
async function dyingServer(): Promise<{ origin: string; runs: () => number; revive(): Promise<void> }> {
  let runs = 0;
  const sessions = new Set<http2.ServerHttp2Session>();
  const start = (port: number, dies: boolean): Promise<http2.Http2Server> => {
    const server = http2.createServer();
    server.on('session', (s) => {
      sessions.add(s);
      s.on('error', () => {});
      s.once('close', () => sessions.delete(s));
    });
    server.on('stream', (stream, headers) => {
      stream.on('error', () => {});
      stream.resume();
      stream.on('end', () => {
        if (headers[':path'] === '/warm') {
          stream.respond({ ':status': 200 });
          stream.end('ok');
          return;
        }
        runs++;
        if (!dies) {
          stream.respond({ ':status': 200 });
          stream.end('ran');
          return;
        }
        server.close();
        for (const s of sessions) s.destroy();
      });
    });
    cleanup.push(
      () =>
        new Promise<void>((resolve) => {
          for (const s of sessions) s.destroy();
          server.close(() => resolve());
          if (!server.listening) resolve();
        }),
    );
    return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
  };
  const first = await start(0, true);
  const port = (first.address() as net.AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    runs: () => runs,
    async revive() {
      if (first.listening) await new Promise<void>((resolve) => first.close(() => resolve()));
      await start(port, false);
    },
  };
}

function client(): Http2Client {
  const c = new Http2Client({ breaker: new HostBreaker({ failureThreshold: 100 }), retry: { maxAttempts: 3, backoff: () => 0, budget: null } });
  cleanup.push(() => c.close());
  return c;
}

describe('Http2Client: a request sent once never ends as "not sent"', () => {
  it('PUT run on a warm session, the server gone, redials refused: ECONNREFUSED, but not "not sent" (was: a dial, not sent)', async () => {
    const server = await dyingServer();
    const c = client();
    expect((await c.request(`${server.origin}/warm`)).status).toBe(200);
    const err = await c.request(`${server.origin}/x`, { method: 'PUT', body: 'once' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(server.runs()).toBe(1);
    expect((err as { code?: unknown }).code).toBe('ECONNREFUSED');
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: false });
  });

  it('wrapped in retry({ idempotent: false }) while the server comes back: the handler runs once (was: twice)', async () => {
    const server = await dyingServer();
    const c = client();
    expect((await c.request(`${server.origin}/warm`)).status).toBe(200);
    const ended = await retry(
      async (a) => {
        if (a.number > 1) await server.revive();
        return c.request(`${server.origin}/x`, { method: 'PUT', body: 'once' });
      },
      { idempotent: false, maxAttempts: 3, budget: null, backoff: () => 0 },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(ended).toBeInstanceOf(Error);
    expect(server.runs()).toBe(1);
  });

  it('cold, refused from the start: still a dial, not sent', async () => {
    const probe = http2.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const err = await client()
      .request(`http://127.0.0.1:${port}/x`, { method: 'PUT', body: 'once' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((err as { code?: unknown }).code).toBe('ECONNREFUSED');
    expect(classify(err)).toMatchObject({ kind: 'dial', notSent: true });
  });
});
