/**
 * Small tools for driving retry loops on a ManualClock: errors shaped like the real ones (their
 * real capture is in test/core/classify-real.test.ts), operations that take clock time, a seeded
 * random source, and a promise whose state can be read without awaiting it.
 */
import type { Clock } from '../../src/core/clock.js';

/** A Node system error, as net/undici raise it. */
export function sysError(code: string, syscall: string): Error {
  return Object.assign(new Error(`${syscall} ${code}`), { code, syscall });
}

/** Refused connect: never sent, safe to retry for any call. */
export const refusedConnect = (): Error => sysError('ECONNREFUSED', 'connect');
/** Reset under an established request: maybe sent. */
export const resetMidRequest = (): Error => sysError('ECONNRESET', 'read');

/** Resolves with `value` (or rejects with `error`) after `ms` on `clock`. */
export function after<T>(clock: Clock, ms: number, outcome: { value?: T; error?: unknown }): Promise<T> {
  return new Promise((resolve, reject) => {
    clock.setTimeout(() => ('error' in outcome ? reject(outcome.error) : resolve(outcome.value as T)), ms);
  });
}

/** A promise that never settles unless its signal aborts (then it rejects with the reason). */
export function hang(signal?: AbortSignal): Promise<never> {
  return new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
}

/** A promise's state, readable synchronously. */
export interface Tracked<T> {
  readonly state: 'pending' | 'resolved' | 'rejected';
  readonly value: T | undefined;
  readonly error: unknown;
  /** `clock.now()` when it settled. */
  readonly at: number | undefined;
}

/** Watches `p` (marking its rejection handled) so a test can read its state at any time. */
export function track<T>(p: Promise<T>, clock: Clock): Tracked<T> {
  const t: { state: Tracked<T>['state']; value: T | undefined; error: unknown; at: number | undefined } = {
    state: 'pending',
    value: undefined,
    error: undefined,
    at: undefined,
  };
  p.then(
    (value) => Object.assign(t, { state: 'resolved', value, at: clock.now() }),
    (error: unknown) => Object.assign(t, { state: 'rejected', error, at: clock.now() }),
  );
  return t;
}

/** A seeded uniform [0, 1) source, so jitter is random yet repeatable. */
export { seededRandom as seeded } from '../../src/testing/seeded-random.js';
