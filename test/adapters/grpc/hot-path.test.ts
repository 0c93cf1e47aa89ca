/**
 * What a healthy guarded gRPC call creates beyond what the raw grpc-js call does: counted, not
 * timed, so a later change that adds per-call work shows here whatever the machine's speed
 * (issue 14). Timers through an injected clock, AbortControllers through a counting subclass,
 * promises and ticks through async_hooks (the same calls against the same in-process server, raw
 * and guarded, so grpc-js's own share cancels out), and the listener handed to grpc-js (shared
 * methods, no closures made per call).
 */
import { createHook } from 'node:async_hooks';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { PooledChannel } from '../../../src/adapters/grpc/channel-connector.js';
import { GuardedCall, type GrpcCall } from '../../../src/adapters/grpc/guarded-call.js';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { SpecTable } from '../../../src/adapters/grpc/target.js';
import { ConnectTracker } from '../../../src/adapters/grpc/tracked-credentials.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { ConnectionPool } from '../../../src/pool/connection-pool.js';
import { countAbortControllers, countingClock } from '../../helpers/hot-path.js';
import { collectGarbage } from '../../helpers/gc.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoServer, testCallHost } from './helpers.js';

const cleanup = leakCheckEach();
const CALLS = 40;

/**
 * Promises, ticks and timers one call of `fn` creates (the async resources Node reports as
 * PROMISE, TickObject and Timeout): the fewest any of `CALLS` sequential calls made. The hook sees
 * everything in the process, the in-process server's and grpc-js's own timers (a keep-alive, an
 * idle check) included; those only ever add to a call's count, so the fewest is the call's own.
 */
async function resourcesPerCall(fn: () => Promise<unknown>): Promise<{ promises: number; ticks: number; timeouts: number }> {
  let promises = 0;
  let ticks = 0;
  let timeouts = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') promises++;
      else if (type === 'TickObject') ticks++;
      else if (type === 'Timeout') timeouts++;
    },
  });
  const fewest = { promises: Infinity, ticks: Infinity, timeouts: Infinity };
  for (let i = 0; i < CALLS; i++) {
    promises = ticks = timeouts = 0;
    hook.enable();
    try {
      await fn();
    } finally {
      hook.disable();
    }
    fewest.promises = Math.min(fewest.promises, promises);
    fewest.ticks = Math.min(fewest.ticks, ticks);
    fewest.timeouts = Math.min(fewest.timeouts, timeouts);
  }
  return fewest;
}

describe('grpc guard: what a healthy call creates (issue 14)', () => {
  it('a unary call on a READY channel arms no timer, makes no AbortController, no tick, and no promise more than the raw call', async () => {
    const server = await echoServer();
    cleanup.push(() => server.close());
    const clock = countingClock();
    const guard = new GrpcGuard({ connectTimeout: 1_000, breaker: new HostBreaker(), clock });
    cleanup.push(() => guard.close());
    const guarded = new EchoClient(server.address, grpc.credentials.createInsecure(), guard.clientOptions());
    const raw = new EchoClient(server.address, grpc.credentials.createInsecure());
    cleanup.push(() => {
      guarded.close();
      raw.close();
    });
    const deadline = (): number => Date.now() + 10_000; // a deadline the transport enforces: no timer of ours
    // Both channels connected, and both paths run once (lazy module code, first-use buffers).
    for (let i = 0; i < 3; i++) {
      await call(guarded, 'Echo', 'x', { deadline: deadline() });
      await call(raw, 'Echo', 'x', { deadline: deadline() });
    }
    const armed = clock.armed;
    let guardedCounts = { promises: 0, ticks: 0, timeouts: 0 };
    const controllers = await countAbortControllers(async () => {
      guardedCounts = await resourcesPerCall(() => call(guarded, 'Echo', 'x', { deadline: deadline() }));
    });
    const rawCounts = await resourcesPerCall(() => call(raw, 'Echo', 'x', { deadline: deadline() }));

    expect(server.calls.Echo).toBe(2 * CALLS + 6);
    expect(guard.stats()).toMatchObject({ opened: 1, connections: 1, gone: 0 });
    expect(clock.armed - armed).toBe(0);
    expect(controllers).toBe(0);
    expect(guardedCounts.ticks - rawCounts.ticks).toBe(0);
    expect(guardedCounts.timeouts - rawCounts.timeouts).toBe(0);
    // Before issue 14: 8 (the first attempt's status was read in a promise of its own, and the
    // pool's `use` made 5). Then 4: the call's ride and the reading of its outcome, and the
    // pool's promise and its reading of `fn`'s. None since the call rides through the pool's
    // `ride()`, which takes the call's end from its grpc-js listener.
    expect(guardedCounts.promises - rawCounts.promises).toBe(0);
  });

  it('the listener handed to grpc-js is one object per call whose methods are shared: no closures made per call', async () => {
    const { listeners, clock, one } = keptListeners();
    const statuses: grpc.StatusObject[] = [];
    for (let i = 0; i < 3; i++) statuses.push(await one().status);
    expect(statuses.map((s) => s.code)).toEqual([0, 0, 0]);
    expect(listeners).toHaveLength(3);
    const [a, b] = listeners as [grpc.InterceptingListener, grpc.InterceptingListener];
    expect(a).not.toBe(b);
    expect(a.onReceiveStatus).toBe(b.onReceiveStatus);
    expect(a.onReceiveMessage).toBe(b.onReceiveMessage);
    expect(a.onReceiveMetadata).toBe(b.onReceiveMetadata);
    expect(clock.armed).toBe(0);
  });

  it('a finished call is not kept by the listener grpc-js keeps: node:http2 holds a finished stream past a young-generation GC, and the call must not be promoted with it', async () => {
    const { listeners, one } = keptListeners();
    // The calls run in a frame of their own: this suspended test frame would keep the last one.
    const run = async (): Promise<Array<WeakRef<GuardedCall>>> => {
      const refs: Array<WeakRef<GuardedCall>> = [];
      for (let i = 0; i < 3; i++) {
        const { call, status } = one();
        refs.push(new WeakRef(call));
        expect((await status).code).toBe(grpc.status.OK);
      }
      return refs;
    };
    const refs = await run();
    await collectGarbage();
    expect(listeners).toHaveLength(3); // what grpc-js would still hold: each call's listener
    expect(refs.map((r) => r.deref() === undefined)).toEqual([true, true, true]);
  });
});

/**
 * Guarded calls over a fake READY channel whose calls answer OK on a microtask and, as grpc-js's
 * chain under a finished http2 stream does, keep the listener they were given (in `listeners`).
 */
function keptListeners(): {
  listeners: grpc.InterceptingListener[];
  clock: ReturnType<typeof countingClock>;
  one: () => { call: GuardedCall; status: Promise<grpc.StatusObject> };
} {
  const listeners: grpc.InterceptingListener[] = [];
  const fake = {
    getConnectivityState: () => grpc.connectivityState.READY,
    createCall: (): GrpcCall => {
      let listener: grpc.InterceptingListener | undefined;
      let message: Buffer | undefined;
      return {
        start: (_metadata: grpc.Metadata, l: grpc.InterceptingListener) => {
          listener = l;
          listeners.push(l);
        },
        sendMessageWithContext: (_context: unknown, m: Buffer) => {
          message = m;
        },
        halfClose: () => {
          queueMicrotask(() => {
            listener!.onReceiveMetadata(new grpc.Metadata());
            listener!.onReceiveMessage(message);
            listener!.onReceiveStatus({ code: grpc.status.OK, details: '', metadata: new grpc.Metadata() });
          });
        },
        startRead: () => {},
        cancelWithStatus: () => {},
        getPeer: () => 'fake',
        getCallNumber: () => 0,
        setCredentials: () => {},
        getAuthContext: () => null,
      } as unknown as GrpcCall;
    },
  };
  const pooled: PooledChannel = { channel: fake as unknown as grpc.Channel, key: 'k', tracker: new ConnectTracker('tcp'), closed: false, retireIfNotReady: undefined };
  const pool = new ConnectionPool<PooledChannel>({ breaker: null, hostOf: () => 'fake:1', connector: { connect: async () => pooled, close: () => {} } });
  cleanup.push(() => pool.close());
  const specs = new SpecTable({});
  const spec = specs.acquire('fake:1', grpc.credentials.createInsecure(), {});
  const clock = countingClock();
  const host = testCallHost(pool, specs, clock, true);
  const one = (): { call: GuardedCall; status: Promise<grpc.StatusObject> } => {
    const call = new GuardedCall(host, spec, '/fake.S/M', Date.now() + 10_000, undefined, null, 0);
    const status = new Promise<grpc.StatusObject>((resolve) => {
      call.start(new grpc.Metadata(), { onReceiveMetadata: () => {}, onReceiveMessage: () => {}, onReceiveStatus: resolve });
    });
    call.sendMessageWithContext({}, Buffer.from('x'));
    call.halfClose();
    return { call, status };
  };
  return { listeners, clock, one };
}
