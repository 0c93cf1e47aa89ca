/**
 * The healthy path pays only for what can happen: counted, not timed, so a later change that
 * adds per-call work shows here whatever the machine's speed.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { Agent, type Dispatcher, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { type GuardedRetryOptions, guardedRetry } from '../../../src/adapters/undici/index.js';
import { onRetryEvent } from '../../../src/retry/retry.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { countAbortControllers, countingClock } from '../../helpers/hot-path.js';
import { answer, guarded, httpServer, leakChecked } from './helpers.js';

leakChecked();

const CALLS = 20;

describe('undici GuardedAgent: what a healthy call creates', () => {
  it('a call with no timeout arms no timer and makes no AbortController (a dial makes one of each)', async () => {
    await using server = await httpServer(answer());
    const clock = countingClock();
    const { agent } = guarded({ clock });
    await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump(); // the first dial happens here
    const [armed, dials] = [clock.armed, server.connections];
    const controllers = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump();
    });
    // undici may open a second connection on its own (raw undici does the same here): each dial
    // arms its connect timeout, and no call arms anything more.
    const dialled = server.connections - dials;
    expect(clock.armed - armed).toBe(dialled);
    expect(controllers).toBe(dialled); // a dial's own, to stop its establishment; none per call
  });

  it('a call with no timeout reads the clock only when someone hears its result (its start and its end)', async () => {
    await using server = await httpServer(answer());
    // The retrying layer alone on the counting clock (a dial's reads are its connector's).
    const readsPerCall = async (options: GuardedRetryOptions, listen = false): Promise<number> => {
      const clock = countingClock();
      const agent = new Agent().compose(guardedRetry({ clock, budget: null, ...options }));
      try {
        await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump();
        const reads = clock.reads;
        const stop = listen ? onRetryEvent('settled', () => {}) : undefined;
        try {
          for (let i = 0; i < CALLS; i++) await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump();
        } finally {
          stop?.();
        }
        return (clock.reads - reads) / CALLS;
      } finally {
        await agent.destroy();
      }
    };
    expect(await readsPerCall({})).toBe(0); // was 1: its start, which nothing then used
    expect(await readsPerCall({ onResult: () => {} })).toBe(2); // its elapsed time
    expect(await readsPerCall({}, true)).toBe(2); // a `settled` listener hears it too
    expect(await readsPerCall({ timeout: 10_000 })).toBe(1); // its deadline
  });

  it('a call with a timeout arms exactly one timer, cleared when the response ends', async () => {
    await using server = await httpServer(answer());
    const clock = countingClock();
    const { agent } = guarded({ clock, timeout: 10_000 });
    await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump();
    const [armed, cleared, dials] = [clock.armed, clock.cleared, server.connections];
    const controllers = await countAbortControllers(async () => {
      for (let i = 0; i < CALLS; i++) await (await request(`${server.origin}/`, { dispatcher: agent })).body.dump();
    });
    const dialled = server.connections - dials; // a dial arms its own connect timeout, and clears it
    expect(clock.armed - armed).toBe(CALLS + dialled);
    expect(clock.cleared - cleared).toBe(CALLS + dialled);
    expect(controllers).toBe(dialled);
  });

  it('the retrying layer reads no request option the caller did not set (each such read costs ~0.1 µs)', async () => {
    // undici's request() and fetch() build the options by spreading; V8 reads a field missing from
    // such an object slowly, so the layer asks `in` first. A proxy sees every read of an absent key.
    const absentReads: string[] = [];
    const given = { origin: 'http://127.0.0.1:1', path: '/', method: 'GET' };
    const opts = new Proxy(given, {
      get(target, key, receiver) {
        if (!(key in target)) absentReads.push(String(key));
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const done: { resolve: (status: number) => void; reject: (err: Error) => void; promise?: Promise<number> } = { resolve: () => {}, reject: () => {} };
    done.promise = new Promise<number>((resolve, reject) => Object.assign(done, { resolve, reject }));
    const answerAtOnce: Dispatcher.Dispatch = (_o, handler) => {
      const h = handler as Dispatcher.DispatchHandler & Record<string, (...a: unknown[]) => unknown>;
      queueMicrotask(() => {
        h.onConnect!(() => {});
        h.onHeaders!(200, [], () => {}, 'OK');
        h.onData!(Buffer.from('ok'));
        h.onComplete!([]);
      });
      return true;
    };
    const dispatch = guardedRetry({ breaker: new HostBreaker(), budget: null })(answerAtOnce);
    let status = 0;
    dispatch(opts as Dispatcher.DispatchOptions, {
      onConnect: () => {},
      onError: (err: Error) => done.reject(err),
      onHeaders: (s: number) => {
        status = s;
        return true;
      },
      onData: () => true,
      onComplete: () => done.resolve(status),
    } as unknown as Dispatcher.DispatchHandler);
    expect(await done.promise).toBe(200);
    expect(absentReads).toEqual([]);
  });

  it('a healthy call keeps no more than its own GuardedCall and the abort it hands over (bytes counted on the heap, not timed)', () => {
    // Each byte a request allocates is CPU in the real lanes (bench/undici: an extra 340-byte
    // object per request cost ~0.6 µs and ~0.8 % of throughput). The call was 416 bytes, its
    // abort an arrow with its context (~140); they are ~280 and a bound function (~50) now (330 bytes a call kept, from 512). The
    // bound is set with room for V8's rounding, below where the fields moved out would take it.
    const gc = exposedGc();
    const N = 20_000;
    const completes: Dispatcher.Dispatch = (_o, handler) => {
      const h = handler as Dispatcher.DispatchHandler & Record<string, (...a: unknown[]) => unknown>;
      h.onConnect!(() => {});
      h.onRequestSent?.();
      h.onHeaders!(200, [], () => {}, 'OK');
      h.onData!(Buffer.from('ok'));
      h.onComplete!([]);
      return true;
    };
    const dispatch = guardedRetry({ breaker: new HostBreaker(), budget: null })(completes);
    // The caller keeps its abort (undici's RequestHandler does), so the call is kept through it.
    const callers = Array.from({ length: N }, () => ({ abort: undefined as unknown, onConnect(abort: unknown) { this.abort = abort; }, onError() {}, onHeaders: () => true, onData: () => true, onComplete() {} }));
    const opts = { origin: 'http://127.0.0.1:1', path: '/', method: 'GET' } as Dispatcher.DispatchOptions;
    for (let i = 0; i < 100; i++) dispatch(opts, { ...callers[0]! } as unknown as Dispatcher.DispatchHandler); // warm: shapes settle
    gc();
    const before = process.memoryUsage().heapUsed;
    for (const caller of callers) dispatch(opts, caller as unknown as Dispatcher.DispatchHandler);
    gc();
    const perCall = (process.memoryUsage().heapUsed - before) / N;
    expect(callers.every((c) => typeof c.abort === 'function')).toBe(true);
    expect(perCall).toBeGreaterThan(100); // the measure sees the calls at all
    expect(perCall).toBeLessThan(400); // 330 now; 512 before
  });
});

/** `gc()`, exposed for this process (vitest's workers start without --expose-gc). */
function exposedGc(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}
