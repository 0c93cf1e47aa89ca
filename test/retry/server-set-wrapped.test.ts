/**
 * ServerSet over a real GuardedAgent and real fetch: a refusal arrives wrapped
 * (`TypeError('fetch failed', { cause: HostUnavailableError })`) and must still be skipped, as a
 * bare one is (issue 12, defect 4). Also the chain walk itself: findError and isPermanent.
 */
import { fetch as undiciFetch } from 'undici';
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError, HostUnavailableError, MAX_CHAIN_DEPTH, findError, isPermanent } from '../../src/core/errors.js';
import { ServerSet } from '../../src/retry/server-set.js';
import { refusing } from '../../src/testing/tcp-peers.js';
import { answer, guarded, httpServer, leakChecked, manualBreaker } from '../adapters/undici/helpers.js';

leakChecked();

describe('ServerSet: a refusal wrapped by fetch is skipped like a bare one', () => {
  for (const maxAttempts of [1, 3]) {
    it(`one refused server (open in the agent's breaker) and one live one, maxAttempts ${maxAttempts}: served by the live one`, async () => {
      const refused = await refusing();
      await using live = await httpServer(answer(200, 'live'));
      const { breaker } = manualBreaker(1);
      breaker.admit(refused.address).failed(); // its host is open: the agent refuses without dialling
      expect(breaker.state(refused.address)).toMatchObject({ state: 'open' });
      const { agent } = guarded({ breaker, maxAttempts: 1 });
      // The set's own (private) breaker knows nothing yet, so it picks the refused server first.
      const set = new ServerSet([refused.address, live.address]);
      const servers: string[] = [];
      const body = await set.run(
        async (server) => {
          servers.push(server);
          const res = await undiciFetch(`http://${server}/`, { dispatcher: agent });
          return res.text();
        },
        { maxAttempts, budget: null, backoff: () => 0 },
      );
      expect(body).toBe('live');
      expect(servers).toEqual([refused.address, live.address]);
      expect(live.requests).toBe(1);
      expect(breaker.stats()).toMatchObject({ refused: 1, failed: 1 }); // no dial to the refused host
      // The skip spent no attempt and told the set's breaker nothing against the refused host.
      expect(set.breaker.state(refused.address)?.failures ?? 0).toBe(0);
    });
  }
});

describe('findError and isPermanent walk the cause chain', () => {
  const refusal = new HostUnavailableError('h:1', 100, 'open');

  it('a refusal inside fetch failed, inside an AggregateError, or bare is found and is permanent', () => {
    const shapes = [refusal, new TypeError('fetch failed', { cause: refusal }), new AggregateError([new Error('x'), refusal]), new Error('a', { cause: new Error('b', { cause: refusal }) })];
    for (const err of shapes) {
      expect(findError(err, HostUnavailableError)).toBe(refusal);
      expect(isPermanent(err)).toBe(true);
    }
  });

  it('a deadline wrapping nothing permanent is not permanent; nothing is found in non-errors', () => {
    expect(isPermanent(new DeadlineExceededError(10, 1))).toBe(false);
    for (const v of [undefined, null, 42, 'fetch failed', {}]) {
      expect(findError(v, HostUnavailableError)).toBeUndefined();
      expect(isPermanent(v)).toBe(false);
    }
  });

  it('cycles and hostile getters end the walk without throwing; the depth bound is MAX_CHAIN_DEPTH', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    Object.assign(a, { cause: b });
    expect(findError(a, HostUnavailableError)).toBeUndefined();
    const hostile = Object.defineProperty(new Error('h'), 'cause', {
      get() {
        throw new Error('no');
      },
    });
    expect(findError(hostile, HostUnavailableError)).toBeUndefined();
    const chain = (depth: number): unknown => {
      let err: unknown = refusal;
      for (let i = 0; i < depth; i++) err = new Error(`w${i}`, { cause: err });
      return err;
    };
    expect(findError(chain(MAX_CHAIN_DEPTH - 1), HostUnavailableError)).toBe(refusal);
    expect(findError(chain(MAX_CHAIN_DEPTH), HostUnavailableError)).toBeUndefined();
  });
});
