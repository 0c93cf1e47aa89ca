/**
 * Listeners are checked when they are added (an outside review): a non-function taken silently
 * threw inside the next event. `breaker.on('refused', undefined)` made every later refusal a
 * TypeError ("Invalid value used in weak set") with no `code`; `onRetryEvent('settled', undefined)`
 * failed every later retry(); `subscribe(name, undefined)` crashed the process at the next message.
 */
import { describe, expect, it } from 'vitest';
import { HostUnavailableError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { subscribe } from '../../src/observe/channels.js';
import { onRetryEvent, retry } from '../../src/retry/retry.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';

const junk: unknown[] = [undefined, null, 1, {}, 'listener'];

describe('listeners are checked when added', () => {
  it('HostBreaker.on: a non-function listener or an unknown event is a TypeError, and the breaker refuses as before', () => {
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
    for (const bad of junk) expect(() => breaker.on('refused', bad as () => void)).toThrow(TypeError);
    expect(() => breaker.on('nope' as 'refused', () => {})).toThrow(/unknown event "nope".*"refused"/);
    breaker.admit('h:1').failed(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
    expect(breaker.tryAdmit('h:1')).toBeInstanceOf(HostUnavailableError);
  });

  it('onRetryEvent and ConnectionPool.on check theirs too, and retry() still works', async () => {
    for (const bad of junk) expect(() => onRetryEvent('settled', bad as () => void)).toThrow(TypeError);
    expect(() => onRetryEvent('done' as 'settled', () => {})).toThrow(/unknown event "done"/);
    const pool = new ConnectionPool({ connector: { connect: async () => ({}), close: () => {} } });
    expect(() => pool.on('opened', undefined as unknown as () => void)).toThrow(TypeError);
    await pool.close();
    await expect(retry(() => 1)).resolves.toBe(1);
  });

  it('subscribe: an unknown channel or a non-function listener is a TypeError, not an uncaught exception later', async () => {
    for (const bad of junk) expect(() => subscribe('dialguard:retry:settled', bad as () => void)).toThrow(TypeError);
    expect(() => subscribe('dialguard:retry:done' as 'dialguard:retry:settled', () => {})).toThrow(/unknown channel "dialguard:retry:done"/);
    const heard: boolean[] = [];
    using _stop = subscribe('dialguard:retry:settled', (e) => heard.push(e.ok));
    await retry(() => 1);
    expect(heard).toEqual([true]);
  });
});
