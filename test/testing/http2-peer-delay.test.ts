/**
 * `http2Peer({ delay })` is checked like every duration option: a timer given NaN or more than
 * 2^31-1 ms fires at once, so `delay: 2**31`, `3e9` or `NaN` made a peer meant to be slow answer
 * in a few ms (and `Infinity` after 15 ms). Now those throw, and `Infinity` never answers.
 */
import http2 from 'node:http2';
import { describe, expect, it } from 'vitest';
import { http2Peer } from '../../src/testing/http2-peer.js';
import { leakCheckEach } from '../helpers/leaks.js';

const cleanup = leakCheckEach();

/** One GET to `origin`: 'answered' with the status, or 'waiting' if nothing came within `within` ms. */
async function ask(origin: string, within: number): Promise<{ what: string; ms: number }> {
  const session = http2.connect(origin);
  session.on('error', () => {});
  const t0 = performance.now();
  try {
    return await new Promise((resolve) => {
      const stream = session.request({ ':path': '/' });
      stream.on('error', () => {});
      stream.on('response', (h) => resolve({ what: `answered ${h[':status']}`, ms: performance.now() - t0 }));
      setTimeout(() => resolve({ what: 'waiting', ms: performance.now() - t0 }), within);
    });
  } finally {
    session.destroy();
  }
}

describe('http2Peer: the delay option', () => {
  it.each([Number.NaN, -1, 2 ** 31, 3e9, '5'])('delay %s is refused before anything listens, naming the option', async (delay) => {
    await expect(http2Peer({ delay: delay as number })).rejects.toThrow(/delay/);
  });

  it('delay Infinity never answers; the peer still closes the stream it holds', async () => {
    const peer = await http2Peer({ delay: Number.POSITIVE_INFINITY });
    cleanup.push(() => peer.close());
    expect((await ask(peer.origin, 300)).what).toBe('waiting'); // was: answered after 15 ms
  });

  it('a finite delay answers after it', async () => {
    const peer = await http2Peer({ delay: 150 });
    cleanup.push(() => peer.close());
    const r = await ask(peer.origin, 2_000);
    expect(r.what).toBe('answered 200');
    expect(r.ms).toBeGreaterThanOrEqual(140);
  });
});
