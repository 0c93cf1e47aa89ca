/**
 * Http2Client guards a name per address (issue 16): `svc.test` resolves, through the client's
 * `lookup`, to 127.0.0.3 (nothing listens: refused), 127.0.0.2 and 127.0.0.4 (live h2c peers on
 * one port). One client per request, sharing one breaker, so each request dials a session.
 * Counts dials per breaker key (`dialguard:dial:settled`) and connections each peer accepted.
 */
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { acceptAndHold } from '../../src/testing/tcp-peers.js';
import { TEST_CERT } from '../../src/testing/test-cert.js';
import { eventually } from '../helpers/eventually.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { dialsPerKey, lookupTo } from '../helpers/per-address.js';

leakCheckEach();

const dials = dialsPerKey();

/** One request on a fresh client (so it dials), closed after. */
async function once(url: string, breaker: HostBreaker, lookup: net.LookupFunction): Promise<number> {
  const c = new Http2Client({ breaker, lookup, connectTimeout: 1_000 });
  try {
    return (await c.request(url)).status;
  } finally {
    await c.close();
  }
}

describe('Http2Client: a name is guarded per address', () => {
  it("a client whose lookup answers ENOTFOUND never gets the name refused for a client resolving it (was: refused for both on the shared breaker)", async () => {
    await using a = await http2Peer({ host: '127.0.0.2' });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const broken = ((host: string, _o: unknown, cb: (err: Error) => void) =>
      queueMicrotask(() => cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host })))) as unknown as net.LookupFunction;
    const { lookup } = lookupTo(['127.0.0.2']);
    for (let i = 0; i < 3; i++) {
      await expect(once(`http://svc.test:${a.port}/`, breaker, broken)).rejects.toBeInstanceOf(Error);
      expect(await once(`http://svc.test:${a.port}/`, breaker, lookup)).toBe(200);
    }
  });

  it('one refusing address of three: every request is served by the live two, the dead one is dialled once then skipped, nothing is refused', async () => {
    await using a = await http2Peer({ host: '127.0.0.2' });
    await using b = await http2Peer({ host: '127.0.0.4', port: a.port });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup, calls } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']); // the dead one first
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push(await once(`http://svc.test:${a.port}/`, breaker, lookup));
    expect(statuses).toEqual(Array(20).fill(200));
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1); // once, then open and skipped
    expect(breaker.state(`127.0.0.3:${a.port}`)?.state).toBe('open');
    expect(breaker.state(`svc.test:${a.port}`)?.state ?? 'closed').toBe('closed');
    expect(a.attempts + b.attempts).toBe(20);
    expect(calls()).toBe(20); // the client's lookup was used, once per session
    // The name is never dialled: its lookups are lookups (dialguard:lookup:settled, not dials),
    // and the pool adds no dial (event, timer) of its own.
    expect(dials.get(`svc.test:${a.port}`)).toBeUndefined();
  });

  it('a live address dying mid-run: requests go on through the last live one, none refused while it is alive', async () => {
    await using a = await http2Peer({ host: '127.0.0.2' });
    await using b = await http2Peer({ host: '127.0.0.4', port: a.port });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.3', '127.0.0.4']);
    const failures: unknown[] = [];
    for (let i = 0; i < 20; i++) {
      if (i === 5) await a.kill();
      try {
        await once(`http://svc.test:${a.port}/`, breaker, lookup);
      } catch (err) {
        failures.push(err);
      }
    }
    expect(failures).toEqual([]);
    expect(breaker.state(`127.0.0.2:${a.port}`)?.state).toBe('open');
    expect(breaker.state(`127.0.0.4:${a.port}`)?.state).toBe('closed');
    expect(dials.get(`127.0.0.2:${a.port}`)).toBeLessThanOrEqual(6); // 5 served, then one refused dial
    expect(b.attempts).toBeGreaterThanOrEqual(15);
  });

  it('a peer that accepts TCP but never sends SETTINGS fails its address alone (the handshake runs inside the address dial): the live one serves', async () => {
    await using live = await http2Peer({ host: '127.0.0.4' });
    await using hold = await acceptAndHold({ host: '127.0.0.2', port: live.port });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.2', '127.0.0.4']);
    const c = new Http2Client({ breaker, lookup, connectTimeout: 300 });
    try {
      expect((await c.request(`http://svc.test:${live.port}/`)).status).toBe(200);
    } finally {
      await c.close();
    }
    // The losing dial runs to its own timeout, then is recorded against its address alone.
    expect(await eventually(() => breaker.state(`127.0.0.2:${live.port}`)?.state, (s) => s === 'open')).toBe('open');
    expect(breaker.state(`127.0.0.4:${live.port}`)?.state).toBe('closed');
    expect(live.attempts).toBe(1);
    expect(hold.attempts).toBe(1);
  });

  it('over TLS each address is dialled with the name as SNI and checked against it: the live addresses of localhost serve, the refusing one opens alone', async () => {
    await using a = await http2Peer({ host: '127.0.0.2', tls: true });
    await using b = await http2Peer({ host: '127.0.0.4', port: a.port, tls: true });
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 30_000 });
    const { lookup } = lookupTo(['127.0.0.3', '127.0.0.2', '127.0.0.4']);
    for (let i = 0; i < 4; i++) {
      const c = new Http2Client({ breaker, lookup, connectTimeout: 1_000, tls: { ca: TEST_CERT } });
      try {
        expect((await c.request(`https://localhost:${a.port}/`)).status).toBe(200);
      } finally {
        await c.close();
      }
    }
    expect(a.attempts + b.attempts).toBe(4);
    expect(dials.get(`127.0.0.3:${a.port}`)).toBe(1);
    expect(breaker.state(`127.0.0.3:${a.port}`)?.state).toBe('open');
  });
});
