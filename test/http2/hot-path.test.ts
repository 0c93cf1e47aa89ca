/**
 * The healthy path pays only for what can happen: counted, not timed, so a later change that
 * adds per-call work shows here whatever the machine's speed.
 */
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { countAbortControllers, countingClock } from '../helpers/hot-path.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { promisesMadeUntilSettled } from '../helpers/promises.js';

const cleanup = leakCheckEach();
const CALLS = 20;

describe('Http2Client: what a healthy call creates', () => {
  it('a call with no timeout arms no timer and makes no AbortController', async () => {
    await using peer = await http2Peer();
    const clock = countingClock();
    const c = new Http2Client({ breaker: new HostBreaker(), clock });
    cleanup.push(() => c.close());
    await c.request(`${peer.origin}/`); // the session is dialled here
    const armed = clock.armed;
    const controllers = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) expect((await c.request(`${peer.origin}/`)).status).toBe(200);
    });
    expect(peer.attempts).toBe(1);
    expect(peer.streams).toBe(CALLS + 1);
    expect(clock.armed - armed).toBe(0);
    expect(controllers).toBe(0);
  });

  it('a call with a timeout arms one timer and one AbortController, and clears the timer', async () => {
    await using peer = await http2Peer();
    const clock = countingClock();
    const c = new Http2Client({ breaker: new HostBreaker(), clock, requestTimeout: 10_000 });
    cleanup.push(() => c.close());
    await c.request(`${peer.origin}/`);
    const [armed, cleared] = [clock.armed, clock.cleared];
    const controllers = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) expect((await c.request(`${peer.origin}/`)).status).toBe(200);
    });
    expect(peer.attempts).toBe(1);
    expect(clock.armed - armed).toBe(CALLS);
    expect(clock.cleared - cleared).toBe(CALLS);
    expect(controllers).toBe(CALLS);
  });

  it('a call makes one promise (its own), with a timeout too: the exchange ends the pool\'s trip itself', async () => {
    await using peer = await http2Peer();
    const c = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => c.close());
    await c.request(`${peer.origin}/`);
    // Counted from the call to its settlement, less what counting itself makes (its `await`).
    const ready = Promise.resolve();
    const counting = await promisesMadeUntilSettled(() => ready);
    const counts: number[] = [];
    for (const timeout of [undefined, 10_000]) {
      // The hook counts every promise made until the call settles, the in-process server's and
      // node:http2's included; on a loaded machine some land inside a call's window now and then.
      // They only ever add, so the fewest any call made is the call's own count.
      let fewest = Infinity;
      for (let i = 0; i < CALLS; i++) fewest = Math.min(fewest, await promisesMadeUntilSettled(() => c.request(`${peer.origin}/`, { timeout })));
      counts.push(fewest - counting);
    }
    // Before the pool's fast path: [6, 10] (an async frame and a promise chain in use(), `finally`);
    // through use(), [3, 4] (the timeout's clearing was a reaction of its own); through ride(),
    // [3, 3] (the exchange's promise and the reaction that ended the trip).
    expect(counts).toEqual([1, 1]);
    expect(peer.attempts).toBe(1);
  });
});
