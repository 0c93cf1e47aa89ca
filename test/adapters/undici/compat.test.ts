/**
 * Where the guarded dispatcher plugs in: undici's fetch and request, Node's own global fetch,
 * setGlobalDispatcher, the connector and the interceptor on their own; TLS, IPv6, keep-alive;
 * and the option checks.
 */
import https from 'node:https';
import type net from 'node:net';
import { Agent, Client, Pool, getGlobalDispatcher, request, setGlobalDispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent, guardedConnector, guardedRetry } from '../../../src/adapters/undici/index.js';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { answer, failure, guarded, httpServer, leakChecked, manualBreaker, unwrapFetch } from './helpers.js';

leakChecked();

/**
 * Node's global fetch types `dispatcher` with undici-types (its bundled undici 6), which TypeScript
 * does not unify with undici 7's Dispatcher; at run time it takes a GuardedAgent as it is.
 */
function nodeInit(dispatcher: GuardedAgent): RequestInit {
  return { dispatcher: dispatcher as unknown as RequestInit['dispatcher'] };
}

/** Trips `breaker` on a refused port and returns its URL: every later request is refused. */
async function refusedOrigin(agent: GuardedAgent): Promise<string> {
  const peer = await refusing();
  const url = `http://${peer.address}/`;
  await failure(request(url, { dispatcher: agent }));
  return url;
}

describe("Node's own fetch", () => {
  it('takes a GuardedAgent as its dispatcher: responses, and a refusal as the cause of "fetch failed"', async () => {
    await using server = await httpServer(answer(200, 'hello'));
    const { agent } = guarded({ breaker: manualBreaker(1).breaker, maxAttempts: 1 });
    const res = await fetch(`${server.origin}/`, nodeInit(agent));
    expect(await res.text()).toBe('hello');
    const url = await refusedOrigin(agent);
    const { error } = await failure(fetch(url, nodeInit(agent)));
    expect(error).toBeInstanceOf(TypeError);
    expect(unwrapFetch(error)).toBeInstanceOf(HostUnavailableError);
  });

  it('setGlobalDispatcher puts every fetch in the process behind the guard', async () => {
    await using server = await httpServer(answer(200, 'global'));
    const { agent } = guarded({ breaker: manualBreaker(1).breaker, maxAttempts: 1 });
    const url = await refusedOrigin(agent);
    const previous = getGlobalDispatcher();
    setGlobalDispatcher(agent);
    try {
      expect(await (await fetch(`${server.origin}/`)).text()).toBe('global');
      expect(unwrapFetch((await failure(fetch(url))).error)).toBeInstanceOf(HostUnavailableError);
      expect((await failure(request(url))).error).toBeInstanceOf(HostUnavailableError);
    } finally {
      setGlobalDispatcher(previous);
    }
  });
});

describe('the parts on their own', () => {
  it('guardedConnector in a plain Pool and Client: bounded, guarded dials', async () => {
    await using server = await httpServer(answer(200, 'pooled'));
    const { breaker } = manualBreaker(1);
    const pool = new Pool(server.origin, { connect: guardedConnector({ breaker }) });
    const client = new Client(server.origin, { connect: guardedConnector({ breaker }) });
    try {
      expect(await (await pool.request({ path: '/', method: 'GET' })).body.text()).toBe('pooled');
      expect(await (await client.request({ path: '/', method: 'GET' })).body.text()).toBe('pooled');
      expect(breaker.stats()).toMatchObject({ succeeded: 2, failed: 0 });
    } finally {
      await Promise.all([pool.destroy(), client.destroy()]);
    }
  });

  it('guardedRetry composed onto a plain Agent retries a refused POST', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    let refusedOnce = false;
    const agent = new Agent({
      connect: (opts, callback) => {
        if (!refusedOnce) {
          refusedOnce = true;
          callback(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' }), null);
          return;
        }
        guardedConnector({ breaker: null })(opts, callback);
      },
    }).compose(guardedRetry({ backoff: () => 0, budget: null, breaker: null }));
    try {
      const res = await request(`${server.origin}/`, { dispatcher: agent, method: 'POST', body: 'x' });
      expect(await res.body.text()).toBe('ok');
      expect(server.bodies).toEqual(['x']);
    } finally {
      await agent.destroy();
    }
  });
});

describe('connections', () => {
  it("undici's pool and keep-alive stay in charge: 20 sequential requests open what raw undici opens", async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const raw = new Agent();
    try {
      for (let i = 0; i < 20; i++) await (await request(`${server.origin}/`, { dispatcher: raw })).body.dump();
    } finally {
      await raw.destroy();
    }
    const rawConnections = server.connections;
    expect(rawConnections).toBeLessThanOrEqual(2);
    const { agent, breaker } = guarded();
    for (let i = 0; i < 20; i++) await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump();
    expect(server.connections - rawConnections).toBe(rawConnections);
    expect(breaker.stats()).toMatchObject({ succeeded: rawConnections, failed: 0 });
  });

  it('IPv6 loopback: served, and filed under [::1]:port', async () => {
    await using server = await httpServer(answer(200, 'v6'), { host: '::1' });
    const { agent, breaker } = guarded();
    expect(await (await request(`${server.origin}/`, { dispatcher: agent })).body.text()).toBe('v6');
    expect(breaker.state(`[::1]:${server.port}`)?.state).toBe('closed');
  });

  it('TLS: the handshake runs inside the guarded dial, verified against the given CA', async () => {
    const server = https.createServer({ cert: TEST_CERT, key: TEST_KEY }, answer(200, 'secure'));
    const sockets = new Set<net.Socket>();
    server.on('connection', (s: net.Socket) => {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const { agent, breaker } = guarded({ tls: { ca: TEST_CERT } });
      expect(await (await request(`https://127.0.0.1:${port}/`, { dispatcher: agent })).body.text()).toBe('secure');
      expect(breaker.stats()).toMatchObject({ succeeded: 1 });
      // Without the CA the handshake fails: the caller gets the TLS error, not retried (a certificate will not change).
      const { agent: untrusting, breaker: b2 } = guarded();
      const { error } = await failure(request(`https://127.0.0.1:${port}/`, { dispatcher: untrusting }));
      expect(error).toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
      expect(b2.stats()).toMatchObject({ failed: 0, succeeded: 1 }); // it presented a certificate: the host is alive (rule 1)
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('options are checked at construction, naming the option and the value', () => {
  it.each([
    [{ timeout: -1 }, /timeout must be >= 1, got -1/],
    [{ maxAttempts: 0 }, /maxAttempts must be between 1 and \d+, got 0/],
    [{ maxAttempts: 1.5 }, /maxAttempts must be an integer, got 1.5/],
    [{ connectTimeout: -1 }, /connectTimeout must be >= 0, got -1/],
    [{ retryStatuses: [503, 99] }, /retryStatuses\[1\] must be between 400 and 599, got 99/],
    // A success or a redirect is an answer to hand over: retried, a 200 was sent maxAttempts times (an outside review).
    [{ retryStatuses: [200] }, /retryStatuses\[0\] must be between 400 and 599, got 200/],
    [{ retryStatuses: [429, 304] }, /retryStatuses\[1\] must be between 400 and 599, got 304/],
    [{ maxRetryAfter: Number.NaN }, /maxRetryAfter must be >= 0, got NaN/],
    [{ headersTimeout: '5s' }, /headersTimeout must be a number, got "5s"/],
    [{ budget: {} }, /budget must be a RetryBudget or null, got an object/],
    [{ breaker: 'shared' }, /breaker must be a HostBreaker or null, got "shared"/],
    [{ backoff: 100 }, /backoff must be a function, got 100/],
    [{ tls: { socket: 1 } }, /tls.socket is not supported/],
    [{ undici: { connect: { path: '/x' } } }, /undici.connect.path is not supported by the guarded connector/],
    [{ undici: { connect: 1 } }, /undici.connect must be an object or a function, got 1/],
    [{ undici: { connectTimeout: -1 } }, /connectTimeout must be >= 0, got -1/],
    [{ socket: { host: 'x' } }, /socket.host is not supported/],
    [{ undici: { headersTimeout: 10 } }, /undici.headersTimeout is dialguard's: use the headersTimeout option/],
  ])('%o', (options, message) => {
    expect(() => new GuardedAgent(options as never)).toThrow(message);
  });
});
