/**
 * GuardedAgent with real undici against fault peers and real node:http servers on loopback: what
 * a dead, silent or refusing origin costs, what the breaker hears (dials only), and recovery.
 * Every test counts dials at the peer.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { Agent, errors as undiciErrors, fetch as undiciFetch, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ConnectTimeoutError, DeadlineExceededError, HostUnavailableError, RetriesExhaustedError } from '../../../src/core/errors.js';
import { blackhole } from '../../../src/testing/blackhole.js';
import { acceptAndHold, refusing } from '../../../src/testing/tcp-peers.js';
import { retriesOf } from '../../../src/adapters/undici/index.js';
import { eventually } from '../../helpers/eventually.js';
import { answer, failure, guarded, httpServer, leakChecked, manualBreaker, unwrapFetch } from './helpers.js';

leakChecked();

describe('GuardedAgent: a dead origin costs one bounded dial, not one per request', () => {
  it('a blackholed origin: each attempt gives up at the connect timeout, then the breaker refuses without dialling', async () => {
    await using peer = await blackhole();
    const { breaker } = manualBreaker(3);
    const { agent } = guarded({ breaker, connectTimeout: 200 });
    const first = await failure(undiciFetch(`http://${peer.address}/`, { dispatcher: agent }));
    const cause = unwrapFetch(first.error);
    // The last attempt's own error, its story attached: undici's ConnectTimeoutError, as undici
    // alone fails, with dialguard's (host, timeout, phase) as its cause.
    expect(cause).toBeInstanceOf(undiciErrors.ConnectTimeoutError);
    expect((cause as Error).cause).toBeInstanceOf(ConnectTimeoutError);
    expect(retriesOf(cause)).toBeInstanceOf(RetriesExhaustedError);
    expect((retriesOf(cause) as RetriesExhaustedError).errors.map((e) => (e as { code?: string }).code)).toEqual(Array(3).fill('UND_ERR_CONNECT_TIMEOUT'));
    expect(first.ms).toBeGreaterThanOrEqual(3 * 195);
    expect(first.ms).toBeLessThan(3 * 200 + 2_000); // bounded, not an assertion of speed
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 1 });
    for (let i = 0; i < 20; i++) {
      const { error, ms } = await failure(undiciFetch(`http://${peer.address}/`, { dispatcher: agent }));
      expect(unwrapFetch(error)).toBeInstanceOf(HostUnavailableError);
      expect(ms).toBeLessThan(200); // refused, never a dial
    }
    expect(breaker.stats()).toMatchObject({ failed: 3, refused: 20 });
  });

  it('maxAttempts 6 with a backoff longer than the breaker\'s window: the call stops once its dials opened the host (3 dials), not a probe after every window (was: 6 dials; 23 s against raw undici\'s 9 s at the defaults, an outside review)', async () => {
    await using peer = await acceptAndHold();
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: 100 });
    const { agent } = guarded({ breaker, connectTimeout: 100, maxAttempts: 6, backoff: () => 300, tls: { rejectUnauthorized: false } });
    const { error, ms } = await failure(request(`https://${peer.address}/`, { dispatcher: agent }));
    expect(error).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT' }); // its last attempt's own error, as undici alone
    expect(peer.attempts).toBe(3);
    expect(breaker.stats()).toMatchObject({ failed: 3, opened: 1 });
    expect(ms).toBeLessThan(3 * 100 + 2 * 300 + 1_000); // bounded, not an assertion of speed
  });

  it('a refusal is HostUnavailableError: the error of request(), the cause of fetch(); no socket is opened', async () => {
    await using peer = await acceptAndHold();
    const { breaker } = manualBreaker(1);
    const { agent } = guarded({ breaker, connectTimeout: 100, tls: { rejectUnauthorized: false } });
    const url = `https://${peer.address}/`;
    await failure(request(url, { dispatcher: agent })); // the TLS handshake never completes: one dial, trips
    expect(peer.attempts).toBe(1);
    const viaRequest = await failure(request(url, { dispatcher: agent }));
    expect(viaRequest.error).toBeInstanceOf(HostUnavailableError);
    expect(viaRequest.error).toMatchObject({ code: 'DIALGUARD_HOST_UNAVAILABLE', host: peer.address, state: 'open' });
    const viaFetch = await failure(undiciFetch(url, { dispatcher: agent }));
    expect(viaFetch.error).toBeInstanceOf(TypeError);
    expect((viaFetch.error as TypeError).cause).toBeInstanceOf(HostUnavailableError);
    expect(peer.attempts).toBe(1);
  });

  it('accept-and-hold over TLS: the dial is bounded (phase tls), and concurrent requests share one dial', async () => {
    await using peer = await acceptAndHold();
    const { breaker } = manualBreaker(3);
    const { agent } = guarded({ breaker, connectTimeout: 150, maxAttempts: 1, tls: { rejectUnauthorized: false } });
    // 20 requests at once to an origin never reached: undici's pool would open 20 connections;
    // the first dial scouts and the others share its outcome.
    const results = await Promise.all(Array.from({ length: 20 }, () => failure(request(`https://${peer.address}/`, { dispatcher: agent }))));
    for (const { error } of results) {
      expect(error).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT' });
      expect((error as Error).cause).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tls' });
    }
    expect(peer.attempts).toBe(1);
    expect(breaker.stats()).toMatchObject({ failed: 1, opened: 0 });
  });

  it('accept-and-hold over HTTP (headers never come): bounded by the call timeout, not undici\'s 300 s', async () => {
    await using peer = await acceptAndHold();
    const { breaker } = manualBreaker(1);
    const { agent } = guarded({ breaker, timeout: 300 });
    const { error, ms } = await failure(undiciFetch(`http://${peer.address}/`, { dispatcher: agent }));
    expect(unwrapFetch(error)).toBeInstanceOf(DeadlineExceededError);
    expect(ms).toBeGreaterThanOrEqual(290);
    expect(ms).toBeLessThan(300 + 1_500);
    expect(peer.attempts).toBe(1);
    // The dial succeeded: a silent server is not a dead host.
    expect(breaker.state(peer.address)).toMatchObject({ state: 'closed', failures: 0 });
  });
});

describe('GuardedAgent: responses never reach the breaker', () => {
  it('a 500 is the response (not retried, not a failure): the breaker stays closed', async () => {
    await using server = await httpServer(answer(500, 'boom'));
    const { agent, breaker } = guarded({ breaker: manualBreaker(1).breaker });
    for (let i = 0; i < 5; i++) {
      const res = await undiciFetch(`${server.origin}/`, { dispatcher: agent });
      expect(res.status).toBe(500);
      expect(await res.text()).toBe('boom');
    }
    expect(server.requests).toBe(5);
    expect(server.connections).toBeLessThanOrEqual(2); // undici's pool keeps them alive (raw undici opens 2 here too)
    expect(breaker.state(server.address)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ succeeded: server.connections, failed: 0, opened: 0 });
  });

  it('a 403 proves the host alive: a threshold of 1 never opens on any number of them', async () => {
    await using server = await httpServer(answer(403, 'forbidden'));
    const { agent, breaker } = guarded({ breaker: manualBreaker(1).breaker });
    const statuses = await Promise.all(
      Array.from({ length: 30 }, async () => (await request(`${server.origin}/`, { dispatcher: agent, method: 'POST', body: 'x' })).statusCode),
    );
    expect(statuses).toEqual(Array(30).fill(403));
    expect(server.requests).toBe(30);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    expect(breaker.state(server.address)?.state).toBe('closed');
  });
});

describe('GuardedAgent: a scheme typo is the caller\'s', () => {
  it('https: to a plain HTTP port fails once, unretried (the same answer every time), and never counts against the host', async () => {
    await using server = await httpServer(answer());
    const { agent, breaker } = guarded({ breaker: manualBreaker(1).breaker });
    const err = await request(`https://${server.address}/`, { dispatcher: agent }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ERR_SSL_WRONG_VERSION_NUMBER' });
    expect(server.connections).toBe(1); // it was 3: each attempt handshook again and met the same plain answer
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
    const ok = await request(`${server.origin}/`, { dispatcher: agent }); // the right scheme is served
    expect(ok.statusCode).toBe(200);
    await ok.body.dump();
  });
});

describe('GuardedAgent: the caller cancelling is not a failure of anything', () => {
  it('five aborted requests on a slow healthy origin leave the breaker closed and are not retried', async () => {
    await using server = await httpServer(() => {}); // headers never come
    const { agent, breaker } = guarded({ breaker: manualBreaker(1).breaker });
    for (let i = 0; i < 5; i++) {
      const controller = new AbortController();
      const p = failure(undiciFetch(`${server.origin}/`, { dispatcher: agent, signal: controller.signal }));
      setTimeout(() => controller.abort(new Error('the user went away')), 30);
      const { error } = await p;
      expect(error).toMatchObject({ message: 'the user went away' });
    }
    expect(server.requests).toBe(5);
    expect(breaker.state(server.address)).toMatchObject({ state: 'closed', failures: 0 });
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0 });
  });

  it('an abort during the backoff wait ends the call at once, with the caller\'s reason', async () => {
    const peer = await refusing();
    const { agent, breaker } = guarded({ breaker: manualBreaker(10).breaker, backoff: () => 60_000 });
    const controller = new AbortController();
    const p = failure(request(`http://${peer.address}/`, { dispatcher: agent, signal: controller.signal }));
    setTimeout(() => controller.abort(new Error('enough')), 100);
    const { error, ms } = await p;
    expect(error).toMatchObject({ message: 'enough' });
    expect(ms).toBeLessThan(5_000);
    expect(breaker.stats()).toMatchObject({ failed: 1 }); // the one refused dial, nothing for the abort
  });
});

describe('GuardedAgent: the host comes back', () => {
  it('refused while open; after the window exactly one probe dials, and traffic resumes', async () => {
    const dead = await refusing();
    const { clock, breaker } = manualBreaker(1, 5_000);
    const { agent } = guarded({ breaker, maxAttempts: 1 });
    const url = `http://${dead.address}/`;
    expect(unwrapFetch((await failure(undiciFetch(url, { dispatcher: agent }))).error)).toMatchObject({ code: 'ECONNREFUSED' });
    expect(breaker.state(dead.address)?.state).toBe('open');
    // The host returns on the same port, while its window is still open.
    await using server = await httpServer(answer(200, 'back'), { port: dead.port });
    expect(unwrapFetch((await failure(undiciFetch(url, { dispatcher: agent }))).error)).toBeInstanceOf(HostUnavailableError);
    expect(server.connections).toBe(0);
    clock.advance(5_000);
    const res = await undiciFetch(url, { dispatcher: agent });
    expect(await res.text()).toBe('back');
    expect(server.connections).toBe(1);
    expect(breaker.state(dead.address)?.state).toBe('closed');
    expect(breaker.stats()).toMatchObject({ opened: 1, closed: 1, probesGranted: 1 });
    const again = await Promise.all(Array.from({ length: 5 }, async () => (await undiciFetch(url, { dispatcher: agent })).status));
    expect(again).toEqual(Array(5).fill(200));
  });

  it('raw undici, for contrast: every request to a refused origin dials again', async () => {
    const peer = await refusing();
    const raw = new Agent({ connectTimeout: 1_000 });
    try {
      for (let i = 0; i < 3; i++) {
        expect(unwrapFetch((await failure(undiciFetch(`http://${peer.address}/`, { dispatcher: raw }))).error)).toMatchObject({ code: 'ECONNREFUSED' });
      }
    } finally {
      await raw.destroy();
    }
  });
});

describe('GuardedAgent: the breaker gates dials, not connections that work', () => {
  it('with the breaker open for an origin, a live pooled connection still serves; a new dial is refused', async () => {
    await using server = await httpServer(answer(200, 'alive'));
    const { breaker } = manualBreaker(3);
    const { agent: warm } = guarded({ breaker });
    expect(await (await request(`${server.origin}/`, { dispatcher: warm })).body.text()).toBe('alive');
    // undici hands the connection back to its pool a moment after the body ends.
    expect(await eventually(() => (warm.stats[server.origin] as { free?: number } | undefined)?.free, (n) => n === 1)).toBe(1);
    // Another client in the process failed three dials to this host: the shared breaker opens.
    for (let i = 0; i < 3; i++) breaker.admit(server.address).failed();
    expect(breaker.state(server.address)?.state).toBe('open');
    expect(await (await request(`${server.origin}/`, { dispatcher: warm })).body.text()).toBe('alive');
    expect(server.connections).toBe(1);
    const { agent: cold } = guarded({ breaker, maxAttempts: 1 });
    expect((await failure(request(`${server.origin}/`, { dispatcher: cold }))).error).toBeInstanceOf(HostUnavailableError);
    expect(server.connections).toBe(1);
  });

  it('once an origin failed to dial, its refused requests never enter undici', async () => {
    const peer = await refusing();
    const { agent } = guarded({ breaker: manualBreaker(1).breaker, maxAttempts: 1 });
    const url = `http://${peer.address}/`;
    await failure(request(url, { dispatcher: agent }));
    let created = 0;
    const onCreate = (): void => {
      created++;
    };
    diagnosticsChannel.subscribe('undici:request:create', onCreate);
    try {
      for (let i = 0; i < 10; i++) expect((await failure(request(url, { dispatcher: agent }))).error).toBeInstanceOf(HostUnavailableError);
    } finally {
      diagnosticsChannel.unsubscribe('undici:request:create', onCreate);
    }
    expect(created).toBe(0);
  });
});

describe('GuardedAgent: a healthy cold start is quiet', () => {
  it('64 concurrent requests at start open 64 connections and print no MaxListenersExceededWarning', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded();
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const bodies = await Promise.all(Array.from({ length: 64 }, async () => (await request(`${server.origin}/`, { dispatcher: agent })).body.text()));
      expect(bodies).toEqual(Array(64).fill('ok'));
      await new Promise<void>((resolve) => setImmediate(resolve)); // warnings are emitted on a later tick
    } finally {
      process.off('warning', onWarning);
    }
    expect(server.connections).toBe(64); // every dial was in flight at once, each listening for close()
    expect(warnings.map((w) => w.name)).toEqual([]);
  });
});
