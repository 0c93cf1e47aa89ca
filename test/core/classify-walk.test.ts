/**
 * How classify walks a chain (src/core/classify.ts): which error decides, how AggregateError
 * members combine, where the walk stops (32 causes deep, 64 errors, 16 members of one aggregate),
 * and how options, user patterns, hooks and the caller's signal change the answer.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Classification, type ClassifyHook, classify, registerClassifier } from '../../src/core/classify.js';
import { HostUnavailableError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
import { type Row, type Want, coded, expectClassified, grpcErr, sys } from './classify-table.js';

const dial = (code: string): Want => ['dial', true, false, true, code];
const dead = (code: string | undefined): Want => ['connection', false, true, true, code];
const unknown = (code: string | undefined): Want => ['unknown', false, false, false, code];

/** `root` under `n` plain wrappers (so `root` is at depth n). */
function wrapped(root: unknown, n: number): unknown {
  let err = root;
  for (let i = 0; i < n; i++) err = new Error(`wrap ${i}`, { cause: err });
  return err;
}

/** A pair of errors that cause each other. */
function loop(): Error {
  const a = new Error('a');
  (a as { cause?: unknown }).cause = new Error('b', { cause: a });
  return a;
}

const cert = (): Error => coded('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate');
const goaway = (): Error => coded('ERR_HTTP2_GOAWAY_SESSION');
const hpe = (): Error => coded('HPE_INVALID_CONSTANT', 'Expected HTTP/');

describe('classify walk: which error decides', () => {
  it.each<Row>([
    ['a wrapper without a verdict over an unrecognised error: the deeper one is the cause', new Error('x', { cause: hpe() }), unknown('HPE_INVALID_CONSTANT')],
    ['a retry wrapper over an unrecognised error that has a code: the deeper code', new RetryBudgetExhaustedError({ cause: hpe() }), unknown('HPE_INVALID_CONSTANT')],
    ['the code of an outer error is kept when a deeper one has none', coded('EWEIRD', 'outer', { cause: new Error('inner') }), unknown('EWEIRD')],
    ['a numeric code is never the code', Object.assign(new Error('zzz'), { code: 99, cause: new Error('inner') }), unknown(undefined)],
  ])('%s', (_name, err, want) => expectClassified(err, want));

  it('the deciding error is the cause', () => {
    const root = hpe();
    expect(classify(new Error('x', { cause: root })).cause).toBe(root);
    const budget = new RetryBudgetExhaustedError({ cause: root });
    expect(classify(budget).cause).toBe(root);
    const status = new Error('Unexpected response code: 502 (bad gateway)', { cause: root });
    expect(classify(status).cause).toBe(status);
    const plain = new Error('x');
    expect(classify(plain).cause).toBe(plain);
  });
});

describe('classify walk: AggregateError', () => {
  class PoolError extends AggregateError {
    override name = 'PoolError';
  }
  const revoked = (): object => {
    const { proxy, revoke } = Proxy.revocable([], {});
    revoke();
    return proxy;
  };

  it.each<Row>([
    ['members agree: a dial, transient if any member is', new AggregateError([cert(), sys('ECONNREFUSED', 'connect')]), dial('DEPTH_ZERO_SELF_SIGNED_CERT')],
    ['members disagree: the first transient one decides', new AggregateError([cert(), sys('ECONNRESET', 'read')]), ['connection', false, false, true, 'ECONNRESET']],
    ['two dead connections: dead', new AggregateError([sys('ECONNRESET', 'read'), sys('EPIPE', 'write')]), dead('ECONNRESET')],
    ['a dead connection and one going away: not dead', new AggregateError([sys('ECONNRESET', 'read'), goaway()]), ['connection', false, false, true, 'ECONNRESET']],
    ['not sent only if no member was sent', new AggregateError([goaway(), sys('ECONNREFUSED', 'connect')]), ['connection', true, false, true, 'ERR_HTTP2_GOAWAY_SESSION']],
    ['a refusal beside a dial', new AggregateError([new HostUnavailableError('a:1', 100, 'open'), sys('ECONNREFUSED', 'connect')]), dial('ECONNREFUSED')],
    [
      "its own code is only its first member's: the members decide",
      Object.assign(new AggregateError([sys('ECONNREFUSED', 'connect'), sys('ECONNRESET', 'read')]), { code: 'ECONNREFUSED' }),
      ['dial', false, false, true, 'ECONNREFUSED'],
    ],
    ['the members decide over its cause', new AggregateError([sys('ECONNREFUSED', 'connect')], 'x', { cause: sys('ECONNRESET', 'read') }), dial('ECONNREFUSED')],
    ['no recognised member: its cause speaks', new AggregateError([new Error('x')], 'x', { cause: sys('ECONNRESET', 'read') }), dead('ECONNRESET')],
    ['one named AggregateError that is no instance (another realm)', { name: 'AggregateError', message: 'x', errors: [sys('ECONNREFUSED', 'connect')] }, dial('ECONNREFUSED')],
    ['an instance with a name of its own', new PoolError([sys('ECONNREFUSED', 'connect')]), dial('ECONNREFUSED')],
    [
      'members that cannot be read: its own code speaks',
      Object.assign(new AggregateError([]), { errors: revoked(), code: 'ECONNREFUSED', syscall: 'connect' }),
      dial('ECONNREFUSED'),
    ],
    ['members that are no array: its own code speaks', Object.assign(new AggregateError([]), { errors: 'ECONNRESET', code: 'ECONNREFUSED', syscall: 'connect' }), dial('ECONNREFUSED')],
    ['a user pattern on the aggregate itself decides', new AggregateError([sys('ECONNRESET', 'read')], 'No cluster leader'), ['unknown', true, false, true, undefined]],
  ])('%s', (_name, err, want) => expectClassified(err, want, { patterns: [{ match: 'No cluster leader', transient: true, notSent: true }] }));

  it('only the first 16 members are read', () => {
    const members = (at: number): unknown[] => Array.from({ length: 17 }, (_, i) => (i === at ? sys('ECONNREFUSED', 'connect') : new Error(`m${i}`)));
    expectClassified(new AggregateError(members(15)), dial('ECONNREFUSED'));
    expectClassified(new AggregateError(members(16)), unknown(undefined));
  });

  it('members that loop cost one visit each, so they cannot crowd out the one that decides', () => {
    expectClassified(new AggregateError([loop(), loop(), loop(), sys('ECONNREFUSED', 'connect')]), dial('ECONNREFUSED'));
  });
});

describe('classify walk: bounds', () => {
  it('reads 32 errors deep and no deeper', () => {
    expectClassified(wrapped(sys('ECONNRESET', 'read'), 31), dead('ECONNRESET'));
    expectClassified(wrapped(sys('ECONNRESET', 'read'), 32), unknown(undefined));
  });

  it('counts nested AggregateErrors as depth too', () => {
    const nested = (n: number): unknown => {
      let err: unknown = sys('ECONNREFUSED', 'connect');
      for (let i = 0; i < n; i++) err = new AggregateError([err]);
      return err;
    };
    expectClassified(nested(31), dial('ECONNREFUSED'));
    expectClassified(nested(32), unknown(undefined));
  });

  it('visits 64 errors in all and no more', () => {
    // The aggregate (1) and 15 members of 4 errors each (60) come before the last member, so its
    // root is the 64th error visited under 2 wrappers and the 65th under 3.
    const wide = (lastWrappers: number): AggregateError =>
      new AggregateError([...Array.from({ length: 15 }, () => wrapped(new Error('leaf'), 3)), wrapped(sys('ECONNREFUSED', 'connect'), lastWrappers)]);
    expectClassified(wide(2), dial('ECONNREFUSED'));
    expectClassified(wide(3), unknown(undefined));
  });

  it('a cycle below the error that decides is never followed', () => {
    const root = sys('ECONNRESET', 'read');
    const top = new Error('top', { cause: root });
    (root as { cause?: unknown }).cause = top;
    expectClassified(top, dead('ECONNRESET'));
  });
});

describe('classify walk: user patterns', () => {
  const noLeader = { match: 'No cluster leader', transient: true, notSent: true } as const;

  it.each<[string, unknown, Parameters<typeof classify>[1], Want]>([
    ['a pattern that does not match is skipped', new Error('No cluster leader'), { patterns: [{ match: 'zzz', kind: 'dial' }, noLeader] }, ['unknown', true, false, true, undefined]],
    ['a pattern without a kind on an unrecognised error: unknown', new Error('No cluster leader'), { patterns: [noLeader] }, ['unknown', true, false, true, undefined]],
    ['a pattern decides over what the error wraps', new Error('No cluster leader', { cause: sys('ECONNRESET', 'read') }), { patterns: [noLeader] }, ['unknown', true, false, true, undefined]],
    ['matched in grpc details only', grpcErr(14, 'No cluster leader', 'upstream failed'), { patterns: [noLeader] }, ['application', true, false, true, 'UNAVAILABLE']],
    ['matched in the message only', grpcErr(14, 'draining', 'No cluster leader'), { patterns: [noLeader] }, ['application', true, false, true, 'UNAVAILABLE']],
    ['a pattern without a kind keeps what the error said', goaway(), { patterns: [{ match: 'ERR_HTTP2', transient: false }] }, ['connection', true, false, false, 'ERR_HTTP2_GOAWAY_SESSION']],
    ['...including a dead connection', sys('ECONNRESET', 'read'), { patterns: [{ match: 'ECONNRESET', code: 'RESET' }] }, ['connection', false, true, true, 'RESET']],
    [
      'a kind of its own starts from that kind, keeping the code',
      coded('ERR_HTTP2_INVALID_STREAM', 'The stream has been destroyed'),
      { patterns: [{ match: 'destroyed', kind: 'connection' }] },
      ['connection', false, true, true, 'ERR_HTTP2_INVALID_STREAM'],
    ],
    ['a kind on an error with a numeric code', Object.assign(new Error('zzz'), { code: 99 }), { patterns: [{ match: 'zzz', kind: 'connection' }] }, ['connection', false, true, true, undefined]],
    ['a kind on an error with a string code', coded('EWEIRD', 'zzz'), { patterns: [{ match: 'zzz', kind: 'timeout' }] }, ['timeout', false, false, true, 'EWEIRD']],
    ['a RegExp with only the g flag', new Error('raft: leadership lost'), { patterns: [{ match: /leadership lost/g, kind: 'connection', connectionDead: false }] }, ['connection', false, false, true, undefined]],
  ])('%s', (_name, err, options, want) => {
    // Twice: a RegExp with g or y must not remember where it stopped.
    expectClassified(err, want, options);
    expectClassified(err, want, options);
  });

  it('a RegExp without g or y is used as given: a subclass that throws matches nothing, and the next pattern is tried', () => {
    class Hostile extends RegExp {
      override exec(): never {
        throw new Error('hostile');
      }
    }
    const err = new Error('No cluster leader');
    expectClassified(err, unknown(undefined), { patterns: [{ match: new Hostile('No'), transient: true }] });
    expectClassified(err, ['unknown', true, false, true, undefined], { patterns: [{ match: new Hostile('No'), kind: 'dial' }, noLeader] });
  });

  it('per-call patterns come before registered ones', () => {
    const off = registerClassifier({ patterns: [{ match: 'leader', kind: 'dial' }] });
    try {
      expect(classify(new Error('No cluster leader')).kind).toBe('dial');
      expect(classify(new Error('No cluster leader'), { patterns: [{ match: 'cluster', kind: 'timeout' }] }).kind).toBe('timeout');
    } finally {
      off();
    }
  });
});

describe('classify walk: hooks', () => {
  afterEach(() => vi.restoreAllMocks());

  const over = (err: unknown, hook: ClassifyHook): Classification => classify(err, { hook });

  it.each<[string, unknown, ReturnType<ClassifyHook>, Want]>([
    ['null changes nothing', sys('ECONNRESET', 'read'), null as never, dead('ECONNRESET')],
    ['a string changes nothing', sys('ECONNRESET', 'read'), 'dial' as never, dead('ECONNRESET')],
    ['a number changes nothing', sys('ECONNRESET', 'read'), 42 as never, dead('ECONNRESET')],
    ['nothing changes nothing', sys('ECONNRESET', 'read'), undefined, dead('ECONNRESET')],
    ['notSent', sys('ECONNRESET', 'read'), { notSent: true }, ['connection', true, true, true, 'ECONNRESET']],
    ['notSent that is no boolean is ignored', sys('ECONNRESET', 'read'), { notSent: 'yes' as never }, dead('ECONNRESET')],
    ['transient', new Error('x'), { transient: true }, ['unknown', false, false, true, undefined]],
    ['transient that is no boolean is ignored', sys('ECONNRESET', 'read'), { transient: 0 as never }, dead('ECONNRESET')],
    ['connectionDead', sys('ECONNRESET', 'read'), { connectionDead: false }, ['connection', false, false, true, 'ECONNRESET']],
    ['connectionDead that is no boolean is ignored', sys('ECONNRESET', 'read'), { connectionDead: 'no' as never }, dead('ECONNRESET')],
    ['code', sys('ECONNRESET', 'read'), { code: 'MINE' }, dead('MINE')],
    ['code set to undefined clears it', sys('ECONNRESET', 'read'), { code: undefined }, dead(undefined)],
    ['code left out stays', sys('ECONNRESET', 'read'), {}, dead('ECONNRESET')],
    ['code that is no string is ignored', sys('ECONNRESET', 'read'), { code: 5 as never }, dead('ECONNRESET')],
    ['kind alone: an unrecognised error made a connection failure is not dead', new Error('x'), { kind: 'connection' }, ['connection', false, false, false, undefined]],
    ['kind alone: a timeout made a connection failure is not dead', sys('ETIMEDOUT', 'read'), { kind: 'connection' }, ['connection', false, false, true, 'ETIMEDOUT']],
    ['kind cancelled is never transient', sys('ECONNRESET', 'read'), { kind: 'cancelled', transient: true }, ['cancelled', false, false, false, 'ECONNRESET']],
    ['kind refused is never transient and never sent', sys('ECONNRESET', 'read'), { kind: 'refused' }, ['refused', true, false, false, 'ECONNRESET']],
  ])('a hook returning %s', (_name, err, returned, want) => {
    expectClassified(err, want, { hook: () => returned });
  });

  it('a hook sees the error and the classification so far, frozen', () => {
    const err = sys('ECONNREFUSED', 'connect');
    const seen: unknown[] = [];
    over(err, (e, c) => {
      seen.push(e, c, Object.isFrozen(c));
      return undefined;
    });
    expect(seen[0]).toBe(err);
    expect(seen[1]).toMatchObject({ kind: 'dial', notSent: true, connectionDead: false, transient: true, code: 'ECONNREFUSED', cause: err });
    expect(seen[2]).toBe(true);
  });

  it('registered hooks run, in order, before the per-call hook', () => {
    const order: string[] = [];
    const offA = registerClassifier({
      hook: (_e, c) => {
        order.push(`a:${c.code}`);
        return { code: 'A' };
      },
    });
    const offB = registerClassifier({
      hook: (_e, c) => {
        order.push(`b:${c.code}`);
        return { transient: false };
      },
    });
    try {
      const c = over(sys('ECONNRESET', 'read'), (_e, so) => {
        order.push(`call:${so.code}:${so.transient}`);
        return undefined;
      });
      expect(order).toEqual(['a:ECONNRESET', 'b:A', 'call:A:false']);
      expect(c).toMatchObject({ kind: 'connection', code: 'A', transient: false });
    } finally {
      offA();
      offB();
    }
  });

  it('a hook that throws is reported once, by name of the problem', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const hook = (): never => {
      throw new Error('hook bug');
    };
    for (let i = 0; i < 2; i++) expectClassified(sys('ECONNRESET', 'read'), dead('ECONNRESET'), { hook });
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toBe('dialguard: a classify hook threw and was ignored: Error: hook bug');
  });

  it.each([
    ['a getter that throws', () => ({ notSent: true, get kind(): never { throw new Error('getter bug'); } })],
    ['a Proxy whose get trap throws', () => new Proxy({}, { get: () => { throw new Error('trap bug'); } })],
    ['a Proxy whose has trap throws', () => new Proxy({ code: undefined }, { has: () => { throw new Error('has bug'); } })],
  ])('a hook answering with %s is a hook that threw: ignored, reported once, classify never throws', (_name, answer) => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const hook = answer as () => object;
    // Was: the answer read outside the guard, so classify() threw (an adapter calling it in a
    // callback then left an unhandled rejection, or a call that never settled).
    for (let i = 0; i < 2; i++) expectClassified(sys('ECONNRESET', 'read'), dead('ECONNRESET'), { hook });
    const off = registerClassifier({ hook });
    try {
      expectClassified(sys('ECONNRESET', 'read'), dead('ECONNRESET'));
    } finally {
      off();
    }
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toMatch(/^dialguard: a classify hook threw and was ignored: Error: (getter|trap|has) bug$/);
  });
});

describe('classify walk: registration', () => {
  it('removing a registration twice removes nothing else', () => {
    const offA = registerClassifier({ patterns: [{ match: 'alpha', kind: 'dial' }] });
    const offB = registerClassifier({ patterns: [{ match: 'beta', kind: 'timeout' }] });
    try {
      offA();
      offA();
      expect(classify(new Error('alpha')).kind).toBe('unknown');
      expect(classify(new Error('beta')).kind).toBe('timeout');
    } finally {
      offB();
    }
    expect(classify(new Error('beta')).kind).toBe('unknown');
  });

  it('a registration keeps its own copy of the patterns', () => {
    const patterns = [{ match: 'alpha', kind: 'dial' as const }];
    const off = registerClassifier({ patterns });
    try {
      patterns.length = 0;
      expect(classify(new Error('alpha')).kind).toBe('dial');
    } finally {
      off();
    }
  });
});

describe("classify walk: the caller's signal", () => {
  it.each<[string, unknown, Want]>([
    ['a reason without a code', { why: 'navigated away' }, ['cancelled', false, false, false, 'ABORT_ERR']],
    ['a reason with a code keeps it', coded('EBYE', 'bye'), ['cancelled', false, false, false, 'EBYE']],
    ['a reason with a numeric code', { code: 14, details: 'Connection dropped' }, ['cancelled', false, false, false, 'ABORT_ERR']],
    ['a reason that is a string', 'user left', ['cancelled', false, false, false, 'ABORT_ERR']],
  ])('%s is cancelled', (_name, reason, want) => {
    const c = new AbortController();
    c.abort(reason);
    expectClassified(reason, want, { signal: c.signal });
    expectClassified(new Error('fetch failed', { cause: reason }), want, { signal: c.signal });
  });

  it('an abort without a reason: its AbortError is cancelled', () => {
    const c = new AbortController();
    c.abort();
    expectClassified(c.signal.reason, ['cancelled', false, false, false, 'ABORT_ERR'], { signal: c.signal });
  });

  it('a signal that has not aborted changes nothing', () => {
    const c = new AbortController();
    expectClassified({ code: 14, details: 'Connection dropped' }, dead('UNAVAILABLE'), { signal: c.signal });
    expectClassified(new Error('x'), unknown(undefined), { signal: c.signal });
  });
});

describe('classify walk: options are checked, naming the bad one', () => {
  it.each<[string, () => unknown, string]>([
    ['options null', () => classify(new Error('x'), null as never), 'classify options must be an object, got null'],
    ['options a number', () => classify(new Error('x'), 5 as never), 'classify options must be an object, got 5'],
    ['patterns not an array', () => classify(new Error('x'), { patterns: 'EOF' as never }), 'classify options.patterns must be an array, got "EOF"'],
    ['a pattern that is null', () => classify(new Error('x'), { patterns: [null as never] }), 'classify options.patterns[0] must be an object, got null'],
    ['a pattern that is a string', () => classify(new Error('x'), { patterns: [{ match: 'a' }, 'EOF' as never] }), 'classify options.patterns[1] must be an object, got "EOF"'],
    ['registerClassifier given null', () => registerClassifier(null as never), 'registerClassifier must be an object, got null'],
    ['registerClassifier given bad patterns', () => registerClassifier({ patterns: 'x' as never }), 'registerClassifier.patterns must be an array, got "x"'],
    ['registerClassifier given a bad hook', () => registerClassifier({ hook: 1 as never }), 'registerClassifier.hook must be a function, got 1'],
  ])('%s', (_name, call, message) => {
    expect(call).toThrow(new TypeError(message));
  });
});
