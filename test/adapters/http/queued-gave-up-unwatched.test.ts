/**
 * Requests that give up while they wait in the agent's queue for a `maxTotalSockets` slot held by
 * live sockets (no dial of their own origin out, so nothing watched them) end with their own
 * error and 'close', as with Node's agent (an outside review, r122). When a slot freed, the
 * first was dialled for, already destroyed, and failed with the dial's ECONNREFUSED; the second
 * was then taken out of the queue as "failed already" and never heard of again: no 'error', no
 * 'close', so a promise around http.request, or `stream.finished`, waited forever (20 of 20
 * trials; Node's agent 0).
 */
import http from 'node:http';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent } from '../../../src/adapters/http/index.js';
import { leakChecked, plain } from './helpers.js';

const cleanups = leakChecked();

/** A server on `host` answering each request after 10 ms. */
async function slowServer(host: string): Promise<{ url: string; port: number }> {
  const server = http.createServer((_req, res) => setTimeout(() => res.end('ok'), 10));
  server.listen(0, host);
  await once(server, 'listening');
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as { port: number };
  return { url: `http://${host}:${port}/`, port };
}

/** Each request's events ('ok', an error code, 'close'), read 1 s after they were sent. */
async function traffic(agent: http.Agent, live: [string, string], dead: string, how: 'signal' | 'destroy'): Promise<Record<string, string[]>> {
  const events: Record<string, string[]> = {};
  const send = (tag: string, url: string, abortAt?: number): void => {
    const ac = new AbortController();
    const seen: string[] = (events[tag] = []);
    const req = http.get(url, { agent, ...(how === 'signal' ? { signal: ac.signal } : {}) }, (res) => {
      res.resume();
      res.on('end', () => seen.push('ok'));
    });
    req.on('error', (e: NodeJS.ErrnoException) => seen.push(String(e.code)));
    req.on('close', () => seen.push('close'));
    if (abortAt !== undefined) setTimeout(() => (how === 'signal' ? ac.abort() : req.destroy()), abortAt);
  };
  const [a, b] = live;
  send('A1', a);
  send('B1', b);
  send('A2', a);
  send('B2', b);
  send('D1', dead, 3); // queued: every slot (3) is a live request's
  send('A3', a);
  send('B3', b);
  send('D2', dead, 5);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  return events;
}

describe('GuardedHttpAgent: requests that give up in the queue, unwatched', () => {
  it.each(['signal', 'destroy'] as const)('each ends with its own error and close, as with Node\'s agent (%s)', async (how) => {
    const [a, b] = [await slowServer('127.0.0.1'), await slowServer('127.0.0.2')];
    const dead = `http://127.0.0.3:${a.port}/`; // nobody listens there
    const options = { keepAlive: false, maxSockets: 2, maxTotalSockets: 3 };
    const raw = await traffic(plain(new http.Agent(options)), [a.url, b.url], dead, how);
    const guarded = new GuardedHttpAgent({ ...options, breaker: null });
    cleanups.push(() => guarded.destroy());
    const seen = await traffic(guarded, [a.url, b.url], dead, how);
    const own = how === 'signal' ? 'ABORT_ERR' : 'ECONNRESET';
    expect({ D1: raw.D1, D2: raw.D2 }).toEqual({ D1: [own, 'close'], D2: [own, 'close'] });
    // Was D1 ECONNREFUSED (a dial made for it after it gave up) and D2 nothing at all.
    expect(seen).toEqual(raw);
  });
});
