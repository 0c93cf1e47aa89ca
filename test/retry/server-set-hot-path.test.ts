/**
 * ServerSet.run on a healthy server pays for what can happen, as retry() does: counted, not timed
 * (an outside review measured 17-20 µs of CPU a call where retry() took 3). No AbortController
 * unless `fn` reads its attempt's signal, and the options are read as given (a copy made per call
 * to set the failover backoff cost ~6 µs in their checking alone).
 */
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { FAILOVER_BACKOFF, ServerSet } from '../../src/retry/server-set.js';
import { retry } from '../../src/retry/retry.js';
import { countAbortControllers } from '../helpers/hot-path.js';

const CALLS = 50;

describe('ServerSet.run on a healthy server: what a call creates', () => {
  it('no AbortController when fn never reads the signal; one per call when it does, as retry()', async () => {
    const set = new ServerSet(['a.test:1', 'b.test:1'], { breaker: new HostBreaker() });
    const unread = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) await set.run((server) => server, { timeout: 2_000 });
    });
    expect(unread).toBe(0);
    const read = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) await set.run((_server, attempt) => attempt.signal.aborted, { timeout: 2_000 });
    });
    const retried = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) await retry((attempt) => attempt.signal.aborted, { timeout: 2_000 });
    });
    expect(read).toBe(retried);
  });

  it('the failover backoff is the default without copying the options, and the caller\'s own backoff wins', async () => {
    const set = new ServerSet(['a.test:1', 'b.test:1'], { breaker: new HostBreaker() });
    const delays: number[] = [];
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });
    let n = 0;
    const options = Object.freeze({ timeout: 5_000, random: () => 0.5, onRetry: (info: { delay: number }) => void delays.push(info.delay) });
    await set.run(() => {
      if (n++ === 0) throw refused;
      return 'ok';
    }, options);
    expect(delays).toEqual([FAILOVER_BACKOFF(1, 0, () => 0.5)]);
    n = 0;
    await set.run(() => {
      if (n++ === 0) throw refused;
      return 'ok';
    }, { ...options, backoff: () => 7 });
    expect(delays).toEqual([FAILOVER_BACKOFF(1, 0, () => 0.5), 7]);
  });
});
