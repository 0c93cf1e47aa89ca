/**
 * ServerSet over a real GuardedAgent and real fetch: a refusal arrives wrapped
 * (`TypeError('fetch failed', { cause: HostUnavailableError })`) and must still be skipped, as a
 * bare one is (issue 12, defect 4). Also the chain walk itself: findError and isPermanent.
 */
import { fetch as undiciFetch } from 'undici';
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError, HostUnavailableError, MAX_CHAIN_DEPTH, NoServerAvailableError, findError, isPermanent } from '../../src/core/errors.js';
import { classify, toldAsSentEarlier } from '../../src/core/classify.js';
import type { RetryOptions } from '../../src/retry/retry-options.js';
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

/** A ServerSet over a:1 and b:1 whose every attempt throws `thrown` (3 attempts, no wait): how it ended, and the servers tried. */
async function throwingOnEvery(thrown: unknown, classify?: RetryOptions['classify']): Promise<{ err: unknown; servers: string[] }> {
  const set = new ServerSet(['a:1', 'b:1']);
  const servers: string[] = [];
  const err = await set
    .run(
      (server) => {
        servers.push(server);
        throw thrown;
      },
      { maxAttempts: 3, budget: null, backoff: () => 0, ...(classify === undefined ? {} : { classify }) },
    )
    .catch((e: unknown) => e);
  return { err, servers };
}

describe('ServerSet: only a failure classified as refused is skipped', () => {
  it('an error a pattern calls application, wrapping a refusal, ends the call: the next server is not tried', async () => {
    const refusal = new HostUnavailableError('a:1', 100, 'open');
    const proxied = new Error('proxied upstream refused', { cause: refusal });
    const { err, servers } = await throwingOnEvery(proxied, { patterns: [{ match: 'proxied', kind: 'application' }] });
    expect(err).toBe(proxied);
    expect(servers).toEqual(['a:1']);
  });
});

describe('ServerSet: a dial inside fn that fails and leaves its server refused (r143)', () => {
  for (const [name, maxAttempts] of [
    ['GuardedAgent maxAttempts 1, set maxAttempts 1', 1],
    ['GuardedAgent maxAttempts 1, set maxAttempts 3', 3],
  ] as const) {
    it(`${name}: the next server is tried in the same attempt, and serves (was: the call ended, the live server never tried)`, async () => {
      const refused = await refusing();
      await using live = await httpServer(answer(200, 'live'));
      const { breaker } = manualBreaker(1); // one failed dial opens a host
      const { agent } = guarded({ breaker, maxAttempts: 1 });
      const set = new ServerSet([refused.address, live.address]);
      const servers: string[] = [];
      const body = await set.run(
        async (server, attempt) => {
          servers.push(`${attempt.number}:${server}`);
          const res = await undiciFetch(`http://${server}/`, { dispatcher: agent });
          return res.text();
        },
        { maxAttempts, budget: null, backoff: () => 0 },
      );
      expect(body).toBe('live');
      expect(servers).toEqual([`1:${refused.address}`, `1:${live.address}`]);
      expect(breaker.stats()).toMatchObject({ failed: 1 }); // one dial to the dead server
      expect(set.servers()[0]).toBe(live.address); // the failed one moved to the back
    });
  }

  it('every server dead: NoServerAvailableError, its cause the last dial failure, one dial each', async () => {
    const a = await refusing();
    const b = await refusing();
    const { breaker } = manualBreaker(1);
    const { agent } = guarded({ breaker, maxAttempts: 1 });
    const set = new ServerSet([a.address, b.address]);
    let calls = 0;
    const err = await set
      .run(
        async (server) => {
          calls++;
          return (await undiciFetch(`http://${server}/`, { dispatcher: agent })).text();
        },
        { maxAttempts: 3, budget: null, backoff: () => 0 },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoServerAvailableError);
    expect(calls).toBe(2);
    expect(breaker.stats()).toMatchObject({ failed: 2 });
    expect(classify(err).notSent).toBe(true);
  });
});

describe('ServerSet: a refusal that ends a call sent to its server before', () => {
  it('is not skipped to the next server (that one would run it again): the call ends with it', async () => {
    const refusal = toldAsSentEarlier(new HostUnavailableError('a:1', 100, 'open'), undefined, true);
    const { err, servers } = await throwingOnEvery(refusal);
    expect(err).toBe(refusal);
    expect(servers).toEqual(['a:1']);
  });
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

  it('reads 16 members of an AggregateError (or a subclass), and nothing called errors on another object', () => {
    const fillers = (n: number): Error[] => Array.from({ length: n }, (_, i) => new Error(`f${i}`));
    expect(findError(new AggregateError([...fillers(15), refusal]), HostUnavailableError)).toBe(refusal);
    expect(findError(new AggregateError([...fillers(16), refusal]), HostUnavailableError)).toBeUndefined();
    class Many extends AggregateError {
      override name = 'Many';
    }
    expect(findError(new Many([new Error('x'), refusal]), HostUnavailableError)).toBe(refusal);
    expect(findError({ name: 'Error', errors: [refusal] }, HostUnavailableError)).toBeUndefined();
  });

  it('visits at most 64 errors in all, depth first', () => {
    // root, then 4 aggregates of 16: the 64th error visited is the 11th member of the 4th.
    const tree = (at: number): unknown =>
      new AggregateError(
        Array.from({ length: 4 }, (_, a) => new AggregateError(Array.from({ length: 16 }, (_, m) => (a === 3 && m === at ? refusal : new Error(`${a}.${m}`))))),
      );
    expect(findError(tree(10), HostUnavailableError)).toBe(refusal);
    expect(findError(tree(11), HostUnavailableError)).toBeUndefined();
  });

  it('walks functions with a cause and Proxies whose getPrototypeOf throws; a revoked Proxy is nothing', () => {
    expect(findError(Object.assign(() => {}, { cause: refusal }), HostUnavailableError)).toBe(refusal);
    const sly = new Proxy(
      { cause: refusal },
      {
        getPrototypeOf() {
          throw new Error('no prototype for you');
        },
      },
    );
    expect(findError(sly, HostUnavailableError)).toBe(refusal);
    const { proxy, revoke } = Proxy.revocable({ cause: refusal }, {});
    revoke();
    expect(findError(proxy, HostUnavailableError)).toBeUndefined();
    expect(isPermanent(proxy)).toBe(false);
  });

  it('isPermanent looks past a non-permanent dialguard error to the refusal it wraps', () => {
    expect(isPermanent(new DeadlineExceededError(10, 1, { cause: refusal }))).toBe(true);
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
