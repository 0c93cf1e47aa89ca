/**
 * The storm scenario's memcached clients against a real memcached (Debian's package). A machine
 * without it fails here with how to install it: CI installs it, and a test that cannot run must
 * not pass having proven nothing.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuardedMemcached, NaiveMemcached } from '../../src/chaos/memcached/clients.js';
import { MemcachedConnection } from '../../src/chaos/memcached/connection.js';
import { ensureMemcached, ownsListener, startMemcached } from '../../src/chaos/memcached/server.js';
import { RequestTimeoutError } from '../../src/core/errors.js';
import { HostBreaker } from '../../src/guard/host-breaker.js';

let server: Awaited<ReturnType<typeof startMemcached>>;

beforeAll(async () => {
  const missing = ensureMemcached(() => {});
  expect(missing, 'memcached is needed: apt-get install memcached').toBeUndefined();
  server = await startMemcached();
});
afterAll(async () => {
  await server?.stop();
});

describe('startMemcached', () => {
  it('the server it returns is its own process: it holds the listening socket', () => {
    expect(ownsListener(server.proc.pid, Number(server.node.split(':')[1]))).toBe(true);
    expect(ownsListener(process.pid, Number(server.node.split(':')[1]))).toBe(false);
  });
});

function open(node: string): Promise<MemcachedConnection> {
  const [host, port] = [node.slice(0, node.lastIndexOf(':')), Number(node.slice(node.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port }, () => resolve(new MemcachedConnection(s)));
    s.once('error', reject);
  });
}

describe('MemcachedConnection', () => {
  it('sets, gets, misses and answers version in order', async () => {
    const c = await open(server.node);
    await c.set('a', 'hello\r\nworld', 1_000);
    const [v, miss, version] = await Promise.all([c.get('a', 1_000), c.get('nope', 1_000), c.version(1_000)]);
    expect(v).toBe('hello\r\nworld');
    expect(miss).toBeUndefined();
    expect(version).toMatch(/^\d+\.\d+/);
    c.close();
  });

  it('a timed-out request keeps its place: its late answer is dropped, the next one is right', async () => {
    const c = await open(server.node);
    await c.set('k', 'v1', 1_000);
    await server.freeze();
    const late = c.get('k', 100).catch((e: unknown) => e);
    expect(await late).toBeInstanceOf(RequestTimeoutError);
    await server.thaw();
    await c.set('k2', 'v2', 2_000);
    expect(await c.get('k2', 2_000)).toBe('v2');
    c.close();
  });
});

describe('memcached clients against a frozen node', () => {
  it('the naive client redials on every failure; the guarded one stops after its breaker opens', async () => {
    let naiveDials = 0;
    let guardedDials = 0;
    const naive = new NaiveMemcached({ requestTimeout: 50, onDial: () => naiveDials++ });
    const breaker = new HostBreaker({ minOutage: 0, failureThreshold: 3, openDuration: 60_000 });
    const guarded = new GuardedMemcached({ breaker, requestTimeout: 50, connectTimeout: 100, keepAlive: 200, onDial: () => guardedDials++ });
    await expect(naive.get(server.node, 'x')).resolves.toBeUndefined();
    await expect(guarded.get(server.node, 'x')).resolves.toBeUndefined();
    await server.freeze();
    try {
      const until = Date.now() + 1_500;
      const loop = async (get: () => Promise<unknown>): Promise<void> => {
        while (Date.now() < until) {
          await get().catch(() => {});
          await new Promise((r) => setImmediate(r)); // a refusal settles in microtasks: let timers run
        }
      };
      await Promise.all([1, 2, 3, 4].flatMap(() => [loop(() => naive.get(server.node, 'x')), loop(() => guarded.get(server.node, 'x'))]));
    } finally {
      await server.thaw();
    }
    naive.close();
    await guarded.close();
    expect(breaker.state(server.node)?.state).toBe('open');
    expect(guardedDials).toBeLessThanOrEqual(1 + 3); // the first connection, then the three that tripped it
    expect(naiveDials).toBeGreaterThan(5 * guardedDials);
  });
});
