/**
 * The undici connector guards a name per address (issue 16): `svc.test` resolves, through a
 * custom lookup, to 127.0.0.3 (nothing listens: refused), 127.0.0.2 and 127.0.0.4 (live HTTP
 * servers on one port). Every response closes its connection, so each request dials. Counts dials
 * per breaker key (`dialguard:dial:settled`) and connections each live server accepted.
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { guarded, httpServer, leakChecked } from './helpers.js';
import { dialsPerKey, lookupTo } from '../../helpers/per-address.js';

leakChecked();

const dials = dialsPerKey();

const closeEach = (_req: unknown, res: { setHeader(k: string, v: string): void; end(b: string): void }): void => {
  res.setHeader('connection', 'close');
  res.end('ok');
};

describe('undici connector: a name is guarded per address', () => {
  it('one refusing address of three: every request is served by the live two, the dead one is dialled once then skipped, nothing is refused', async () => {
    await using a = await httpServer(closeEach, { host: '127.0.0.2' });
    await using b = await httpServer(closeEach, { host: '127.0.0.4', port: a.port });
    const { lookup, calls } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']); // the dead one first
    const { agent, breaker } = guarded({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 }), socket: { lookup }, maxAttempts: 1 });
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await request(`http://svc.test:${a.port}/`, { dispatcher: agent });
      await res.body.text();
      statuses.push(res.statusCode);
    }
    expect(statuses).toEqual(Array(20).fill(200));
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1); // once, then open and skipped
    expect(breaker.state(`127.0.0.3:${a.port}`)?.state).toBe('open');
    expect(breaker.state(`svc.test:${a.port}`)?.state ?? 'closed').toBe('closed');
    expect(a.connections + b.connections).toBe(20);
    expect(calls()).toBeGreaterThanOrEqual(1); // the user's lookup was used, not bypassed
  });

  it('a live address dying mid-run: requests go on through the last live one, none refused while it is alive', async () => {
    await using a = await httpServer(closeEach, { host: '127.0.0.2' });
    await using b = await httpServer(closeEach, { host: '127.0.0.4', port: a.port });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    const { agent, breaker } = guarded({ breaker: new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 }), socket: { lookup }, maxAttempts: 1 });
    const failures: unknown[] = [];
    for (let i = 0; i < 20; i++) {
      if (i === 5) await a.kill();
      try {
        const res = await request(`http://svc.test:${a.port}/`, { dispatcher: agent });
        await res.body.text();
      } catch (err) {
        failures.push(err);
      }
    }
    expect(failures).toEqual([]);
    expect(breaker.state(`127.0.0.2:${a.port}`)?.state).toBe('open');
    expect(breaker.state(`127.0.0.4:${a.port}`)?.state).toBe('closed');
    expect(dials.get(`127.0.0.2:${a.port}`)).toBeLessThanOrEqual(6); // 5 served, then one refused dial
    expect(b.connections).toBeGreaterThanOrEqual(15);
  });
});
