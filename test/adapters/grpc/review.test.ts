/**
 * Defects of issue 12's classes found reviewing the gRPC adapter after the morning's merges, each
 * reproduced on loopback and counted (leases, calls the server saw), not only timed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { GrpcGuard, type GrpcGuardOptions } from '../../../src/adapters/grpc/index.js';
import { type Clock, type TimerHandle, systemClock } from '../../../src/core/clock.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { onRetryEvent } from '../../../src/retry/retry.js';
import { EchoClient, call, echoServer, echoService, failure } from './helpers.js';

const cleanup = leakCheckEach();

function setup(address: string, options: GrpcGuardOptions = {}): { guard: GrpcGuard; client: EchoClient } {
  const guard = new GrpcGuard({ breaker: new HostBreaker({ minOutage: 0 }), closeTimeout: 2_000, ...options });
  const client = new EchoClient(address, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => guard.close());
  cleanup.push(() => client.close());
  return { guard, client };
}

/**
 * Runs `body` with this process's uncaught-exception handlers (vitest's among them) replaced by
 * one that records: a caller's callback that throws is uncaught with raw grpc-js too, and that
 * is not what these tests judge. Returns what was caught.
 */
async function catchingUncaught(body: () => Promise<void>): Promise<unknown[]> {
  const caught: unknown[] = [];
  const saved = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  const record = (err: unknown): void => void caught.push(err);
  process.on('uncaughtException', record);
  try {
    await body();
  } finally {
    process.off('uncaughtException', record);
    for (const l of saved) process.on('uncaughtException', l);
  }
  return caught;
}

describe('grpc guard review: a caller callback that throws', () => {
  it('a unary callback that throws on success strands nothing: no lease left, close() does not wait out closeTimeout', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { guard, client } = setup(server.address);
    // A first call makes the channel READY, so the second rides it from the start.
    await new Promise<void>((resolve, reject) => client.Echo(Buffer.from('w'), new grpc.Metadata(), {}, (e) => (e ? reject(e) : resolve())));
    const caught = await catchingUncaught(async () => {
      await new Promise<void>((resolve) => {
        client.Echo(Buffer.from('x'), new grpc.Metadata(), {}, () => {
          setImmediate(resolve);
          throw new Error('caller callback threw');
        });
      });
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    });
    expect(caught.map(String)).toEqual(['Error: caller callback threw']); // as raw grpc-js: uncaught, once
    expect(server.calls.Echo).toBe(2);
    expect(guard.stats()).toMatchObject({ leases: 0, connections: 1 });
    const t0 = performance.now();
    await guard.close();
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(guard.stats()).toMatchObject({ connections: 0, attempts: 0, leases: 0 });
  });
});

/** The system clock, counting the timers set through it. */
function countingClock(): Clock & { timers: number } {
  const clock = {
    timers: 0,
    now: () => systemClock.now(),
    setTimeout: (callback: () => void, ms: number): TimerHandle => {
      clock.timers++;
      return systemClock.setTimeout(callback, ms);
    },
    clearTimeout: (handle: TimerHandle) => systemClock.clearTimeout(handle),
  };
  return clock;
}

describe('grpc guard review: waits longer than a timer can hold', () => {
  it('a wait-for-ready call to a host isolated until released waits out its deadline on a few timers, not one every millisecond', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const breaker = new HostBreaker({ minOutage: 0 });
    const release = breaker.isolate(server.address); // no end: until released
    const clock = countingClock();
    const { client } = setup(server.address, { breaker, clock });
    const t0 = performance.now();
    const err = await failure(
      new Promise((resolve, reject) =>
        client.Echo(Buffer.from('x'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 300 }, (e, r) => (e ? reject(e) : resolve(r))),
      ),
    );
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    // Infinity ms (the isolation's retry-after) fires after 1 ms in Node: about 300 timers here.
    expect(clock.timers).toBeLessThan(10);
    expect(server.calls.Echo).toBe(0);
    release();
  });

  it('and one still waiting when the isolation is released is served within about a second of it', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const breaker = new HostBreaker({ minOutage: 0 });
    const release = breaker.isolate(server.address);
    const clock = countingClock();
    const { client } = setup(server.address, { breaker, clock });
    const served = new Promise<Buffer>((resolve, reject) =>
      client.Echo(Buffer.from('released'), new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 5_000 }, (e, r) => (e ? reject(e) : resolve(r!))),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    const t0 = performance.now();
    expect(String(await served)).toBe('released');
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(server.calls.Echo).toBe(1);
    expect(clock.timers).toBeLessThan(20);
  });
});

describe('grpc guard review: a throwing idempotent()', () => {
  it('the call is served once (taken as not idempotent), its callback runs once, nothing throws at the caller; one warning', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on('warning', onWarning);
    cleanup.push(() => process.off('warning', onWarning));
    const { guard, client } = setup(server.address, {
      idempotent: () => {
        throw new Error('idempotent down');
      },
    });
    let callbacks = 0;
    const answers: string[] = [];
    for (let i = 0; i < 2; i++) {
      await new Promise<void>((resolve) => {
        // No READY channel at first: the call waits for one, under a deadline timer.
        client.Echo(Buffer.from(`x${i}`), new grpc.Metadata(), { deadline: Date.now() + 300 }, (e, r) => {
          callbacks++;
          answers.push(e ? `error ${e.code}` : String(r));
          resolve();
        });
      });
    }
    // Past the first call's deadline: a timer left armed would call back a second time.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(answers).toEqual(['x0', 'x1']);
    expect(callbacks).toBe(2);
    expect(server.calls.Echo).toBe(2);
    expect(warnings.filter((w) => w.includes('idempotent() threw'))).toHaveLength(1);
    expect(guard.stats()).toMatchObject({ leases: 0 });
  });
});

describe('grpc guard review: channel options grpc-js refuses', () => {
  it('a client whose service config does not parse throws at construction, as a raw client does; nothing is dialled or counted, and another client is served', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0 });
    const { guard, client } = setup(server.address, { breaker, retry: false });
    const bad = { 'grpc.service_config': 'not json' };
    expect(() => new EchoClient(server.address, grpc.credentials.createInsecure(), bad)).toThrow(/JSON/); // raw grpc-js
    // Unchecked, each call's connect threw before any I/O and counted as a failed dial: three
    // such calls opened the host for the correctly configured client.
    expect(() => new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions(bad))).toThrow(/JSON/);
    expect(breaker.stats()).toMatchObject({ failed: 0, opened: 0, refused: 0 });
    expect(String(await call(client, 'Echo', 'ok'))).toBe('ok');
  });
});

describe('grpc guard review: unix socket targets', () => {
  it('a dead socket does not refuse a live one whose path differs only in case (was: one breaker key, the live one refused 10 of 10)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dialguard-unix-'));
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    let runs = 0;
    const server = new grpc.Server();
    server.addService(
      echoService,
      { Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => (runs++, cb(null, c.request)), Count: () => {}, Hold: () => {}, Fail: () => {}, Sum: () => {}, Chat: () => {} } as grpc.UntypedServiceImplementation,
    );
    const live = path.join(dir, 'svc.sock');
    await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${live}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
    cleanup.push(() => server.forceShutdown());
    const breaker = new HostBreaker({ failureThreshold: 2, minOutage: 0 });
    const guard = new GrpcGuard({ breaker, retry: false, closeTimeout: 500 });
    cleanup.push(() => guard.close());
    const dead = new EchoClient(`unix:${path.join(dir, 'Svc.sock')}`, grpc.credentials.createInsecure(), guard.clientOptions());
    const alive = new EchoClient(`unix:${live}`, grpc.credentials.createInsecure(), guard.clientOptions());
    cleanup.push(() => dead.close(), () => alive.close());
    for (let i = 0; i < 4; i++) await failure(call(dead, 'Echo', 'x', { deadline: Date.now() + 2_000 }));
    expect(breaker.stats().opened).toBeGreaterThanOrEqual(1); // the dead path is open
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(String(await call(alive, 'Echo', `${i}`, { deadline: Date.now() + 2_000 })));
    expect(answers).toEqual(['0', '1', '2', '3', '4']);
    expect(runs).toBe(5);
  });
});

describe('grpc guard review: every call is reported once when it ends', () => {
  it('calls that end on their first attempt publish retry:settled too (was: only retried calls; the call.duration histogram saw none of the rest, an outside review)', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const { client } = setup(server.address);
    const seen: Array<{ ok: boolean; attempts: number; kind: string | undefined }> = [];
    const off = onRetryEvent('settled', (e) => void seen.push({ ok: e.ok, attempts: e.attempts, kind: e.kind }));
    cleanup.push(off);
    for (let i = 0; i < 3; i++) await call(client, 'Echo', `${i}`);
    for (let i = 0; i < 3; i++) await failure(call(client, 'Fail', `${grpc.status.NOT_FOUND}:no such key`));
    off();
    expect(server.calls).toMatchObject({ Echo: 3, Fail: 3 });
    expect(seen).toEqual([
      ...Array(3).fill({ ok: true, attempts: 1, kind: undefined }),
      ...Array(3).fill({ ok: false, attempts: 1, kind: 'application' }),
    ]);
  });
});
