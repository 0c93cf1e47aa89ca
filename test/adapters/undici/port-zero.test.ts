/**
 * Port 0 is a port the caller named: undici dials it (refused), as the http agents' Node does.
 * The connector read it as "no port" (`Number('0') || 80`), so a guarded `http://127.0.0.1:0/`
 * went to port 80 and was answered by whatever listened there, where plain undici failed
 * ECONNREFUSED (an outside review). (Node's http itself sends port 0 to the default port, so the
 * http agents, which key what Node dials, are left as Node is.)
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { guarded, leakChecked } from './helpers.js';

leakChecked();

describe('a URL naming port 0', () => {
  it('GuardedAgent dials port 0 (refused, as plain undici), and files it under :0, not :80', async () => {
    const { agent, breaker } = guarded({ breaker: new HostBreaker({ minOutage: 0, failureThreshold: 1, openDuration: 30_000 }) });
    const error = await request('http://127.0.0.1:0/', { dispatcher: agent }).then(() => undefined, (err: unknown) => err);
    const { code, cause } = error as { code?: string; cause?: { code?: string } };
    expect(code ?? cause?.code).toMatch(/ECONNREFUSED|RETRIES_EXHAUSTED/); // plain undici: ECONNREFUSED
    expect(breaker.state('127.0.0.1:0')?.failures).toBeGreaterThanOrEqual(1);
    expect(breaker.state('127.0.0.1:80')).toBeUndefined(); // was: the dial went to :80
  });
});
