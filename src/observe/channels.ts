/**
 * Every `node:diagnostics_channel` dialguard publishes on, with its payload. A channel costs
 * nothing until someone subscribes: the publisher checks `hasSubscribers` first, as undici does.
 *
 * State changes (rare, fine to log): breaker opened / closed / probe granted / probe expired,
 * connection opened / retired / gone / closed, retry budget exhausted.
 * Per-call signals (for counters and histograms, never for logs): breaker refused, dial settled,
 * lookup settled (a name's DNS lookup: not a dial, never on the dial channel), retry scheduled,
 * retry settled, HTTP/2 request settled.
 *
 * @module
 */
import { containAnswer, warnOnce } from '../core/warn-once.js';
import { checkFunction, show } from '../core/validate.js';
import diagnosticsChannel from 'node:diagnostics_channel';
import type { ConnectionPoolEvents } from '../pool/connection-pool.js';
import type { DialEvents, LookupEvents } from '../guard/dial.js';
import type { HostBreakerEvents } from '../guard/host-breaker.js';
import type { Http2ClientEvents } from '../http2/client.js';
import type { RetryEvents } from '../retry/retry.js';
import { type Unsubscribe, unsubscriber } from '../core/events.js';

/** Channel name to payload type, for every channel dialguard publishes on. */
export interface DialguardChannels {
  'dialguard:breaker:opened': HostBreakerEvents['opened'];
  'dialguard:breaker:closed': HostBreakerEvents['closed'];
  'dialguard:breaker:probe-granted': HostBreakerEvents['probe-granted'];
  'dialguard:breaker:probe-expired': HostBreakerEvents['probe-expired'];
  'dialguard:breaker:refused': HostBreakerEvents['refused'];
  'dialguard:dial:settled': DialEvents['settled'];
  'dialguard:lookup:settled': LookupEvents['settled'];
  'dialguard:pool:opened': ConnectionPoolEvents['opened'];
  'dialguard:pool:retired': ConnectionPoolEvents['retired'];
  'dialguard:pool:gone': ConnectionPoolEvents['gone'];
  'dialguard:pool:closed': ConnectionPoolEvents['closed'];
  'dialguard:pool:resent': ConnectionPoolEvents['resent'];
  'dialguard:retry:scheduled': RetryEvents['scheduled'];
  'dialguard:retry:budget-exhausted': RetryEvents['budget-exhausted'];
  'dialguard:retry:settled': RetryEvents['settled'];
  'dialguard:http2:settled': Http2ClientEvents['settled'];
}

/** The names of every channel dialguard publishes on. */
export const CHANNELS = [
  'dialguard:breaker:opened',
  'dialguard:breaker:closed',
  'dialguard:breaker:probe-granted',
  'dialguard:breaker:probe-expired',
  'dialguard:breaker:refused',
  'dialguard:dial:settled',
  'dialguard:lookup:settled',
  'dialguard:pool:opened',
  'dialguard:pool:retired',
  'dialguard:pool:gone',
  'dialguard:pool:closed',
  'dialguard:pool:resent',
  'dialguard:retry:scheduled',
  'dialguard:retry:budget-exhausted',
  'dialguard:retry:settled',
  'dialguard:http2:settled',
] as const satisfies ReadonlyArray<keyof DialguardChannels>;

const KNOWN: ReadonlySet<string> = new Set(CHANNELS);

/**
 * Subscribes `listener` to one of dialguard's channels (every instance in the process publishes
 * there); returns the function that unsubscribes. A listener that throws, or whose promise rejects (an
 * `async` one), is isolated: its first error
 * becomes a process warning (once per listener: a refusal per call must not flood the log). (A throwing subscriber of `node:diagnostics_channel` itself is
 * rethrown by Node as an uncaught exception, which would crash the process from inside a dial.)
 */
export function subscribe<K extends keyof DialguardChannels>(name: K, listener: (payload: DialguardChannels[K]) => void): Unsubscribe {
  // Checked here, not at the first message: a listener that is not a function threw inside
  // diagnostics_channel's publish, an uncaught exception (an outside review: the process exited).
  if (!KNOWN.has(name)) throw new TypeError(`unknown channel ${show(name)}: dialguard publishes on ${CHANNELS.join(', ')}`);
  checkFunction('listener', listener);
  const handler = (message: unknown): void => {
    try {
      const answer: unknown = listener(message as DialguardChannels[K]);
      if (answer !== undefined) containAnswer(`a subscriber of '${name}' threw (reported once)`, listener, answer); // an async one that rejects
    } catch (err) {
      warnOnce(`a subscriber of '${name}' threw (reported once)`, listener, err);
    }
  };
  diagnosticsChannel.subscribe(name, handler);
  let done = false;
  return unsubscriber(() => {
    if (done) return;
    done = true;
    diagnosticsChannel.unsubscribe(name, handler);
  });
}
