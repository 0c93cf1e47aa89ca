/**
 * A ServerSet over Http2Client: the first server dead, its dial's failure opening it in the
 * client's breaker, the second live. The call is served by the second, in the same attempt (r143:
 * 3 of 8 such calls failed with the default breaker, the live server never tried). Real h2c on
 * 127.0.0.1; dials counted by the breaker.
 */
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { Http2Client } from '../../src/http2/client.js';
import { ServerSet } from '../../src/retry/server-set.js';
import { refusing } from '../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../helpers/leaks.js';
import { listenH2 } from './listen.js';

const cleanup = leakCheckEach();

describe('ServerSet over Http2Client: a dead first server whose dial opens it', () => {
  for (const maxAttempts of [1, 3]) {
    it(`client maxAttempts ${maxAttempts}: served by the live server (was: the call ended with ECONNREFUSED)`, async () => {
      const dead = await refusing();
      const live = http2.createServer((_req, res) => res.end('live'));
      const port = await listenH2(live, cleanup);
      const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0 });
      const client = new Http2Client({ breaker, retry: { maxAttempts, backoff: () => 0, budget: null } });
      cleanup.push(() => client.close());
      const set = new ServerSet([dead.address, `127.0.0.1:${port}`]);
      const tried: string[] = [];
      const res = await set.run(
        (server) => {
          tried.push(server);
          return client.request(`http://${server}/`);
        },
        { maxAttempts: 1, budget: null, backoff: () => 0 },
      );
      expect(res.status).toBe(200);
      expect(tried).toEqual([dead.address, `127.0.0.1:${port}`]);
      expect(breaker.stats().failed).toBe(1);
    });
  }
});
