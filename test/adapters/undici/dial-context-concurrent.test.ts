/**
 * Traced dials of concurrent requests, each under its own request (an outside review, r127):
 * undici opens a connection per request when many start at once (its default `connections`:
 * no limit), and every one of those dials ran in the context of the oldest request still waiting,
 * itself still waiting for its own dial, so 10 requests' 10 dial spans all went under the first
 * one's span and the 9 other traces showed none. And what capturing a request's context costs:
 * `AsyncResource.bind()` made a bound function with redefined properties (~11 µs a call on Node
 * 20), twice a request while anything traced calls, attempts or dials: +48 µs of CPU a healthy
 * request, 39 % of the throughput, with no span ever made. Counted, not timed: no bind() at all.
 */
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import { request } from 'undici';
import { describe, expect, it, vi } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/agent.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { callTrace, dialTrace } from '../../../src/observe/tracing.js';
import { whileTraced } from '../../helpers/tracing.js';
import { httpServer } from './helpers.js';

describe('GuardedAgent: concurrent traced dials', () => {
  it('10 requests at once, a connection each: each dial in its own request\'s context (was: all 10 in the first\'s)', async () => {
    await using server = await httpServer((_req, res) => setTimeout(() => res.end('hi'), 30));
    const agent = new GuardedAgent({ breaker: new HostBreaker() });
    const als = new AsyncLocalStorage<string>();
    const names = Array.from({ length: 10 }, (_, i) => `r${i}`);
    const seen: Array<string | undefined> = [];
    await whileTraced(dialTrace, { start: () => void seen.push(als.getStore()) }, () =>
      Promise.all(names.map((name) => als.run(name, async () => (await request(`${server.origin}/`, { dispatcher: agent })).body.text()))),
    );
    expect(server.connections).toBe(10);
    expect([...seen].sort()).toEqual([...names].sort());
    await agent.close();
  });

  it('healthy requests while calls and dials are traced capture their context without AsyncResource.bind', async () => {
    await using server = await httpServer((_req, res) => res.end('hi'));
    const agent = new GuardedAgent({ breaker: new HostBreaker() });
    await (await request(`${server.origin}/`, { dispatcher: agent })).body.text(); // warm: the connection is up
    const bind = vi.spyOn(AsyncResource, 'bind');
    try {
      await whileTraced(callTrace, {}, () =>
        whileTraced(dialTrace, {}, async () => {
          for (let i = 0; i < 20; i++) await (await request(`${server.origin}/`, { dispatcher: agent })).body.text();
        }),
      );
      expect(bind).not.toHaveBeenCalled(); // was twice a request: 40
    } finally {
      bind.mockRestore();
      await agent.close();
    }
  });
});
