/**
 * The pool's redial pace through the adapters built on the pool (see test/pool/redial-pace for
 * the pool's own rules): before a host opens, a failing target is redialled at the pace, not
 * per call. Kept apart from test/pool: the mutation suite runs test/pool in one process.
 */
import { describe, expect, it } from 'vitest';
import { Http2Client } from '../../src/http2/client.js';
import { GrpcGuard } from '../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { refusing } from '../../src/testing/tcp-peers.js';
import { subscribe } from '../../src/observe/channels.js';

describe('redialPace through the adapters whose pools it paces', () => {
  it('Http2Client: 40 calls 10 ms apart to a refused port before its host opens dial a handful of times, where redialPace 0 dials for each', async () => {
    const peer = await refusing();
    const dialsOf = async (redialPace: number | undefined): Promise<{ dials: number; failed: number }> => {
      let dials = 0;
      const stop = subscribe('dialguard:dial:settled', (e) => {
        if (e.host === `127.0.0.1:${peer.port}`) dials++;
      });
      const client = new Http2Client({ breaker: new HostBreaker({ minOutage: 60_000 }), redialPace, retry: false });
      const calls: Array<Promise<'ok' | 'failed'>> = [];
      try {
        for (let i = 0; i < 40; i++) {
          calls.push(client.request(`http://127.0.0.1:${peer.port}/`).then(() => 'ok' as const, () => 'failed' as const));
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const outcomes = await Promise.all(calls);
        return { dials, failed: outcomes.filter((o) => o === 'failed').length };
      } finally {
        stop();
        await client.close();
      }
    };
    const unpaced = await dialsOf(0);
    const paced = await dialsOf(undefined);
    expect(unpaced).toEqual({ dials: 40, failed: 40 });
    expect(paced.failed).toBe(40);
    expect(paced.dials).toBeGreaterThanOrEqual(3);
    expect(paced.dials).toBeLessThanOrEqual(9); // 0, 10, 30, 70, 150, 310 ms ... within ~400-600 ms
    await peer.close();
  });

  it('Http2Client and GrpcGuard check redialPace as the pool does', async () => {
    expect(() => new Http2Client({ redialPace: -1 })).toThrow(/redialPace/);
    expect(() => new GrpcGuard({ redialPace: Number.NaN })).toThrow(/redialPace/);
    const fine = new GrpcGuard({ redialPace: 0, breaker: null });
    await fine.close();
  });
});
