/**
 * A deploy restarts a gRPC server on the same port (issue 11): the port closed for 300 ms, then
 * for 1 s, under 16 concurrent callers through a GrpcGuard with default options (the shared
 * breaker and retry budget, the default backoff and connect timeout; the methods are declared
 * idempotent, as an idempotent service's would be). No call may fail, none may be refused once the
 * server is back (before the change: `dialguard-retry-after-ms: 29241` for 30 s), and the host
 * must never open. Real grpc-js server on 127.0.0.1; counts asserted.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/guard.js';
import { sharedBreaker } from '../../../src/guard/dial.js';
import { EchoClient, call, echoServer } from './helpers.js';

const CALLERS = 16;

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

describe('GrpcGuard defaults: a same-port restart under 16 concurrent callers', () => {
  for (const outage of [300, 1_000]) {
    it(`the port closed for ${outage} ms: 0 failed calls, 0 refusals after the server is back, the host never opens`, async () => {
      const server = await echoServer();
      const guard = new GrpcGuard({ idempotent: () => true });
      const client = new EchoClient(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure(), guard.clientOptions());
      cleanup.push(() => guard.close(), () => client.close(), () => server.close());
      const openedBefore = sharedBreaker().stats().opened;

      let stopped = false;
      let isBack = true;
      const tally = { ok: 0, failed: 0, refusedAfterBack: 0, errors: [] as unknown[] };
      const caller = async (): Promise<void> => {
        while (!stopped) {
          const wasBack = isBack;
          try {
            await call(client, 'Echo', 'x', { deadline: Date.now() + 8_000 });
            tally.ok++;
          } catch (err) {
            tally.failed++;
            if (tally.errors.length < 5) tally.errors.push(err);
            const retryAfter = (err as grpc.ServiceError).metadata?.get('dialguard-retry-after-ms') ?? [];
            if (wasBack && retryAfter.length > 0) tally.refusedAfterBack++;
          }
          await sleep(10);
        }
      };
      const run = Promise.all(Array.from({ length: CALLERS }, caller));

      await sleep(500);
      const before = server.calls.Echo;
      isBack = false;
      await server.close();
      await sleep(outage);
      await server.listen(server.port);
      isBack = true;
      await sleep(2_500);
      stopped = true;
      await run;

      expect(tally.errors).toEqual([]);
      expect(tally).toMatchObject({ failed: 0, refusedAfterBack: 0 });
      expect(before).toBeGreaterThan(CALLERS);
      expect(server.calls.Echo).toBeGreaterThan(before + CALLERS);
      expect(sharedBreaker().stats().opened).toBe(openedBefore);
    }, 20_000);
  }
});
