/**
 * A deploy restarts the server on the same port (issue 11): the port is closed for 300 ms, then
 * for 1 s, under 64 concurrent callers through a GuardedAgent with every default (the shared
 * breaker, the shared retry budget, the default backoff and connect timeout). No call may fail,
 * no call may be refused once the server is back, and the host must never open. Real sockets on
 * 127.0.0.1; counts, not timings, are asserted.
 */
import http from 'node:http';
import type net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/agent.js';
import { HostUnavailableError } from '../../../src/core/errors.js';
import { sharedBreaker } from '../../../src/guard/dial.js';

const CALLERS = 64;

/** An HTTP server that can be stopped (every connection dropped) and started again on its port. */
class RestartingServer {
  port = 0;
  served = 0;
  #server: http.Server | undefined;

  async start(): Promise<void> {
    const server = http.createServer((_req, res) => {
      this.served++;
      res.end('ok');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }
}

interface Tally {
  ok: number;
  failed: number;
  refusedAfterBack: number;
  errors: unknown[];
}

/** `CALLERS` callers, each calling in a loop (10 ms apart) until `stop` resolves. */
async function callers(agent: GuardedAgent, origin: string, back: () => boolean, stop: Promise<void>): Promise<Tally> {
  const tally: Tally = { ok: 0, failed: 0, refusedAfterBack: 0, errors: [] };
  let stopped = false;
  void stop.then(() => (stopped = true));
  const one = async (): Promise<void> => {
    while (!stopped) {
      const wasBack = back();
      try {
        const res = await request(origin, { dispatcher: agent });
        await res.body.text();
        if (res.statusCode === 200) tally.ok++;
        else throw new Error(`status ${res.statusCode}`);
      } catch (err) {
        tally.failed++;
        if (tally.errors.length < 5) tally.errors.push(err);
        if (err instanceof HostUnavailableError && wasBack) tally.refusedAfterBack++;
      }
      await sleep(10);
    }
  };
  await Promise.all(Array.from({ length: CALLERS }, one));
  return tally;
}

const agents: GuardedAgent[] = [];
afterAll(async () => {
  await Promise.all(agents.map((a) => a.destroy()));
});

describe('GuardedAgent defaults: a same-port restart under 64 concurrent callers', () => {
  for (const outage of [300, 1_000]) {
    it(`the port closed for ${outage} ms: 0 failed calls, 0 refusals after the server is back, the host never opens`, async () => {
      const server = new RestartingServer();
      await server.start();
      const agent = new GuardedAgent();
      agents.push(agent);
      const origin = `http://127.0.0.1:${server.port}`;
      const openedBefore = sharedBreaker().stats().opened;
      let isBack = true;
      let stop!: () => void;
      const stopped = new Promise<void>((resolve) => (stop = resolve));
      const run = callers(agent, origin, () => isBack, stopped);

      await sleep(500); // warm: connections pooled, the retry budget has deposits
      const before = server.served;
      isBack = false;
      await server.stop();
      await sleep(outage);
      await server.start();
      isBack = true;
      await sleep(2_500); // every call caught in the gap finishes its retries
      stop();
      const tally = await run;
      await server.stop();

      expect(tally.errors).toEqual([]);
      expect(tally).toMatchObject({ failed: 0, refusedAfterBack: 0 });
      expect(before).toBeGreaterThan(CALLERS); // the callers really were calling before the restart
      expect(server.served).toBeGreaterThan(before + CALLERS); // and after it
      expect(tally.ok).toBe(server.served);
      expect(sharedBreaker().stats().opened).toBe(openedBefore);
    }, 20_000);
  }
});
