/**
 * One dial at a time for a queued request (found by an outside review). When a dial fails, its
 * slot dials for a request waiting in the queue, as Node's removeSocket does. It picked the first
 * queued request whether or not a dial was already out for it: with `maxSockets: 10` and 20
 * requests to a refused port, the 10 failing dials all dialled for request 11, which carried 10
 * dials and 10 'socket' listeners at once, so Node printed a MaxListenersExceededWarning per
 * refused request (1 078 warnings in 3 s of a server restarting every 300 ms under 50 callers;
 * Node's agent: none). A freed slot now dials for the first queued request with no dial out.
 */
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { countingLookup, countingServer, guardedHttp, leakChecked, plain } from './helpers.js';

const cleanups = leakChecked();

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('GuardedHttpAgent: a freed slot dials for a queued request that has no dial out', () => {
  it.each([
    [20, 10],
    [100, 50],
  ])('%i requests, maxSockets %i, a refused port: every request fails once, no MaxListenersExceededWarning, no more dials than Node', async (count, maxSockets) => {
    const port = await closedPort();
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message);
    };
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    const run = async (agent: http.Agent, lookup: ReturnType<typeof countingLookup>): Promise<{ errors: number; most: number }> => {
      let errors = 0;
      let most = 0;
      await Promise.all(
        Array.from({ length: count }, () => new Promise<void>((resolve) => {
          const req = http.get({ host: 'localhost', port, path: '/', agent, lookup: lookup.lookup });
          const watch = setInterval(() => (most = Math.max(most, req.listenerCount('socket'))), 1);
          req.on('response', (res) => {
            res.resume();
            clearInterval(watch);
            resolve();
          });
          req.on('error', () => {
            errors++;
            most = Math.max(most, req.listenerCount('socket'));
            clearInterval(watch);
            resolve();
          });
        })),
      );
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      return { errors, most };
    };
    const rawLookup = countingLookup();
    const raw = await run(plain(new http.Agent({ maxSockets })), rawLookup);
    const guardedLookup = countingLookup();
    const guarded = await run(guardedHttp({ maxSockets, lookup: guardedLookup.lookup }), guardedLookup);
    expect(raw.errors).toBe(count);
    expect(guarded.errors).toBe(count);
    expect(warnings).toEqual([]);
    expect(guarded.most).toBeLessThanOrEqual(3); // Node's own, the queue watch's and one dial's (was: one per dial out for it, 11)
    expect(guardedLookup.calls).toBeLessThanOrEqual(rawLookup.calls);
  });

  it("12 keep-alive sockets reset together, 40 requests queued: Node's removeSocket dials for the first queued request 12 times; it watches one of them, so no MaxListenersExceededWarning, every request fails once", async () => {
    const server = await countingServer({
      handler: (req, res) => {
        req.resume();
        setTimeout(() => res.end('ok'), 200); // answered late: the first 12 are on their sockets when the server goes
      },
    });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message);
    };
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    const agent = guardedHttp({ keepAlive: true, maxSockets: 12 });
    const errors = new Map<number, number>();
    const outcomes: Array<Promise<string>> = [];
    for (let i = 0; i < 52; i++) {
      outcomes.push(
        new Promise<string>((resolve) => {
          const req = http.get(`${server.origin}/${i}`, { agent }, (res) => {
            res.resume();
            res.on('end', () => resolve('served'));
          });
          req.on('error', () => {
            errors.set(i, (errors.get(i) ?? 0) + 1);
            resolve('failed');
          });
        }),
      );
    }
    for (let i = 0; i < 100 && server.requests < 12; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    await server.kill();
    const settled = await Promise.all(outcomes);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled.filter((o) => o === 'failed')).toHaveLength(52);
    expect([...errors.values()].filter((n) => n > 1)).toEqual([]);
    expect(warnings).toEqual([]);
  });
});
