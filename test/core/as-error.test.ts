/** asError: what a callback threw, as the Error a handler's onError takes. */
import { describe, expect, it } from 'vitest';
import { asError } from '../../src/core/validate.js';

describe('asError', () => {
  it('an Error is itself; anything else an Error with its text, even one that cannot be printed', () => {
    const err = new TypeError('x');
    expect(asError(err)).toBe(err);
    expect(asError('boom')).toMatchObject({ message: 'boom' });
    expect(asError('boom')).toBeInstanceOf(Error);
    expect(asError(Object.create(null)).message).toBe('[a value that cannot be printed]');
  });
});
