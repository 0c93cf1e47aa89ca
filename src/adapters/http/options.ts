/**
 * Options the guarded agents add to Node's agent options, checked once at construction.
 *
 * @module
 */
import { type Clock, checkedClock } from '../../core/clock.js';
import { checkDuration, opt, show } from '../../core/validate.js';
import { DEFAULT_CONNECT_TIMEOUT, breakerOption } from '../../guard/dial.js';
import { HostBreaker } from '../../guard/host-breaker.js';

/** dialguard's options of a guarded agent; Node's own agent options sit beside them. */
export interface AgentGuardOptions {
  /**
   * Bound on one dial, DNS lookup, TCP connect and (https) TLS handshake together, ms. Default
   * 2 500 (dialguard's `DEFAULT_CONNECT_TIMEOUT`): never fires on a live host, while a dead one
   * costs 2.5 s instead of the kernel's ~130 s of SYN retries (Node's agent sets no connect timeout).
   */
  connectTimeout?: number;
  /**
   * The breaker every dial asks and reports to. Default the process-wide `sharedBreaker()`, so
   * every client in the process (undici, http2, grpc, these agents) learns from every other's
   * dials; `null` dials without one (dials are still bounded).
   */
  breaker?: HostBreaker | null;
  /** Time source for the dial timeout. Default the system clock (tests inject a manual one). */
  clock?: Clock;
}

/** The checked options with their defaults. */
export interface AgentGuardSettings {
  timeout: number;
  breaker: HostBreaker | null;
  clock: Clock;
}

/** The keys of {@link AgentGuardOptions}: taken out before Node's agent sees the options. */
export const GUARD_KEYS = ['connectTimeout', 'breaker', 'clock'] as const;

/**
 * Checks the guard's options.
 *
 * @throws TypeError/RangeError naming the option and the bad value.
 */
export function guardSettings(options: AgentGuardOptions): AgentGuardSettings {
  const breaker = breakerOption(options.breaker);
  const clock = checkedClock(options.clock);
  return { timeout: checkDuration('connectTimeout', opt(options.connectTimeout, DEFAULT_CONNECT_TIMEOUT), 1), breaker, clock };
}

/** Splits `options` into the guard's and Node's (a copy without the guard's keys). */
export function splitOptions<T extends AgentGuardOptions>(options: T | undefined): [AgentGuardSettings, Omit<T, keyof AgentGuardOptions>] {
  if (options !== undefined && (typeof options !== 'object' || options === null)) throw new TypeError(`options must be an object, got ${show(options)}`);
  const all = { ...(options ?? {}) } as T;
  const settings = guardSettings(all);
  for (const key of GUARD_KEYS) delete all[key];
  return [settings, all];
}
