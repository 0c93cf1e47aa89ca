/**
 * ServerSet.run, in memory: a dial failure that left its server refused (marked by the dial
 * layer: markLeftRefusing) skips that server within the attempt, as a breaker's refusal does,
 * and moves it back (r143); a failure that is not such a dial, or that was sent, does not. When
 * every server is skipped, NoServerAvailableError, its cause the last skip's error.
 */
import { describe, expect, it } from 'vitest';
import { constant } from '../../src/core/backoff.js';
import { markLeftRefusing, toldAsSentEarlier } from '../../src/core/classify.js';
import { NoServerAvailableError, RetriesExhaustedError } from '../../src/core/errors.js';
import { ServerSet } from '../../src/retry/server-set.js';
import { refusedConnect, resetMidRequest } from './helpers.js';

function run(set: ServerSet<string>, fail: (server: string) => unknown, maxAttempts = 1): Promise<{ tried: string[]; result: unknown }> {
  const tried: string[] = [];
  return set
    .run(
      async (server, attempt) => {
        tried.push(`${attempt.number}:${server}`);
        const err = fail(server);
        if (err !== undefined) throw err;
        return `ok ${server}`;
      },
      { maxAttempts, budget: null, backoff: constant(0) },
    )
    .then(
      (result) => ({ tried, result }),
      (result: unknown) => ({ tried, result }),
    );
}

describe('ServerSet: a dial that left its server refused', () => {
  it('is skipped within the attempt; the next server serves; the failed one moves back', async () => {
    const set = new ServerSet(['a:1', 'b:1']);
    const got = await run(set, (s) => (s === 'a:1' ? markLeftRefusing(refusedConnect()) : undefined));
    expect(got).toEqual({ tried: ['1:a:1', '1:b:1'], result: 'ok b:1' });
    expect(set.servers()).toEqual(['b:1', 'a:1']);
  });

  it('every server so: NoServerAvailableError, the last failure its cause, each tried once', async () => {
    const set = new ServerSet(['a:1', 'b:1']);
    const last = markLeftRefusing(refusedConnect());
    const got = await run(set, (s) => (s === 'a:1' ? markLeftRefusing(refusedConnect()) : last), 3);
    expect(got.tried).toEqual(['1:a:1', '1:b:1']);
    expect(got.result).toBeInstanceOf(NoServerAvailableError);
    expect((got.result as Error).cause).toBe(last);
    expect((got.result as NoServerAvailableError).retryAfter).toBeGreaterThanOrEqual(0);
  });

  it('a refused dial that left nothing refused: the attempt is spent, the next attempt goes on', async () => {
    const set = new ServerSet(['a:1', 'b:1']);
    const got = await run(set, (s) => (s === 'a:1' ? refusedConnect() : undefined), 2);
    expect(got).toEqual({ tried: ['1:a:1', '2:b:1'], result: 'ok b:1' });
  });

  it('one that was sent before (a marked copy) is not skipped: with one attempt, the call ends with it', async () => {
    const set = new ServerSet(['a:1', 'b:1']);
    const sent = toldAsSentEarlier(markLeftRefusing(refusedConnect()), undefined, true);
    const got = await run(set, (s) => (s === 'a:1' ? sent : undefined));
    expect(got).toEqual({ tried: ['1:a:1'], result: sent });
  });

  it('a reset (not a dial) is not skipped either', async () => {
    const set = new ServerSet(['a:1', 'b:1']);
    const reset = markLeftRefusing(resetMidRequest());
    const got = await run(set, (s) => (s === 'a:1' ? reset : undefined), 1);
    expect(got.tried).toEqual(['1:a:1']);
    expect(got.result === reset || got.result instanceof RetriesExhaustedError).toBe(true);
  });
});
