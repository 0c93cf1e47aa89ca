import { describe, expect, it, vi } from 'vitest';
import { UNKNOWN_OPTION, checkOptionNames, optionNames } from '../../src/core/option-names.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { Http2Client } from '../../src/http2/client.js';
import { GuardedAgent, guardedConnector, guardedRetry } from '../../src/adapters/undici/index.js';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import { RedisGuard } from '../../src/adapters/redis/index.js';

// A misspelt option is otherwise ignored without a word, and the default it meant to change
// stays: `conectTimeout: 500` left a dead host costing the 10 s default. Each constructor warns,
// once per name, naming the option it most likely meant.

/** The DialguardWarnings `body` emits (process warnings arrive on a later turn). */
async function warningsOf(body: () => void, quiet = false): Promise<Array<{ message: string; code: unknown; name: string }>> {
  const seen: Array<{ message: string; code: unknown; name: string }> = [];
  const listener = (w: Error & { code?: unknown }): void => {
    if (w.name === 'DialguardWarning') seen.push({ message: w.message, code: w.code, name: w.name });
  };
  // quiet: Node's own listener (which prints each warning) is off meanwhile: a thousand lines in the log say nothing.
  const others = quiet ? process.listeners('warning') : [];
  for (const other of others) process.off('warning', other);
  process.on('warning', listener);
  try {
    body();
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
    for (const other of others) process.on('warning', other);
  }
  return seen;
}

let serial = 0;
/** A name no other test used: each where + name pair warns once per process. */
const fresh = (base: string): string => `${base}${++serial}`;

describe('checkOptionNames', () => {
  const known = optionNames<{ connectTimeout?: number; breaker?: unknown; failureThreshold?: number; clock?: unknown }>({
    connectTimeout: true,
    breaker: true,
    failureThreshold: true,
    clock: true,
  });

  it('says nothing of known names, or of options that are not an object', async () => {
    const seen = await warningsOf(() => {
      checkOptionNames('Quiet', { connectTimeout: 1, breaker: null, clock: undefined }, known);
      checkOptionNames('Quiet', { conectTimeout: undefined }, known); // undefined is unset, as for every option (a spread config)
      checkOptionNames('Quiet', undefined, known);
      checkOptionNames('Quiet', null, known);
      checkOptionNames('Quiet', 'text', known);
      checkOptionNames('Quiet', {}, known);
    });
    expect(seen).toEqual([]);
  });

  it('warns of an unknown name, with its code, and names the option it is nearest to', async () => {
    const where = fresh('Spelling');
    const seen = await warningsOf(() => checkOptionNames(where, { conectTimeout: 500 }, known));
    expect(seen).toEqual([{ name: 'DialguardWarning', code: 'DIALGUARD_UNKNOWN_OPTION', message: `dialguard: ${where}: unknown option 'conectTimeout' is ignored (did you mean 'connectTimeout'?)` }]);
    expect(UNKNOWN_OPTION).toBe('DIALGUARD_UNKNOWN_OPTION');
  });

  it('finds a name in another case, and one 3 edits off only when it is long', async () => {
    const where = fresh('Near');
    const seen = await warningsOf(() => {
      checkOptionNames(where, { ConnectTimeout: 1 }, known); // case only
      checkOptionNames(where, { failurThrehld: 1 }, known); // 3 edits, 13 letters: near enough
      checkOptionNames(where, { conectTimoat: 1 }, known); // 3 edits, 12 letters: near enough
      checkOptionNames(where, { failThreshold: 1 }, known); // 3 letters missing, 13 letters: near enough
      checkOptionNames(where, { clockwise: 1 }, known); // 4 edits: too far
      checkOptionNames(where, { clk: 1 }, known); // 2 edits from 'clock': near
      checkOptionNames(where, { brkr: 1 }, known); // 3 edits from 'breaker', a short name: too far
      checkOptionNames(where, { somethingElse: 1 }, known);
    });
    expect(seen.map((w) => w.message)).toEqual([
      `dialguard: ${where}: unknown option 'ConnectTimeout' is ignored (did you mean 'connectTimeout'?)`,
      `dialguard: ${where}: unknown option 'failurThrehld' is ignored (did you mean 'failureThreshold'?)`,
      `dialguard: ${where}: unknown option 'conectTimoat' is ignored (did you mean 'connectTimeout'?)`,
      `dialguard: ${where}: unknown option 'failThreshold' is ignored (did you mean 'failureThreshold'?)`,
      `dialguard: ${where}: unknown option 'clockwise' is ignored`,
      `dialguard: ${where}: unknown option 'clk' is ignored (did you mean 'clock'?)`,
      `dialguard: ${where}: unknown option 'brkr' is ignored`,
      `dialguard: ${where}: unknown option 'somethingElse' is ignored`,
    ]);
  });

  it('names the nearest of several near names', async () => {
    const where = fresh('Nearest');
    const names = optionNames<{ abcd?: 1; abce?: 1; wxyz?: 1 }>({ abcd: true, abce: true, wxyz: true });
    const seen = await warningsOf(() => {
      checkOptionNames(where, { abcdx: 1 }, names); // 1 edit from abcd, 2 from abce
      checkOptionNames(where, { abcf: 1 }, names); // 1 edit from each: the first in the list
      checkOptionNames(where, { wxyzab: 1 }, names); // 2 edits from wxyz, the last in the list
    });
    expect(seen.map((w) => w.message)).toEqual([
      `dialguard: ${where}: unknown option 'abcdx' is ignored (did you mean 'abcd'?)`,
      `dialguard: ${where}: unknown option 'abcf' is ignored (did you mean 'abcd'?)`,
      `dialguard: ${where}: unknown option 'wxyzab' is ignored (did you mean 'wxyz'?)`,
    ]);
  });

  it('warns once per constructor and name, however often it is called', async () => {
    const where = fresh('Often');
    const other = fresh('Other');
    const seen = await warningsOf(() => {
      for (let i = 0; i < 100; i++) checkOptionNames(where, { bogus: i, alsoBogus: i }, known);
      checkOptionNames(other, { bogus: 1 }, known);
    });
    expect(seen.map((w) => w.message)).toEqual([
      `dialguard: ${where}: unknown option 'bogus' is ignored`,
      `dialguard: ${where}: unknown option 'alsoBogus' is ignored`,
      `dialguard: ${other}: unknown option 'bogus' is ignored`,
    ]);
  });

});

describe('every constructor and factory warns of a misspelt option, and of no right one', () => {
  const connector = { connect: async () => ({}), close: () => {} };
  const cases: Array<[string, (extra: Record<string, unknown>) => { close?: () => unknown; destroy?: () => unknown } | void, string, string]> = [
    ['HostBreaker', (x) => void new HostBreaker({ failureThreshold: 3, capacity: 16, ...x }), 'failureTreshold', 'failureThreshold'],
    ['ConnectionPool', (x) => new ConnectionPool({ connector, connectTimeout: 100, ...x }), 'conectTimeout', 'connectTimeout'],
    ['RetryBudget', (x) => void new RetryBudget({ ttl: 1_000, ...x }), 'percentCanRety', 'percentCanRetry'],
    ['Http2Client', (x) => new Http2Client({ connectTimeout: 100, breaker: null, ...x }), 'requestTimout', 'requestTimeout'],
    // Was silent (an outside review): maxAttemps: 1 meant one send, the client sent 3 times.
    ['Http2Client retry', (x) => new Http2Client({ connectTimeout: 100, breaker: null, retry: { maxAttempts: 2, ...x } }), 'maxAttemps', 'maxAttempts'],
    ['GuardedAgent', (x) => new GuardedAgent({ timeout: 1_000, connectTimeout: 100, breaker: null, undici: {}, ...x }), 'connectTimout', 'connectTimeout'],
    ['guardedConnector', (x) => void guardedConnector({ connectTimeout: 100, breaker: null, ...x }), 'maxCachedSesions', 'maxCachedSessions'],
    ['guardedRetry', (x) => void guardedRetry({ maxAttempts: 2, ...x }), 'maxAttemps', 'maxAttempts'],
    ['GrpcGuard', (x) => new GrpcGuard({ connectTimeout: 100, breaker: null, ...x }), 'keepAliveIntervall', 'keepAliveInterval'],
    ['GrpcGuard retry', (x) => new GrpcGuard({ breaker: null, retry: { maxAttempts: 2, ...x } }), 'maxAtempts', 'maxAttempts'],
    ['RedisGuard', (x) => void new RedisGuard({ breaker: new HostBreaker(), connectTimeout: 100, ...x }), 'maxBackof', 'maxBackoff'],
  ];

  it.each(cases)('%s', async (where, make, typo, meant) => {
    const made: Array<{ close?: () => unknown; destroy?: () => unknown } | void> = [];
    const quiet = await warningsOf(() => made.push(make({})));
    expect(quiet).toEqual([]);
    const seen = await warningsOf(() => {
      made.push(make({ [typo]: 1 }));
      made.push(make({ [typo]: 2 })); // a second one: no second warning
    });
    for (const m of made) await (m?.destroy?.() ?? m?.close?.());
    expect(seen.map((w) => w.message)).toEqual([`dialguard: ${where}: unknown option '${typo}' is ignored (did you mean '${meant}'?)`]);
  });

  it('an undici option at the top level of a GuardedAgent is its TypeError alone, not a warning as well', async () => {
    const seen = await warningsOf(() => {
      expect(() => new GuardedAgent({ connections: 4 } as never)).toThrow(TypeError);
    });
    expect(seen).toEqual([]);
  });

  it('a TLS option at the top level of an Http2Client is its TypeError alone', async () => {
    const seen = await warningsOf(() => {
      expect(() => new Http2Client({ servername: 'x' } as never)).toThrow(TypeError);
    });
    expect(seen).toEqual([]);
  });
});

// On a fresh copy of the module: it fills the set of pairs warned about.
describe('the pairs remembered', () => {
  const known = optionNames<{ clock?: unknown }>({ clock: true });

  it('stops remembering (and warning) past 1 024 pairs: a stream of generated names cannot grow it', async () => {
    vi.resetModules(); // a fresh module: its set holds nothing that earlier tests left
    const fresh = (await import('../../src/core/option-names.js')) as typeof import('../../src/core/option-names.js');
    const seen = await warningsOf(() => {
      for (let i = 0; i < 1_100; i++) fresh.checkOptionNames(`Stream${i}`, { bogus: 1 }, known);
    }, true);
    expect(seen.length).toBe(1_024);
    const after = await warningsOf(() => fresh.checkOptionNames('Late', { bogus: 1 }, known), true);
    expect(after).toEqual([]);
  });
});
