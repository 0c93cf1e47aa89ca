/**
 * Every `dialguard:attempt` a GuardedAgent call starts ends, however the call ends. A retry's
 * attempt left by the call (the caller's signal, the call's deadline) ignored whatever it heard
 * from then on, its promise never settled, and its span was never ended nor exported: it stayed
 * open for the life of the process (an outside review: 50 of 50 calls retried against a dead
 * host and ended by their signal; 5 of 5 after a 503 and a held retry).
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/agent.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { attemptTrace } from '../../../src/observe/tracing.js';
import { whileTraced } from '../../helpers/tracing.js';
import { httpServer } from './helpers.js';

describe('GuardedAgent: a retried call ended by its signal or deadline ends its attempt span', () => {
  for (const by of ['signal', 'deadline'] as const) {
    it(`a 503, then a retry the server holds, ended by the ${by}: as many attempts end as started`, async () => {
      await using server = await httpServer((_req, res, n) => {
        if (n === 1) {
          res.statusCode = 503;
          res.end('busy');
        }
        // the retry is held: never answered
      });
      const agent = new GuardedAgent({ breaker: new HostBreaker(), backoff: () => 100, ...(by === 'deadline' ? { timeout: 400 } : {}) });
      let started = 0;
      let ended = 0;
      const end = (): void => void ended++;
      await whileTraced(attemptTrace, { start: () => void started++, asyncEnd: end }, async () => {
        // The held 503 is handed over as the call ends (documented): read it to its end.
        const outcome = await request(`${server.origin}/`, { dispatcher: agent, ...(by === 'signal' ? { signal: AbortSignal.timeout(400) } : {}) }).then(
          async (res) => {
            await res.body.text().catch(() => {});
            return res.statusCode;
          },
          (err: unknown) => err,
        );
        expect(outcome).toBe(503);
        await new Promise((resolve) => setTimeout(resolve, 50));
      });
      expect(started).toBeGreaterThanOrEqual(2);
      expect(ended).toBe(started); // was: the held retry's never ended
      await agent.close();
    });
  }
});
