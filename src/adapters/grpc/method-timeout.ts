/**
 * The `timeout` of a `grpc.service_config` method config: grpc-js makes it the call's deadline
 * (the earlier of the two, from when the call starts), so the guard must too. Unread, a call's
 * retries and its wait for a channel ran past it (an outside review: a 1 s config timeout, a
 * handler sleeping 3 s, an idempotent method: 4.5 s and 3 runs where grpc-js ends at 1 s with
 * one; a silent peer: UNAVAILABLE at 9 s where grpc-js says DEADLINE_EXCEEDED at 1 s).
 *
 * Read as grpc-js reads it (`service-config.js`, `resolving-load-balancer.js`): the most
 * specific name wins (service and method, then service, then an empty name), a string timeout
 * is `seconds[.fraction]s` with the fraction taken as a whole number of nanoseconds (so grpc-js
 * reads `"0.3s"` as 3 ns: kept, so the guard ends such a call when grpc-js would), an object is
 * `{ seconds, nanos }`. A config that does not parse is grpc-js's to refuse.
 *
 * @module
 */
import { methodConfigs } from './options.js';

/** Milliseconds a method's calls may take by the service config, or undefined for no bound. */
export type MethodTimeout = (method: string) => number | undefined;

interface Name {
  service?: unknown;
  method?: unknown;
}

interface MethodConfig {
  name?: unknown;
  timeout?: unknown;
}

const DURATION = /^\d+(\.\d{1,9})?s$/;

/** The config's timeout in ms as grpc-js computes it; undefined when there is none it takes. */
function timeoutMs(timeout: unknown): number | undefined {
  let seconds: number;
  let nanos: number;
  if (typeof timeout === 'object' && timeout !== null) {
    const t = timeout as { seconds?: unknown; nanos?: unknown };
    if (typeof t.seconds !== 'number' || typeof t.nanos !== 'number') return undefined;
    seconds = t.seconds;
    nanos = t.nanos;
  } else if (typeof timeout === 'string' && DURATION.test(timeout)) {
    const [whole, fraction] = timeout.slice(0, -1).split('.');
    seconds = Number(whole) | 0;
    nanos = Number(fraction ?? 0) | 0;
  } else {
    return undefined;
  }
  // grpc-js arms no timer for a zero timeout (`if (config.methodConfig.timeout)` is an object: it does).
  return Math.floor(seconds * 1_000 + nanos / 1_000_000);
}

/**
 * The method timeouts of channel options' `grpc.service_config`, or undefined when it sets none
 * (the usual case: nothing is looked up per call).
 */
export function methodTimeouts(options: Readonly<Record<string, unknown>>): MethodTimeout | undefined {
  const methods = methodConfigs(options);
  if (methods === undefined || !methods.some((m) => 'timeout' in m)) return undefined;
  const configs = methods.filter((m): m is MethodConfig => Array.isArray((m as MethodConfig).name));
  const found = new Map<string, number | undefined>();
  return (path) => {
    if (found.has(path)) return found.get(path);
    const [service = '', method = ''] = path.split('/').filter((part) => part.length > 0);
    const names = (m: MethodConfig): Name[] => (m.name as unknown[]).filter((n): n is Name => typeof n === 'object' && n !== null);
    const match =
      configs.find((m) => names(m).some((n) => n.service === service && n.method === method)) ??
      configs.find((m) => names(m).some((n) => n.service === service && !n.method)) ??
      configs.find((m) => names(m).some((n) => !n.service && !n.method));
    const ms = match === undefined ? undefined : timeoutMs(match.timeout);
    if (found.size < 100) found.set(path, ms); // grpc-js caches 100 methods' configs too
    return ms;
  };
}
