import { describe, expect, it } from 'vitest';
import { HostUnavailableError, MAX_CHAIN_DEPTH, findError } from '../../src/core/errors.js';

// What a refusal's message says about the dial error behind it (the "last error" a log reader
// sees), and the edges of the chain walk findError does: which objects count as errors and as
// aggregates, and what the bounds count.

/** The "last error ..." part of an open refusal's message whose cause is `cause`. */
function lastError(cause: unknown): string {
  const { message } = new HostUnavailableError('a:1', 100, 'open', undefined, { failures: 1, cause });
  const m = /last error (.*)\); refused without dialling/.exec(message);
  if (m === null) throw new Error(`unexpected message: ${message}`);
  return m[1] as string;
}

const errno = (code: string): Error => Object.assign(new Error(`connect ${code}`), { code });
const wrapped = (times: number, inner: unknown): unknown => {
  let err = inner;
  for (let i = 0; i < times; i++) err = new Error(`wrap ${i}`, { cause: err });
  return err;
};

describe('a refusal names the dial error behind it', () => {
  it('a string code names it; an empty code does not, the name does', () => {
    expect(lastError(errno('ECONNREFUSED'))).toBe('ECONNREFUSED');
    expect(lastError(Object.assign(new Error('x'), { code: '' }))).toBe('Error');
  });

  it('without a code, the outermost name; a non-string name is skipped', () => {
    expect(lastError(new TypeError('fetch failed', { cause: new RangeError('inner') }))).toBe('TypeError');
    expect(lastError({ name: 7, cause: new RangeError('inner') })).toBe('RangeError');
    expect(lastError({})).toBe('unknown');
  });

  it('a numeric code (a gRPC status) is named with the name, or "code" without one; the errno under it wins', () => {
    expect(lastError(Object.assign(new Error('14 UNAVAILABLE'), { code: 14 }))).toBe('Error 14');
    expect(lastError({ code: 14 })).toBe('code 14');
    expect(lastError(Object.assign(new Error('14 UNAVAILABLE', { cause: errno('ECONNREFUSED') }), { code: 14 }))).toBe('ECONNREFUSED');
    // The first numeric code stays: a deeper status does not replace it, nor does a deeper name.
    const inner = Object.assign(new RangeError('2 UNKNOWN'), { code: 2 });
    expect(lastError(Object.assign(new Error('14 UNAVAILABLE', { cause: inner }), { code: 14 }))).toBe('Error 14');
    expect(lastError(new TypeError('fetch failed', { cause: inner }))).toBe('TypeError');
  });

  it('looks four errors down for a code, no further', () => {
    expect(lastError(wrapped(3, errno('ECONNREFUSED')))).toBe('ECONNREFUSED');
    expect(lastError(wrapped(4, errno('ECONNREFUSED')))).toBe('Error');
  });

  it('a function is not an error, even with a code', () => {
    expect(lastError(Object.assign(function dial() {}, { code: 'ECONNREFUSED' }))).toBe('unknown');
  });

  it('a cause whose getter throws ends the walk, named by what was read before it (its own code)', () => {
    const hostile = Object.defineProperty(errno('ECONNRESET'), 'cause', {
      get() {
        throw new Error('no');
      },
    });
    expect(lastError(new TypeError('fetch failed', { cause: hostile }))).toBe('ECONNRESET');
  });

  it('a name refused on every address lists each address and its state', () => {
    const v4 = new HostUnavailableError('127.0.0.1:80', 100, 'open');
    const v6 = new HostUnavailableError('[::1]:80', 100, 'half-open');
    const err = new HostUnavailableError('localhost:80', 100, 'open', undefined, { addresses: [v4, v6] });
    expect(err.message).toBe('localhost:80 is unavailable (every address it resolves to is refused: 127.0.0.1:80 open, [::1]:80 half-open); refused without dialling; a probe may run in 100 ms');
    expect(err.addresses).toEqual([v4, v6]);
  });

  it('has a cause only when given one', () => {
    const bare = new HostUnavailableError('a:1', 100, 'open');
    expect(Object.hasOwn(bare, 'cause')).toBe(false);
    const dialErr = errno('ECONNREFUSED');
    expect(new HostUnavailableError('a:1', 100, 'open', undefined, { cause: dialErr }).cause).toBe(dialErr);
  });
});

describe('findError: what counts on the chain', () => {
  const refusal = new HostUnavailableError('h:1', 100, 'open');

  it('an object named AggregateError is read as one (another realm, a copy of the class)', () => {
    expect(findError({ name: 'AggregateError', errors: [new Error('x'), refusal] }, HostUnavailableError)).toBe(refusal);
  });

  it('a Proxy whose getPrototypeOf throws has no members, whatever its errors property holds', () => {
    const sly = new Proxy(
      { name: 'Error', errors: [refusal] },
      {
        getPrototypeOf() {
          throw new Error('no prototype for you');
        },
      },
    );
    expect(findError(sly, HostUnavailableError)).toBeUndefined();
  });

  it('members count toward the depth bound as causes do', () => {
    const nest = (depth: number): unknown => {
      let err: unknown = refusal;
      for (let i = 0; i < depth; i++) err = new AggregateError([err]);
      return err;
    };
    expect(findError(nest(MAX_CHAIN_DEPTH - 1), HostUnavailableError)).toBe(refusal);
    expect(findError(nest(MAX_CHAIN_DEPTH), HostUnavailableError)).toBeUndefined();
  });

  it('a null member does not use up the budget of errors visited', () => {
    // root, then 4 aggregates of 16 whose first member is null: 15 errors each, so the 64th error
    // visited is the last-but-one member of the 4th (one earlier if the null were counted once).
    const tree = new AggregateError(
      Array.from({ length: 4 }, (_, a) => new AggregateError(Array.from({ length: 16 }, (_, m) => (m === 0 ? null : a === 3 && m === 14 ? refusal : new Error(`${a}.${m}`))))),
    );
    expect(findError(tree, HostUnavailableError)).toBe(refusal);
  });
});
