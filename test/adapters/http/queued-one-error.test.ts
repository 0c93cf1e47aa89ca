/**
 * One error per request, whatever fails under it (found by an outside review: a server restart
 * under load crashed got and plain node:http callers with "Unhandled 'error' event", ECONNREFUSED,
 * 2-7 times in 8 restarts, never with Node's agent). When keep-alive sockets close, Node's agent
 * dials for the first queued request and, on a failed dial, emits the error on it and leaves it
 * queued (with a real socket a connect never fails there: the socket is handed over at once). A
 * guarded dial fails through that callback, so the next socket to close dialled for the same
 * request again, and its failure was a second 'error' on a request got and `once('error')` had
 * finished with. A request whose dial fails now leaves the queue and fails once, as Node fails it.
 */
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { countingServer, guardedHttp } from './helpers.js';

describe('GuardedHttpAgent: a request queued behind keep-alive sockets that close while the server is gone', () => {
  it('4 sockets close together, 12 requests queued, the server refusing: every request fails or is served exactly once, no second error', async () => {
    const server = await countingServer({
      handler: (req, res) => {
        req.resume();
        setTimeout(() => res.end('ok'), 200); // answered late: the first 4 are on their sockets when the server goes
      },
    });
    const agent = guardedHttp({ keepAlive: true, maxSockets: 4 });
    const errors = new Map<number, string[]>();
    const outcomes: Array<Promise<string>> = [];
    for (let i = 0; i < 16; i++) {
      outcomes.push(
        new Promise<string>((resolve) => {
          const req = http.request(`${server.origin}/${i}`, { method: 'POST', agent }, (res) => {
            res.resume();
            res.on('end', () => resolve('served'));
          });
          req.on('error', (e: NodeJS.ErrnoException) => {
            errors.set(i, [...(errors.get(i) ?? []), e.code ?? e.message]);
            resolve('failed');
          });
          req.end('{}');
        }),
      );
    }
    for (let i = 0; i < 100 && server.requests < 4; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    await server.kill(); // the 4 sockets reset, the port refuses: each closing socket dials for the queue
    const settled = await Promise.all(outcomes);
    await new Promise((resolve) => setTimeout(resolve, 100)); // a second error comes a tick or a dial later
    expect(settled.filter((s) => s === 'failed')).toHaveLength(16);
    expect([...errors.values()].filter((list) => list.length > 1)).toEqual([]);
  });
});
