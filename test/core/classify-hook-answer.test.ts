/**
 * What a classify hook may answer besides an object: nothing (undefined, null) or a primitive,
 * each meaning "no opinion". Read inside the guard that catches a hook throwing (so that a hostile
 * getter is ignored), such an answer must still be taken for what it is, never as a hook that
 * threw: no warning, the verdict unchanged.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { sys } from './classify-table.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('classify: a hook with no opinion', () => {
  it.each([
    ['undefined', undefined],
    ['null', null],
    ['a number', 5],
    ['a string', 'connection'],
    ['a boolean', true],
  ])('answering %s leaves the verdict as it was and warns of nothing', (_name, answer) => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const err = sys('ECONNRESET', 'read');
    const plain = classify(err);
    expect(classify(err, { hook: () => answer as never })).toEqual(plain);
    expect(warn).not.toHaveBeenCalled();
  });
});
