/**
 * A GuardedAgent's dial runs in the async context of the request it serves when dials are traced
 * (see dial-waiters). undici dials for its queue from the events of whatever socket freed it: with
 * one connection and a server closing each, the second and third dials ran in the first
 * request's context, so their `dialguard.dial` spans went under its span, already ended, and the
 * requests that waited for them showed no dial (an outside review: 2 of 3). Counted here through
 * the tracing channel itself and an AsyncLocalStorage each request runs in, as a tracer's context
 * manager would see it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/agent.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { dialTrace } from '../../../src/observe/tracing.js';
import { whileTraced } from '../../helpers/tracing.js';
import { httpServer } from './helpers.js';

/** The request context each dial started in, while `run` runs (nothing recorded otherwise). */
async function dialContexts(als: AsyncLocalStorage<string>, run: () => Promise<unknown>): Promise<Array<string | undefined>> {
  const seen: Array<string | undefined> = [];
  await whileTraced(dialTrace, { start: () => void seen.push(als.getStore()) }, run);
  return seen;
}

describe('GuardedAgent: a traced dial belongs to the request it serves', () => {
  it('3 requests queued on one connection a server closes after each: each dial in its own request\'s context (was: all 3 in the first\'s)', async () => {
    await using server = await httpServer((_req, res) => {
      res.setHeader('connection', 'close');
      setTimeout(() => res.end('hi'), 20);
    });
    const agent = new GuardedAgent({ breaker: new HostBreaker(), undici: { connections: 1 } });
    const als = new AsyncLocalStorage<string>();
    const seen = await dialContexts(als, () =>
      Promise.all(['A', 'B', 'C'].map((name) => als.run(name, async () => (await request(`${server.origin}/`, { dispatcher: agent })).body.text()))),
    );
    expect(seen).toEqual(['A', 'B', 'C']);
    expect(server.connections).toBe(3);
    await agent.close();
  });

  it('a retry\'s dial from another socket\'s events is its own request\'s too', async () => {
    // The first request's connection dies under it, unanswered: its retry (a GET) dials again
    // while B, queued behind it, waits; the dial after B's answer is C's.
    await using server = await httpServer((req, res, n) => {
      if (n === 1) return void req.socket.destroy();
      res.setHeader('connection', 'close');
      setTimeout(() => res.end(`answer ${n}`), 20);
    });
    const agent = new GuardedAgent({ breaker: new HostBreaker(), undici: { connections: 1 }, backoff: () => 0 });
    const als = new AsyncLocalStorage<string>();
    const seen = await dialContexts(als, () =>
      Promise.all(['A', 'B'].map((name) => als.run(name, async () => (await request(`${server.origin}/`, { dispatcher: agent })).body.text()))),
    );
    expect(seen).not.toContain(undefined);
    expect(new Set(seen)).toEqual(new Set(['A', 'B']));
    expect(seen[0]).toBe('A');
    await agent.close();
  });

  it('a request retried after a connection another request opened died under it redials in its own context (was: the opener\'s, when dials alone were traced)', async () => {
    // A opens a kept-alive connection; B rides it next and the server drops it unanswered: B's
    // retry learns so from that socket's events, in A's context.
    await using server = await httpServer((req, res, n) => {
      if (n === 2) return void req.socket.destroy();
      res.end(`answer ${n}`);
    });
    const agent = new GuardedAgent({ breaker: new HostBreaker(), undici: { connections: 1 }, backoff: () => 0 });
    const als = new AsyncLocalStorage<string>();
    const seen = await dialContexts(als, async () => {
      expect(await als.run('A', async () => (await request(`${server.origin}/`, { dispatcher: agent })).body.text())).toBe('answer 1');
      expect(await als.run('B', async () => (await request(`${server.origin}/`, { dispatcher: agent })).body.text())).toBe('answer 3');
    });
    expect(seen).toEqual(['A', 'B']);
    expect(server.connections).toBe(2);
    await agent.close();
  });
});
