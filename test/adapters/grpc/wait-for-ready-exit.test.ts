/**
 * A process whose only work is a waitForReady on a channel whose server is down is kept alive
 * until the server is up, as grpc-js keeps it (its reconnect and deadline timers are ref'd while
 * anyone waits). Before, every timer of the guard was unref'd: such a process exited at once,
 * code 0, its waitForReady callback never called and its call never made.
 */
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../src/testing/local-process.js';
import { runFixture } from '../../helpers/fixture-process.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoServer } from './helpers.js';

const cleanup = leakCheckEach();

describe('grpc guard: a process waiting for a channel', () => {
  it('stays alive until the server comes up 5 s later: client.waitForReady() calls back ready, a waitForReady call is made and answered', { timeout: 30_000 }, async () => {
    const port = await freePort();
    const { proc, stop } = runFixture(new URL('./fixtures/wait-for-ready-child.ts', import.meta.url), [String(port)], 25_000);
    cleanup.push(stop);
    // The child needs a moment to start (vite-node); the server comes up well after its first dials failed.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const server = new EchoServer();
    await server.listen(port);
    cleanup.push(() => server.close());
    expect(await proc.exited).toBe(0);
    expect(proc.lastLine()).toEqual({ ready: 'ready', call: 'ok hi' }); // was: {} (exited at once)
    expect(server.calls.Echo).toBe(1);
  });
});
