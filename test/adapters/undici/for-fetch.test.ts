/**
 * forFetch (issue 13): a GuardedAgent passed to Node's global fetch with no cast. The README's
 * fetch example compiles with it under exactOptionalPropertyTypes (test/package/pack.test.ts);
 * here it must also work: the very same object, responses, and refusals as the cause.
 */
import { describe, expect, it } from 'vitest';
import { GuardedAgent, forFetch } from '../../../src/adapters/undici/index.js';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { answer, failure, guarded, httpServer, leakChecked, manualBreaker, unwrapFetch } from './helpers.js';

leakChecked();

describe('forFetch', () => {
  it("Node's global fetch takes forFetch(agent): a response; a refused origin fails once by dialling, then is refused as the cause", async () => {
    await using server = await httpServer(answer(200, 'typed'));
    const { agent } = guarded({ breaker: manualBreaker(1).breaker, maxAttempts: 1 });
    const dispatcher = forFetch(agent);
    expect(dispatcher).toBe(agent);
    expect(await (await fetch(`${server.origin}/`, { dispatcher })).text()).toBe('typed');
    await using dead = await refusing();
    const url = `http://${dead.address}/`;
    expect(unwrapFetch((await failure(fetch(url, { dispatcher }))).error)).not.toBeInstanceOf(HostUnavailableError);
    expect(unwrapFetch((await failure(fetch(url, { dispatcher }))).error)).toBeInstanceOf(HostUnavailableError);
  });

  it('refuses what is not a dispatcher, naming what it got', () => {
    expect(() => forFetch(null as unknown as GuardedAgent)).toThrow(/forFetch takes an undici Dispatcher.*got null/);
    expect(() => forFetch({} as unknown as GuardedAgent)).toThrow(TypeError);
  });
});
