/**
 * A retried call's story, told on the error it fails with (the adapters' `retriesOf`): what is
 * told where, what is read back through wrappers, and what is never read.
 */
import { describe, expect, it } from 'vitest';
import { DeadlineExceededError, HostUnavailableError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
import { retriesOf, tellStory, withStory } from '../../src/retry/story.js';

const refused = (n: number): Error => Object.assign(new Error(`connect ECONNREFUSED #${n}`), { code: 'ECONNREFUSED' });

describe('withStory: what the caller of a retried call is told', () => {
  it('attempts run out: the last attempt\'s own error, the verdict on it; a verdict nested in the last one is unwrapped', () => {
    const errors = [refused(1), refused(2), refused(3)];
    const verdict = new RetriesExhaustedError(errors, '3 attempt(s) allowed');
    expect(withStory(verdict)).toBe(errors[2]);
    expect(retriesOf(errors[2])).toBe(verdict);
    const inner = [refused(4), refused(5)];
    const nested = new RetriesExhaustedError([refused(6), new RetriesExhaustedError(inner, 'inner')], 'outer');
    expect(withStory(nested)).toBe(inner[1]);
    expect(retriesOf(inner[1])).toBe(nested);
  });

  it('the budget said no: its cause, the verdict on it', () => {
    const last = refused(1);
    const verdict = new RetryBudgetExhaustedError({ cause: last });
    expect(withStory(verdict)).toBe(last);
    expect(retriesOf(last)).toBe(verdict);
  });

  it('any other error is told as it is, with no story', () => {
    const deadline = new DeadlineExceededError(1_000, 2);
    expect(withStory(deadline)).toBe(deadline);
    expect(retriesOf(deadline)).toBeUndefined();
    const plain = refused(1);
    expect(withStory(plain)).toBe(plain);
    expect(retriesOf(plain)).toBeUndefined();
  });
});

describe('tellStory: a last error that cannot carry it', () => {
  it('not an Error, or frozen: the verdict itself is told', () => {
    const verdict = new RetriesExhaustedError(['nope'], 'x');
    expect(tellStory('nope', verdict)).toBe(verdict);
    const frozen = Object.freeze(refused(1));
    expect(tellStory(frozen, verdict)).toBe(verdict);
    expect(retriesOf(frozen)).toBeUndefined();
  });

  it('the story is not enumerable: the error prints and serialises as before', () => {
    const last = refused(1);
    tellStory(last, new RetryBudgetExhaustedError({ cause: last }));
    expect(Object.keys(last)).toEqual(['code']);
  });
});

describe('retriesOf: reading it back', () => {
  it('through wrappers (fetch\'s TypeError), up to four errors deep, no deeper', () => {
    const last = refused(1);
    const verdict = new RetryBudgetExhaustedError({ cause: last });
    tellStory(last, verdict);
    let wrapped: unknown = last;
    const found: boolean[] = [];
    for (let depth = 1; depth <= 4; depth++) {
      wrapped = new TypeError('fetch failed', { cause: wrapped });
      found.push(retriesOf(wrapped) === verdict);
    }
    expect(found).toEqual([true, true, true, false]);
  });

  it('never through a refusal: its cause is the dial error of the call that opened the host, with that call\'s story', () => {
    const opener = refused(1);
    tellStory(opener, new RetriesExhaustedError([opener], 'x'));
    const refusal = new HostUnavailableError('h:1', 1_000, 'open', undefined, { cause: opener });
    expect(retriesOf(refusal)).toBeUndefined();
    expect(retriesOf(new TypeError('fetch failed', { cause: refusal }))).toBeUndefined();
  });

  it('a primitive, or an object whose getters throw, has no story', () => {
    expect(retriesOf('ECONNREFUSED')).toBeUndefined();
    expect(retriesOf(null)).toBeUndefined();
    const hostile = new Proxy({}, { get: () => { throw new Error('hostile'); } });
    expect(retriesOf(hostile)).toBeUndefined();
  });
});

describe('errors from another realm (a vm context: jest runs tests so)', () => {
  it('an Error of another realm is an Error: asError keeps it, code and all, and the story rides on it (was: re-wrapped, its code lost; an outside review)', async () => {
    const { runInNewContext } = await import('node:vm');
    const { asError, isError } = await import('../../src/core/validate.js');
    const foreign = runInNewContext("Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', syscall: 'connect' })") as Error;
    expect(foreign instanceof Error).toBe(false); // the premise: another realm's Error
    expect(isError(foreign)).toBe(true);
    expect(asError(foreign)).toBe(foreign);
    expect(isError({ message: 'x', name: 'Error' })).toBe(false); // a look-alike is not one
    const verdict = new RetriesExhaustedError([foreign], 'x');
    expect(withStory(verdict)).toBe(foreign);
    expect(retriesOf(foreign)).toBe(verdict);
  });
});
