/**
 * What a user who attaches no 'error' listener sees must not change under RedisGuard: ioredis
 * prints its "[ioredis] Unhandled error event" line, node-redis throws (its documented behaviour).
 * The guard's own bookkeeping never makes it a listener the user did not add. A refused loopback
 * port; no server needed.
 */
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { eventually } from '../../helpers/eventually.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('RedisGuard: errors nobody listens to', () => {
  /** A guarded ioredis client dialling a refused port, and what it prints with console.error. */
  async function refusedIoredis(): Promise<{ client: Redis; printed: unknown[][]; done: () => Promise<void> }> {
    const peer = await refusing();
    const printed: unknown[][] = [];
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void printed.push(args));
    const client = new RedisGuard({ breaker: new HostBreaker() }).ioredis(Redis, { host: '127.0.0.1', port: peer.port, maxRetriesPerRequest: 0 });
    return {
      client,
      printed,
      done: async () => {
        client.disconnect();
        await peer.close();
      },
    };
  }

  it('ioredis with no error listener still prints "[ioredis] Unhandled error event" (was: silence)', async () => {
    const { printed, done } = await refusedIoredis();
    try {
      await eventually(() => printed.length, (n) => n >= 1);
      expect(String(printed[0]![0])).toBe('[ioredis] Unhandled error event:');
      expect(String(printed[0]![1])).toContain('ECONNREFUSED');
    } finally {
      await done();
    }
  });

  it('ioredis with a listener of its own: the user hears the error, nothing is printed', async () => {
    const { client, printed, done } = await refusedIoredis();
    const heard: unknown[] = [];
    client.on('error', (err: unknown) => void heard.push(err));
    try {
      await eventually(() => heard.length, (n) => n >= 1);
      expect(printed).toEqual([]);
    } finally {
      await done();
    }
  });

  it('node-redis: the guard adds no error listener (one would have silenced the throw node-redis makes when nobody listens)', () => {
    const guard = new RedisGuard({ breaker: new HostBreaker() });
    const client = guard.nodeRedis(createClient, { socket: { host: '127.0.0.1', port: 1 } });
    expect(client.listenerCount('error')).toBe(0); // was 1
  });
});
