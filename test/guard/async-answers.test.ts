/**
 * User predicates and hooks that answer with something other than what they were asked for,
 * found by an outside review of odd options across the adapters:
 * - an `async` predicate or hook (TypeScript accepts `async (m) => ...` where a boolean is asked
 *   only through `any`, plain JavaScript always) whose promise rejects ended the process as an
 *   unhandled rejection, where the same code throwing synchronously is a warning: `retryable`
 *   (retry(), GuardedAgent), classify hooks (every adapter), a pool's `classify` option;
 * - GrpcGuard's `idempotent` read any truthy answer as a yes: an `async` predicate (a promise)
 *   or the string 'false' made every method idempotent, and a server ran a non-idempotent
 *   handler twice; now only `true` is a yes, anything else a no, reported once;
 * - a GuardedAgent's connectTimeout between 0 and 1 was taken, and every request then failed
 *   with the dial's RangeError; it is refused at construction, as every other adapter does.
 *
 * Each test counts the process-level failures seen while it ran (none) and the warnings.
 */
import { describe, expect, it } from 'vitest';
import { grpcSettings } from '../../src/adapters/grpc/options.js';
import { GuardedAgent, guardedConnector } from '../../src/adapters/undici/index.js';
import { classify } from '../../src/core/classify.js';
import { classifySafely } from '../../src/pool/user-code.js';
import { retry } from '../../src/retry/retry.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { watching } from '../helpers/watching.js';

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' });
const notFound = (): Error => Object.assign(new Error('Not Found'), { statusCode: 404 });

describe('an async predicate or hook whose promise rejects is a warning, as a throw is', () => {
  it("retry()'s retryable: the default decision is kept, one warning for the rejection and one for the answer", async () => {
    const clock = new ManualClock();
    let attempts = 0;
    const retryable = async (): Promise<boolean> => {
      throw new Error('async predicate down');
    };
    const seen = await watching(async () => {
      const r = retry(
        () => {
          attempts++;
          throw notFound(); // the default: not retried
        },
        { clock, budget: null, backoff: () => 0, retryable: retryable as never },
      ).catch((e: unknown) => e);
      await clock.tick(0);
      expect(await r).toMatchObject({ statusCode: 404 });
    });
    expect(attempts).toBe(1);
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.filter((w) => w.includes('async predicate down'))).toHaveLength(1);
    expect(seen.warnings.filter((w) => w.includes('answer was ignored'))).toHaveLength(1);
  });

  it('a classify hook: the classification is the built-in one, the rejection one warning', async () => {
    const hook = async (): Promise<object> => {
      throw new Error('async hook down');
    };
    const seen = await watching(async () => {
      for (let i = 0; i < 3; i++) expect(classify(refused(), { hook: hook as never })).toMatchObject({ kind: 'dial', notSent: true });
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.filter((w) => w.includes('async hook down'))).toHaveLength(1);
    expect(seen.warnings.filter((w) => w.includes('hooks answer synchronously'))).toHaveLength(1);
  });

  it("a pool's classify option: nothing proven, the rejection one warning", async () => {
    const poolClassify = async (): Promise<object> => {
      throw new Error('async pool classify down');
    };
    const seen = await watching(async () => {
      for (let i = 0; i < 3; i++) expect(classifySafely(poolClassify as never, refused())).toEqual({ connectionDead: false, notSent: false });
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.filter((w) => w.includes('async pool classify down'))).toHaveLength(1);
  });
});

describe("GrpcGuard's idempotent: only true is a yes", () => {
  it.each([
    ['an async predicate (its promise)', async () => true],
    ["the string 'false'", () => 'false'],
    ['1', () => 1],
  ])('%s is a no, reported once', async (_name, predicate) => {
    const seen = await watching(async () => {
      const { idempotent } = grpcSettings({ idempotent: predicate as never });
      for (let i = 0; i < 3; i++) expect(idempotent('/svc.Orders/Create')).toBe(false);
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.filter((w) => w.includes('neither true nor false'))).toHaveLength(1);
  });

  it('true and false are kept; an async predicate that rejects is a warning, not a crash', async () => {
    const { idempotent } = grpcSettings({ idempotent: (m) => m.endsWith('/Get') });
    expect([idempotent('/svc.Orders/Get'), idempotent('/svc.Orders/Create')]).toEqual([true, false]);
    const seen = await watching(async () => {
      const rejecting = grpcSettings({
        idempotent: (async () => {
          throw new Error('async idempotent down');
        }) as never,
      });
      expect(rejecting.idempotent('/svc.Orders/Get')).toBe(false);
    });
    expect(seen.unhandled).toEqual([]);
    expect(seen.warnings.filter((w) => w.includes('async idempotent down'))).toHaveLength(1);
  });
});

describe("undici: a connectTimeout between 0 and 1 ms is refused where it is given", () => {
  it.each([
    ['GuardedAgent connectTimeout', () => new GuardedAgent({ connectTimeout: 0.5 })],
    ['GuardedAgent undici.connect.timeout', () => new GuardedAgent({ undici: { connect: { timeout: 0.5 } } })],
    ['guardedConnector connectTimeout', () => guardedConnector({ connectTimeout: 0.5 })],
  ])('%s 0.5: a RangeError naming it (was: every request failed later)', (_name, make) => {
    expect(make).toThrow(RangeError);
    expect(make).toThrow(/connectTimeout|timeout/);
  });

  it('0 (no limit) and 1 are taken', async () => {
    for (const t of [0, 1]) {
      const agent = new GuardedAgent({ connectTimeout: t });
      await agent.close();
    }
  });
});
