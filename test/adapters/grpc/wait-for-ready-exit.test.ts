/**
 * A process whose only work is a waitForReady on a channel whose server is down is kept alive
 * until the server is up, as grpc-js keeps it (its reconnect and deadline timers are ref'd while
 * anyone waits). Before, every timer of the guard was unref'd: such a process exited at once,
 * code 0, its waitForReady callback never called and its call never made.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../src/testing/local-process.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoServer } from './helpers.js';

const cleanup = leakCheckEach();

describe('grpc guard: a process waiting for a channel', () => {
  it('stays alive until the server comes up 5 s later: client.waitForReady() calls back ready, a waitForReady call is made and answered', { timeout: 30_000 }, async () => {
    const port = await freePort();
    const viteNode = fileURLToPath(new URL('../../../node_modules/vite-node/vite-node.mjs', import.meta.url));
    const child = fileURLToPath(new URL('./fixtures/wait-for-ready-child.ts', import.meta.url));
    const proc = spawn(process.execPath, [viteNode, child, String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => void (out += String(d)));
    proc.stderr.on('data', () => {});
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    const killer = setTimeout(() => proc.kill(), 25_000);
    cleanup.push(() => {
      clearTimeout(killer);
      proc.kill();
    });
    // The child needs a moment to start (vite-node); the server comes up well after its first dials failed.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const server = new EchoServer();
    await server.listen(port);
    cleanup.push(() => server.close());
    expect(await exited).toBe(0);
    expect(JSON.parse(out.trim().split('\n').pop()!)).toEqual({ ready: 'ready', call: 'ok hi' }); // was: {} (exited at once)
    expect(server.calls.Echo).toBe(1);
  });
});
