/**
 * One AbortSignal shared by many concurrent calls (a request's signal fanned out to its backend
 * calls) is how signals are meant to be used, not a leak: Node's fetch takes 20 calls on one
 * signal without a word. dialguard's own entry points listened to the caller's signal as it was,
 * so the 11th concurrent call printed `MaxListenersExceededWarning` (an outside review). Each
 * entry point now raises a signal's limit, as undici does, when it is still Node's default.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { defaultMaxListeners, getMaxListeners, setMaxListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sleep, systemClock } from '../../src/core/clock.js';
import { connect } from '../../src/guard/connect.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { ConnectionPool } from '../../src/pool/connection-pool.js';
import { retry } from '../../src/retry/retry.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenH2 } from '../http2/listen.js';

const cleanup = leakCheckEach();
const CALLS = 20;

let warnings: string[] = [];
const onWarning = (w: Error): void => {
  warnings.push(`${w.name}: ${w.message}`);
};
beforeEach(() => {
  warnings = [];
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

/** Lets a warning emitted during the calls reach `process.on('warning')` (it is emitted on the next tick). */
async function heard(): Promise<string[]> {
  await new Promise((r) => setImmediate(r));
  return warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'));
}

const later = <T>(value: T): Promise<T> => new Promise((r) => setTimeout(() => r(value), 20));

describe(`one AbortSignal shared by ${CALLS} concurrent calls: no MaxListenersExceededWarning`, () => {
  it('retry()', async () => {
    const { signal } = new AbortController();
    await Promise.all(Array.from({ length: CALLS }, () => retry(() => later(1), { signal })));
    expect(await heard()).toEqual([]);
  });

  it('ConnectionPool.use(), warm and while the connection is being made', async () => {
    const pool = new ConnectionPool<{ id: number }>({ connector: { connect: () => later({ id: 1 }), close: () => {} }, breaker: new HostBreaker() });
    cleanup.push(() => pool.close());
    const { signal } = new AbortController();
    // The first 20 wait for the shared connect (untilAborted), the next 20 ride it warm.
    await Promise.all(Array.from({ length: CALLS }, () => pool.use('127.0.0.1:1', () => later(1), { signal })));
    await Promise.all(Array.from({ length: CALLS }, () => pool.use('127.0.0.1:1', () => later(1), { signal })));
    expect(await heard()).toEqual([]);
  });

  it('connect(), to an address and to a name guarded per address', async () => {
    const server = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as net.AddressInfo;
    const breaker = new HostBreaker();
    const lookup = ((_h: string, _o: unknown, cb: (e: null, a: Array<{ address: string; family: number }>) => void) =>
      setTimeout(() => cb(null, [{ address: '127.0.0.1', family: 4 }]), 5)) as unknown as net.LookupFunction;
    for (const host of ['127.0.0.1', 'shared-signal.test']) {
      const { signal } = new AbortController();
      const sockets = await Promise.all(Array.from({ length: CALLS }, () => connect({ host, port }, { breaker, signal, socket: { lookup } })));
      for (const s of sockets) s.destroy();
    }
    expect(await heard()).toEqual([]);
  });

  it('Http2Client.request()', async () => {
    const srv = http2.createServer((_req, res) => {
      setTimeout(() => res.end('ok'), 20);
    });
    const origin = `http://127.0.0.1:${await listenH2(srv, cleanup)}`;
    const client = new Http2Client({ breaker: new HostBreaker() });
    cleanup.push(() => client.close());
    const { signal } = new AbortController();
    await Promise.all(Array.from({ length: CALLS }, () => client.request(`${origin}/`, { signal })));
    expect(await heard()).toEqual([]);
  });

  it('sleep() with a signal', async () => {
    const { signal } = new AbortController();
    await Promise.all(Array.from({ length: CALLS }, () => sleep(systemClock, 10, signal)));
    expect(await heard()).toEqual([]);
  });

  it("a limit the caller set is the caller's: left as it is, and a signal already raised is not lowered", async () => {
    const own = new AbortController().signal;
    setMaxListeners(3, own);
    await Promise.all(Array.from({ length: 2 }, () => retry(() => later(1), { signal: own })));
    expect(getMaxListeners(own)).toBe(3);
    const raised = new AbortController().signal;
    setMaxListeners(5_000, raised);
    await retry(() => later(1), { signal: raised });
    expect(getMaxListeners(raised)).toBe(5_000);
    const fresh = new AbortController().signal;
    expect(getMaxListeners(fresh)).toBe(defaultMaxListeners);
    await retry(() => later(1), { signal: fresh });
    expect(getMaxListeners(fresh)).toBeGreaterThanOrEqual(1_000);
  });
});
