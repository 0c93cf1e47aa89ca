/**
 * The marks the dial and pool layers put on an error (a failed establishment, a dial that left
 * its host refused, an answer that had begun) and the hooks users give `classify`: what each
 * changes in the verdict, and that none of them throws on a value that is not an object (a
 * connector may reject with a string; the marks must hand it back unchanged).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type ClassifyHook, afterAnswerBegan, classify, failedEstablishing, leftHostRefusing, markLeftRefusing } from '../../src/core/classify.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the marks on an error', () => {
  it.each([
    ['failedEstablishing', failedEstablishing],
    ['markLeftRefusing', markLeftRefusing],
    ['afterAnswerBegan', afterAnswerBegan],
  ] as const)('%s hands back a string, a number, undefined and null unchanged, without throwing', (_name, mark) => {
    for (const v of ['ERROR Too many open connections', 42, undefined, null]) expect(mark(v)).toBe(v);
    expect(leftHostRefusing('ERROR')).toBe(false);
  });

  it('an establishment failure no rule knows is a failed dial: not sent, transient, and its connection not called dead', () => {
    const err = failedEstablishing(new Error('ERROR Too many open connections'));
    expect(classify(err)).toEqual({ kind: 'dial', notSent: true, connectionDead: false, transient: true, code: undefined, cause: err });
    expect(classify(new Error('ERROR Too many open connections'))).toMatchObject({ kind: 'unknown', notSent: false, transient: false });
  });
});

describe('an async classify hook', () => {
  it('is reported once as ignored, by its own text, and its verdict is the one without it', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    // A user's async hook, which the type does not allow: JavaScript callers and casts pass one.
    const hook = (async () => ({ transient: false })) as unknown as ClassifyHook;
    const err = Object.assign(new Error('reset'), { code: 'ECONNRESET', syscall: 'read' });
    for (let i = 0; i < 2; i++) expect(classify(err, { hook })).toMatchObject({ kind: 'connection', transient: true });
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toBe("dialguard: a classify hook's promise was ignored (hooks answer synchronously): an async hook");
  });

  it("one that rejects is reported as a hook's throw, with its error", async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const hook = (async () => {
      throw new Error('async hook bug');
    }) as unknown as ClassifyHook;
    classify(new Error('x'), { hook });
    await new Promise((resolve) => setImmediate(resolve));
    const texts = warn.mock.calls.map((c) => String(c[0]));
    expect(texts).toContain('dialguard: a classify hook threw and was ignored: Error: async hook bug');
  });
});
