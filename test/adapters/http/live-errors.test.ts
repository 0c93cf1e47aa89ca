/**
 * What a guarded node:https agent's sockets tell `classify` once they are up: an SSL error that
 * ends a live connection (ERR_SSL_BAD_RECORD_TYPE, a code a handshake fails with too) is a
 * connection's, the request maybe sent, so `retry()` does not send a POST again; the same alert
 * in answer to the ClientHello is still a dial's, never sent, retried for any method. A raw
 * `https.Agent` beside it shows why: its socket's error reads as a dial's.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import axios from 'axios';
import got from 'got';
import { describe, expect, it } from 'vitest';
import { GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { classify } from '../../../src/core/classify.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { retry } from '../../../src/retry/retry.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { type AlertProxy, alertProxy } from '../../helpers/tls-alert-proxy.js';
import { leakChecked } from './helpers.js';

const cleanups = leakChecked();

/** An https server behind an alert proxy that breaks the live connection under the first POST. */
async function scene(refuse: (i: number) => boolean, breakFirstPost = true): Promise<{ posts: () => number; proxy: AlertProxy }> {
  let posts = 0;
  let proxy: AlertProxy | undefined;
  const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY }, (req, res) => {
    req.resume();
    if (req.method === 'POST' && posts++ === 0 && breakFirstPost) proxy!.inject();
    else res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy = await alertProxy((server.address() as AddressInfo).port, refuse);
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  cleanups.push(() => server.closeAllConnections());
  cleanups.push(() => proxy.close());
  return { posts: () => posts, proxy };
}

function post(agent: https.Agent, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: 'localhost', port, method: 'POST', path: '/', agent, ca: TEST_CERT }, (res) => {
      res.resume();
      res.on('end', () => resolve('ok'));
    });
    req.on('error', reject);
    req.end('x');
  });
}

describe('node:https agent: errors of a live connection', () => {
  it('a record error under a POST: a live connection failed (maybe sent), so retry() does not send it again; through raw Node it reads as a dial, and is sent twice', async () => {
    for (const guardedAgent of [true, false]) {
      const { posts, proxy } = await scene(() => false);
      const agent = guardedAgent ? new GuardedHttpsAgent({ breaker: new HostBreaker() }) : new https.Agent();
      cleanups.push(() => agent.destroy());
      const err = await retry(() => post(agent, proxy.port), { maxAttempts: 3, backoff: () => 0 }).catch((e: unknown) => e);
      if (!guardedAgent) {
        expect(err).toBe('ok');
        expect(posts()).toBe(2); // the hazard the guard's sockets remove
        continue;
      }
      expect(err).toMatchObject({ code: 'ERR_SSL_BAD_RECORD_TYPE' });
      expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false, connectionDead: true });
      expect(posts()).toBe(1);
    }
  });

  it('the alert in answer to the ClientHello is a dial that may pass: retry() dials again and the POST is served once', async () => {
    const { posts, proxy } = await scene((i) => i === 0, false);
    const agent = new GuardedHttpsAgent({ breaker: new HostBreaker() });
    cleanups.push(() => agent.destroy());
    const failures: unknown[] = [];
    const ok = await retry(() => post(agent, proxy.port).catch((e: unknown) => Promise.reject((failures.push(e), e))), { maxAttempts: 3, backoff: () => 0 });
    expect(ok).toBe('ok');
    expect(failures.map((e) => classify(e))).toMatchObject([{ kind: 'dial', notSent: true, code: 'ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR' }]);
    expect(posts()).toBe(1);
    expect(proxy.accepted).toBe(2);
  });

  // axios and got wrap the socket's error in one of their own and copy its code onto it: read
  // alone, that code made the wrapper a dial's, and retry() sent the POST twice through the
  // guarded agent (an outside review).
  it.each([
    ['axios', (agent: https.Agent, port: number): Promise<unknown> => axios.post(`https://localhost:${port}/`, 'x', { httpsAgent: agent })],
    ['got', (agent: https.Agent, port: number): Promise<unknown> => got.post(`https://localhost:${port}/`, { body: 'x', agent: { https: agent }, retry: { limit: 0 } })],
  ])('the same under %s, whose error wraps the socket\'s and copies its code: maybe sent, the POST served once', async (_client, send) => {
    const { posts, proxy } = await scene(() => false);
    const agent = new GuardedHttpsAgent({ breaker: new HostBreaker(), ca: TEST_CERT });
    cleanups.push(() => agent.destroy());
    const err = await retry(() => send(agent, proxy.port), { maxAttempts: 3, backoff: () => 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_SSL_BAD_RECORD_TYPE' });
    expect(classify(err)).toMatchObject({ kind: 'connection', notSent: false });
    expect(posts()).toBe(1);
  });
});
