/**
 * A 429/502/503/504 whose short body arrives slowly, or never ends (found by an outside review):
 * the agent held the response back until its body ended, so a body trickling for 3 s reached the
 * caller after ~8 s and three sends (raw undici: the 503 at 9-17 ms), and a body that never ends
 * never reached it at all (the call ended only by the caller's signal, with the abort's error in
 * place of the server's answer). A response is now held for at most a short window
 * (`HOLD_WINDOW_MS`) on top of its 64 KiB: a body still arriving then goes to the caller as it
 * comes, and is not sent again. A caller that aborts while such a body is still arriving gets the
 * response with its body failing with the abort's reason, as raw undici gives it.
 */
import type http from 'node:http';
import { Agent, fetch, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { HOLD_WINDOW_MS } from '../../../src/adapters/undici/attempt.js';
import { ManualClock } from '../../../src/testing/manual-clock.js';
import { httpServer, leakChecked } from './helpers.js';

leakChecked();

/** A 503 with `Retry-After: 1` and the body `busy`, then a dot every 50 ms: `dots` of them, or for ever. */
function trickle(dots: number | 'never'): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  return (req, res) => {
    req.resume();
    res.writeHead(503, { 'retry-after': '1' });
    res.write('busy');
    let n = 0;
    const every = setInterval(() => {
      res.write('.');
      if (dots !== 'never' && ++n === dots) {
        clearInterval(every);
        res.end();
      }
    }, 50);
    res.on('close', () => clearInterval(every));
  };
}

/** A 503 `busy` to the first request; to every later one a 200 whose body sends `part` and never ends. */
function busyThenStreaming(req: http.IncomingMessage, res: http.ServerResponse, n: number): void {
  req.resume();
  if (n === 1) {
    res.writeHead(503);
    res.end('busy');
    return;
  }
  res.writeHead(200);
  res.write('part');
}

describe('GuardedAgent: a retryable status whose body is slow', () => {
  it('a body that takes 1.5 s: the 503 goes to the caller within the hold window (not after its body and two more sends), its body whole, sent once', async () => {
    expect(HOLD_WINDOW_MS).toBeLessThanOrEqual(500);
    await using server = await httpServer(trickle(30));
    const agent = new GuardedAgent({ breaker: null, budget: null });
    try {
      const t0 = performance.now();
      const r = await request(`${server.origin}/`, { dispatcher: agent, signal: AbortSignal.timeout(10_000) });
      const headersAt = performance.now() - t0;
      expect(r.statusCode).toBe(503);
      expect(headersAt).toBeLessThan(1_000); // the body ends at ~1 500 ms
      expect(await r.body.text()).toBe(`busy${'.'.repeat(30)}`);
      expect(server.requests).toBe(1);
    } finally {
      await agent.close();
    }
  });

  it('a body that never ends: request() gets the 503 within the hold window (was: never, until its signal), sent once', async () => {
    await using server = await httpServer(trickle('never'));
    const agent = new GuardedAgent({ breaker: null, budget: null });
    try {
      const t0 = performance.now();
      const r = await request(`${server.origin}/`, { dispatcher: agent, signal: AbortSignal.timeout(3_000) });
      expect(r.statusCode).toBe(503);
      expect(performance.now() - t0).toBeLessThan(1_000);
      r.body.on('error', () => {});
      r.body.destroy();
      expect(server.requests).toBe(1);
    } finally {
      await agent.destroy();
    }
  });

  it('a body that never ends: fetch() gets its Response within the hold window, as raw undici does at once', async () => {
    await using server = await httpServer(trickle('never'));
    const raw = new Agent();
    const agent = new GuardedAgent({ breaker: null, budget: null });
    try {
      for (const dispatcher of [raw, agent]) {
        const t0 = performance.now();
        const r = await fetch(`${server.origin}/`, { dispatcher, signal: AbortSignal.timeout(3_000) });
        expect(r.status).toBe(503);
        expect(performance.now() - t0).toBeLessThan(1_000);
        await r.body?.cancel();
      }
      expect(server.requests).toBe(2); // one each
    } finally {
      await Promise.all([raw.destroy(), agent.destroy()]);
    }
  });

  it('the caller aborts while the body is still arriving (the window not over: a manual clock): the 503 with its body failing with the abort, as raw undici gives it (was: the abort error alone)', async () => {
    await using server = await httpServer(trickle('never'));
    const raw = new Agent();
    const agent = new GuardedAgent({ breaker: null, budget: null, clock: new ManualClock() });
    try {
      for (const dispatcher of [raw, agent]) {
        const ac = new AbortController();
        const call = request(`${server.origin}/`, { dispatcher, signal: ac.signal }).then(
          async (r) => ({ status: r.statusCode, body: await r.body.text().catch((e: unknown) => (e as Error).name) }),
          (e: unknown) => (e as Error).name,
        );
        const before = server.requests;
        for (let i = 0; i < 200 && server.requests === before; i++) await new Promise((resolve) => setTimeout(resolve, 5));
        await new Promise((resolve) => setTimeout(resolve, 120)); // 'busy' and a dot or two are in
        ac.abort();
        expect(await call).toEqual({ status: 503, body: 'AbortError' });
      }
      expect(server.requests).toBe(2); // one each
    } finally {
      await Promise.all([raw.destroy(), agent.destroy()]);
    }
  });

  it('the agent is destroyed while the body is still arriving (the window not over): the 503 with its body failing with undici\'s error, as raw undici gives it (was: request() rejected with UND_ERR_DESTROYED)', async () => {
    await using server = await httpServer(trickle('never'));
    for (const kind of ['raw', 'guarded'] as const) {
      const dispatcher = kind === 'raw' ? new Agent() : new GuardedAgent({ breaker: null, budget: null, clock: new ManualClock() });
      const call = request(`${server.origin}/`, { dispatcher, signal: AbortSignal.timeout(5_000) }).then(
        async (r) => ({ status: r.statusCode, body: await r.body.text().catch((e: unknown) => (e as { code?: string }).code) }),
        (e: unknown) => (e as { code?: string }).code,
      );
      const before = server.requests;
      for (let i = 0; i < 200 && server.requests === before; i++) await new Promise((resolve) => setTimeout(resolve, 5));
      await new Promise((resolve) => setTimeout(resolve, 120)); // 'busy' and a dot or two are in
      await dispatcher.destroy();
      expect({ kind, answer: await call }).toEqual({ kind, answer: { status: 503, body: 'UND_ERR_DESTROYED' } });
    }
    expect(server.requests).toBe(2); // one each: destroyed, the guarded one did not retry
  });

  it('a 503 held, then a retry whose 200 streams: an abort mid-body fails that body (was: the held 503 delivered after it, its bytes ending the 200 body as if whole)', async () => {
    await using server = await httpServer(busyThenStreaming);
    const agent = new GuardedAgent({ breaker: null, budget: null, backoff: () => 0 });
    try {
      const ac = new AbortController();
      const r = await request(`${server.origin}/`, { dispatcher: agent, signal: ac.signal });
      expect(r.statusCode).toBe(200);
      const chunks: string[] = [];
      const ended = new Promise<string>((resolve) => {
        r.body.on('data', (d: Buffer) => {
          chunks.push(String(d));
          if (chunks.length === 1) ac.abort();
        });
        r.body.on('error', (e) => resolve(`error ${e.name}`));
        r.body.on('end', () => resolve('end'));
      });
      expect(await ended).toBe('error AbortError');
      expect(chunks.join('')).toBe('part');
      expect(server.requests).toBe(2);
    } finally {
      await agent.destroy();
    }
  });

  it('the same through a dispatch handler: one onHeaders (200), then onError with the abort; never the held 503 after it', async () => {
    await using server = await httpServer(busyThenStreaming);
    const agent = new GuardedAgent({ breaker: null, budget: null, backoff: () => 0 });
    try {
      const events: string[] = [];
      await new Promise<void>((resolve) => {
        let abort: ((err?: Error) => void) | undefined;
        agent.dispatch(
          { origin: server.origin, path: '/', method: 'GET' },
          {
            onConnect: (a: (err?: Error) => void) => {
              abort = a;
            },
            onHeaders: (status: number) => {
              events.push(`headers ${status}`);
              return true;
            },
            onData: (d: Buffer) => {
              events.push(`data ${String(d)}`);
              abort?.(new Error('enough'));
              return true;
            },
            onComplete: () => {
              events.push('complete');
              resolve();
            },
            onError: (e: Error) => {
              events.push(`error ${e.message}`);
              resolve();
            },
          } as never,
        );
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(events).toEqual(['headers 200', 'data part', 'error enough']);
    } finally {
      await agent.destroy();
    }
  });
});

describe('GuardedAgent: a held 503, then a retry that fails on the connection', () => {
  it('the retry\'s socket is reset: the caller gets the 503 and its body, as raw undici gives it (was: UND_ERR_SOCKET in its place)', async () => {
    let answer503 = true; // the first request of each lane
    await using server = await httpServer((req, res) => {
      req.resume();
      if (answer503) {
        answer503 = false;
        res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('maintenance until 12:00');
        return;
      }
      req.socket.destroy(); // every retry: the connection is cut before any answer
    });
    const raw = new Agent();
    const agent = new GuardedAgent({ breaker: null, budget: null, backoff: () => 0 });
    try {
      for (const dispatcher of [raw, agent]) {
        const before = server.requests;
        answer503 = true;
        const r = await request(`${server.origin}/`, { dispatcher }).then(
          async (res) => ({ status: res.statusCode, body: await res.body.text() }),
          (e: unknown) => (e as { code?: string }).code,
        );
        expect(r).toEqual({ status: 503, body: 'maintenance until 12:00' });
        if (dispatcher === raw) expect(server.requests - before).toBe(1);
        else expect(server.requests - before).toBeGreaterThanOrEqual(2); // it did retry
      }
    } finally {
      await Promise.all([raw.close(), agent.close()]);
    }
  });
});
