/**
 * Hostile input, as properties: `classify` fed arbitrary throwables (cyclic and very deep cause
 * chains, getters and proxies that throw, huge messages, non-Error values) must return a
 * classification and never throw or hang; every public options object fed arbitrary values must
 * either be accepted or rejected with a TypeError/RangeError that names the offending option.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { constant, decorrelatedJitter, exponential, fullJitter, proportionalJitter } from '../../src/core/backoff.js';
import { classify } from '../../src/core/classify.js';
import { dial } from '../../src/guard/dial.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { logStateChanges } from '../../src/observe/log-state-changes.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { RetryBudget } from '../../src/retry/budget.js';
import { retry } from '../../src/retry/retry.js';
import { ServerSet } from '../../src/retry/server-set.js';
import { replay, runs } from './replay.js';

const KINDS = new Set(['refused', 'dial', 'connection', 'timeout', 'stream', 'cancelled', 'application', 'unknown']);

/** Errors and error-likes with awkward shapes, built from arbitrary parts. */
const throwable = fc.letrec((tie) => ({
  leaf: fc.oneof(
    fc.anything(),
    fc.string({ maxLength: 200 }).map((m) => new Error(m)),
    fc.constantFrom('ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'UND_ERR_SOCKET', 'ERR_HTTP2_STREAM_ERROR', 14, 4, 'DIALGUARD_HOST_UNAVAILABLE').map((code) =>
      Object.assign(new Error(`failed: ${String(code)}`), { code }),
    ),
    fc.constantFrom('rpc error: EOF', 'Unexpected response code: 500 (rpc error: rpc error: EOF)', 'session shutdown', 'x'.repeat(1 << 20)).map((m) => new Error(m)),
  ),
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tie('leaf'),
    fc.tuple(fc.string({ maxLength: 40 }), tie('node')).map(([m, cause]) => new Error(m, { cause })),
    fc.array(tie('node'), { maxLength: 4 }).map((errors) => new AggregateError(errors, 'many')),
    fc.record({ message: fc.anything(), code: fc.anything(), details: fc.anything(), cause: tie('node') }),
  ),
}));

/** Wraps a throwable in the shapes that break naive walkers. */
function nasty(base: unknown, how: number): unknown {
  switch (how) {
    case 0: {
      const a = new Error('a');
      const b = new Error('b', { cause: a });
      (a as { cause?: unknown }).cause = b; // a cycle
      return new Error('top', { cause: b });
    }
    case 1: {
      let e: unknown = base;
      for (let i = 0; i < 5_000; i++) e = { message: `level ${i}`, cause: e }; // far past any walk bound
      return e;
    }
    case 2:
      return Object.defineProperty(new Error('getter'), 'cause', {
        get() {
          throw new Error('cause getter throws');
        },
      });
    case 3:
      return new Proxy(
        {},
        {
          get() {
            throw new Error('proxy get');
          },
          getPrototypeOf() {
            throw new Error('proxy proto');
          },
          has() {
            throw new Error('proxy has');
          },
        },
      );
    case 4:
      return Object.assign(Object.create(null) as object, { message: base, cause: base });
    default:
      return base;
  }
}

describe('classify, hostile input', () => {
  it('returns a classification for anything thrown, never throwing', () => {
    fc.assert(
      fc.property(throwable.node, fc.nat(6), (base, how) => {
        const c = classify(nasty(base, how));
        expect(KINDS.has(c.kind)).toBe(true);
        expect(typeof c.notSent).toBe('boolean');
        expect(typeof c.connectionDead).toBe('boolean');
        expect(c.connectionDead && c.kind !== 'connection').toBe(false);
      }),
      { numRuns: runs(1_000), ...replay() },
    );
  });
});

/** An arbitrary value for one option: anything, with the numbers that break naive checks. */
const value = fc.oneof(
  fc.anything(),
  fc.constantFrom(0, -1, -0, 0.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, '10', null, true, [], {}, () => 1),
);

function optionsOf(keys: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(Object.fromEntries(keys.map((k) => [k, value])), { requiredKeys: [] });
}

/** The call either works, or fails with a TypeError/RangeError naming one of its options. */
function namesTheOption(err: unknown, keys: readonly string[]): void {
  expect(err instanceof TypeError || err instanceof RangeError, `threw ${String(err)}`).toBe(true);
  const named = keys.some((k) => (err as Error).message.includes(k));
  expect(named, `"${(err as Error).message}" names none of ${keys.join(', ')}`).toBe(true);
}

function checkSync(keys: readonly string[], make: (options: Record<string, unknown>) => unknown): void {
  fc.assert(
    fc.property(optionsOf(keys), (options) => {
      try {
        make(options);
      } catch (err) {
        namesTheOption(err, keys);
      }
    }),
    { numRuns: runs(400), ...replay() },
  );
}

async function checkAsync(keys: readonly string[], call: (options: Record<string, unknown>) => Promise<unknown>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(optionsOf(keys), async (options) => {
      try {
        await call(options);
      } catch (err) {
        namesTheOption(err, keys);
      }
    }),
    { numRuns: runs(300), ...replay() },
  );
}

const noopConnector = { connect: async () => ({}), close: () => {} };

describe('options, hostile input: accepted, or rejected naming the option', () => {
  it('HostBreaker', () =>
    checkSync(['failureThreshold', 'openDuration', 'probeTimeout', 'idleRetention', 'capacity', 'sweepInterval', 'random'], (o) => new HostBreaker(o)));

  it('ConnectionPool', () =>
    checkSync(['connectTimeout', 'idleTimeout', 'sweepInterval', 'retiredRetries', 'closeTimeout', 'classify', 'hostOf'], (o) => new ConnectionPool({ connector: noopConnector, breaker: null, ...o })));

  it('RetryBudget', () => checkSync(['ttl', 'percentCanRetry', 'minRetriesPerSec', 'slots'], (o) => new RetryBudget(o)));

  it('ServerSet', () => checkSync(['recordOutcomes', 'panic', 'key'], (o) => new ServerSet(['a:1', 'b:2'], o)));

  it('Http2Client', () =>
    checkSync(['connectTimeout', 'keepAliveInterval', 'keepAliveTimeout', 'requestTimeout', 'idleTimeout', 'sweepInterval', 'retiredRetries', 'closeTimeout'], (o) => {
      void new Http2Client({ breaker: null, ...o }).close();
    }));

  it('backoff schedules', () => {
    for (const make of [exponential, proportionalJitter, fullJitter, decorrelatedJitter]) {
      checkSync(['base', 'max', 'multiplier', 'jitter'], (o) => make(o as never));
    }
    expect(() => constant(-1)).toThrow(RangeError);
  });

  it('logStateChanges', () =>
    checkSync(['budgetInterval', 'now'], (o) => {
      logStateChanges({ warn: () => {}, info: () => {} }, o)();
    }));

  it('dial', () => checkAsync(['timeout'], (o) => dial('h:1', async () => 1, { breaker: null, ...o })));

  it('retry', () =>
    checkAsync(['timeout', 'deadline', 'maxAttempts', 'idempotent', 'retryWindow', 'backoff', 'retryable', 'random', 'onResult'], (o) =>
      retry(async () => 1, { budget: null, ...o }),
    ));
});
