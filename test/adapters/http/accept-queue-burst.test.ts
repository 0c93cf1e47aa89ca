/**
 * A burst of new connections to a live server whose accept queue is full: the kernel drops the
 * SYNs past the queue and resends them after 1 s, then 2 s more. A server that stalls 1.5 s (a GC
 * pause, a CPU-bound tick) with a queue of 4 answers the rest of a 40-connection burst at ~3 s:
 * Node's agent, with no connect bound, serves them all; the guarded agent's 2 s bound failed 34 of
 * 40 (and a 4 000-connection burst at a live loopback server failed 1 974 at the default 2.5 s).
 * A dial stalled in TCP while another dial of the host reached it now waits past the resend. The
 * server runs in a child process, so its stall does not stop the client.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanup = leakCheckEach();

/** An http server in a child process, accept queue 4, that stalls 1.5 s on its first connection. */
async function stallingServer(): Promise<number> {
  const source = `
    const http = require('node:http');
    let first = true;
    const s = http.createServer((req, res) => res.end('ok'));
    s.on('connection', () => {
      if (!first) return;
      first = false;
      const until = Date.now() + 1500;
      while (Date.now() < until);
    });
    s.listen({ port: 0, host: '127.0.0.1', backlog: 4 }, () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  cleanup.push(async () => {
    child.kill();
    await exited;
  });
  const [chunk] = (await once(child.stdout, 'data')) as [Buffer];
  return Number(String(chunk).trim());
}

/** `n` concurrent GETs through `agent`: how many were served, the errors' codes, the slowest (ms). */
async function burst(agent: http.Agent, port: number, n: number): Promise<{ served: number; codes: string[]; slowest: number }> {
  const t0 = performance.now();
  const results = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<{ ok: boolean; code?: string; ms: number }>((resolve) => {
          http
            .get({ host: '127.0.0.1', port, agent, path: '/' }, (res) => {
              res.resume();
              res.on('end', () => resolve({ ok: true, ms: performance.now() - t0 }));
            })
            .on('error', (e: NodeJS.ErrnoException) => resolve({ ok: false, code: String(e.code), ms: performance.now() - t0 }));
        }),
    ),
  );
  return { served: results.filter((r) => r.ok).length, codes: results.filter((r) => !r.ok).map((r) => r.code!), slowest: Math.max(...results.map((r) => r.ms)) };
}

describe('GuardedHttpAgent: a burst at a live server whose accept queue is full', () => {
  it('serves every request, as Node\'s agent does, counting nothing against the host', async () => {
    const plainAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
    cleanup.push(() => plainAgent.destroy());
    const plain = await burst(plainAgent, await stallingServer(), 40);
    const breaker = new HostBreaker();
    const agent = new GuardedHttpAgent({ keepAlive: true, maxSockets: Infinity, breaker, connectTimeout: 2_000 });
    cleanup.push(() => agent.destroy());
    const port = await stallingServer();
    const guarded = await burst(agent, port, 40);
    expect(plain).toMatchObject({ served: 40, codes: [] });
    expect(plain.slowest).toBeGreaterThan(2_000); // the scenario is real: SYNs were resent past the bound
    expect(guarded).toMatchObject({ served: 40, codes: [] });
    expect(guarded.slowest).toBeGreaterThan(2_000);
    expect(breaker.state(`127.0.0.1:${port}`)?.failures ?? 0).toBe(0);
  }, 20_000);
});
