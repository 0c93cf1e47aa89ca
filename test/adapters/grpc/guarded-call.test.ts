/**
 * GuardedCall on its own, over a real ConnectionPool and fake grpc-js channels driven by hand:
 * what it keeps while it waits for a channel and replays onto it, going back when the channel
 * it was handed is no longer READY, its deadline while waiting (on a manual clock), and a
 * cancellation while waiting. No sockets, no sleeps.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { PooledChannel } from '../../../src/adapters/grpc/channel-connector.js';
import { ChannelConnectError } from '../../../src/adapters/grpc/connect-error.js';
import { GuardedCall, type GrpcCall } from '../../../src/adapters/grpc/guarded-call.js';
import { PARENT_CANCELLED, type ParentCall } from '../../../src/adapters/grpc/parent.js';
import { SpecTable, grpcHostKey, targetOfKey } from '../../../src/adapters/grpc/target.js';
import { classify } from '../../../src/core/classify.js';
import { ConnectionPool, type ConnectionWatch } from '../../../src/pool/connection-pool.js';
import { ManualClock, flushMicrotasks } from '../../../src/testing/manual-clock.js';
import { ConnectTracker } from '../../../src/adapters/grpc/tracked-credentials.js';
import { testCallHost } from './helpers.js';

/** What a fake grpc-js call was asked to do. */
interface Recorded {
  metadata: grpc.Metadata | undefined;
  messages: string[];
  halfClosed: boolean;
  reads: number;
  cancelled: [grpc.status, string] | undefined;
  listener: grpc.InterceptingListener | undefined;
  /** What `createCall` was given. */
  deadline: grpc.Deadline;
  parent: unknown;
}

/** A grpc-js channel stand-in: its state is set by the test, its calls only record. */
class FakeChannel {
  state = grpc.connectivityState.READY;
  readonly calls: Recorded[] = [];
  closed = false;
  getConnectivityState(): grpc.connectivityState {
    return this.state;
  }
  close(): void {
    this.closed = true;
  }
  createCall(_method: string, deadline: grpc.Deadline, _host: unknown, parent: unknown): GrpcCall {
    const r: Recorded = { metadata: undefined, messages: [], halfClosed: false, reads: 0, cancelled: undefined, listener: undefined, deadline, parent };
    this.calls.push(r);
    return {
      start: (metadata, listener) => {
        r.metadata = metadata;
        r.listener = listener;
      },
      sendMessageWithContext: (context, message) => {
        r.messages.push(String(message));
        context.callback?.();
      },
      halfClose: () => {
        r.halfClosed = true;
      },
      startRead: () => {
        r.reads++;
      },
      cancelWithStatus: (code, details) => {
        r.cancelled = [code, details];
        r.listener?.onReceiveStatus({ code, details, metadata: new grpc.Metadata() });
      },
      getPeer: () => 'fake',
      getCallNumber: () => 0,
      setCredentials: () => {},
      getAuthContext: () => null,
    } as GrpcCall;
  }
}

/** A pool over fake channels whose connects the test resolves one by one. */
function harness() {
  const clock = new ManualClock();
  const specs = new SpecTable({});
  const spec = specs.acquire('fake:1', grpc.credentials.createInsecure(), {});
  const channels: FakeChannel[] = [];
  /** What the pool was handed for each channel, in order. */
  const pooleds: PooledChannel[] = [];
  /** Settles the oldest pending connect: with a channel, or failed with `err`. */
  const pendingConnects: Array<(err?: Error) => void> = [];
  const retired: string[] = [];
  const pool = new ConnectionPool<PooledChannel>({
    breaker: null,
    hostOf: (key) => grpcHostKey(targetOfKey(key)),
    clock,
    connectTimeout: 1_000,
    connector: {
      connect: (key) =>
        new Promise<PooledChannel>((resolve, reject) => {
          pendingConnects.push((err) => {
            if (err !== undefined) return reject(err);
            const channel = new FakeChannel();
            channels.push(channel);
            const pooled: PooledChannel = { channel: channel as unknown as grpc.Channel, key, tracker: new ConnectTracker('tcp'), closed: false, retireIfNotReady: undefined };
            pooleds.push(pooled);
            resolve(pooled);
          });
        }),
      close: (pooled) => {
        pooled.closed = true;
      },
      watch: (pooled: PooledChannel, watch: ConnectionWatch) => {
        pooled.retireIfNotReady = () => {
          retired.push('not ready');
          watch.retire('goaway');
          pooled.closed = true;
        };
      },
    },
  });
  const host = testCallHost(pool, specs, clock, false);
  const statuses: grpc.StatusObject[] = [];
  const messages: unknown[] = [];
  const newCall = (deadline: grpc.Deadline = Infinity, parent: ParentCall | null = null, flags: number | null | undefined = parent === null ? 0 : undefined): GuardedCall => {
    const call = new GuardedCall(host, spec, '/fake.S/M', deadline, undefined, parent, flags);
    call.start(new grpc.Metadata(), {
      onReceiveMetadata: () => {},
      onReceiveMessage: (m) => messages.push(m),
      onReceiveStatus: (s) => statuses.push(s),
    });
    return call;
  };
  const connectNext = async (): Promise<void> => {
    await flushMicrotasks();
    pendingConnects.shift()!();
    await flushMicrotasks();
  };
  const failConnectNext = async (err: Error): Promise<void> => {
    await flushMicrotasks();
    pendingConnects.shift()!(err);
    await flushMicrotasks();
  };
  return { clock, host, pool, channels, pooleds, retired, statuses, messages, pendingConnects, newCall, connectNext, failConnectNext };
}

const ok = (): grpc.StatusObject => ({ code: grpc.status.OK, details: '', metadata: new grpc.Metadata() });

describe('GuardedCall: what it keeps while it waits for a channel', () => {
  it('messages, half-close and a read request sent before the channel exists are replayed onto it, each write acknowledged once', async () => {
    const h = harness();
    const call = h.newCall();
    const acks: string[] = [];
    call.sendMessageWithContext({ callback: () => acks.push('a') }, Buffer.from('a'));
    call.sendMessageWithContext({ callback: () => acks.push('b') }, Buffer.from('b'));
    call.halfClose();
    call.startRead();
    await h.connectNext();
    const rec = h.channels[0]!.calls[0]!;
    expect(rec).toMatchObject({ messages: ['a', 'b'], halfClosed: true, reads: 1 });
    expect(acks).toEqual(['a', 'b']);
    rec.listener!.onReceiveMessage(Buffer.from('reply'));
    rec.listener!.onReceiveStatus(ok());
    await flushMicrotasks();
    expect(h.statuses.map((s) => s.code)).toEqual([grpc.status.OK]);
    expect(h.messages.map(String)).toEqual(['reply']);
    await h.pool.close();
  });

  it('a channel handed out after it left READY is retired, and the call goes back to a fresh one and is resent whole', async () => {
    const h = harness();
    const first = h.newCall();
    await h.connectNext();
    h.channels[0]!.calls[0]!.listener!.onReceiveStatus(ok()); // warm: channel 0 is current
    await flushMicrotasks();
    h.channels[0]!.state = grpc.connectivityState.IDLE; // its transport went, the watcher not told yet
    const call = h.newCall();
    const acks: string[] = [];
    call.sendMessageWithContext({ callback: () => acks.push('m') }, Buffer.from('m'));
    call.halfClose();
    await flushMicrotasks();
    expect(h.retired).toEqual(['not ready']);
    expect(h.channels[0]!.calls).toHaveLength(1); // nothing created on the stale channel
    await h.connectNext();
    const rec = h.channels[1]!.calls[0]!;
    expect(rec).toMatchObject({ messages: ['m'], halfClosed: true });
    expect(acks).toEqual(['m']);
    rec.listener!.onReceiveStatus(ok());
    await flushMicrotasks();
    expect(h.statuses.map((s) => s.code)).toEqual([grpc.status.OK, grpc.status.OK]);
    void first;
    await h.pool.close();
  });
});

describe('GuardedCall: ending while it waits', () => {
  it('its deadline ends it while the connect is still pending; the connect carries on', async () => {
    const h = harness();
    h.newCall(Date.now() + 200);
    await flushMicrotasks();
    await h.clock.tick(200);
    expect(h.statuses).toHaveLength(1);
    expect(h.statuses[0]).toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
    expect(h.statuses[0]!.details).toMatch(/^dialguard: deadline of \d+ ms exceeded/);
    await h.connectNext(); // the shared attempt still lands, and nobody rides it
    expect(h.channels[0]!.calls).toHaveLength(0);
    await h.pool.close();
  });

  it('a cancel while waiting answers with the cancel status on a later tick, never inside cancel() (issue 18 break 3)', async () => {
    const h = harness();
    const call = h.newCall();
    call.cancelWithStatus(grpc.status.CANCELLED, 'Cancelled on client');
    expect(h.statuses).toHaveLength(0); // not re-entrantly inside the caller's own cancel()
    await new Promise<void>((resolve) => process.nextTick(resolve));
    expect(h.statuses).toEqual([expect.objectContaining({ code: grpc.status.CANCELLED, details: 'Cancelled on client' })]);
    await h.connectNext();
    expect(h.channels[0]!.calls).toHaveLength(0);
    await h.pool.close();
  });

  it('a cancel once riding cancels the grpc-js call, whose status is the answer', async () => {
    const h = harness();
    const call = h.newCall();
    await h.connectNext();
    call.cancelWithStatus(grpc.status.CANCELLED, 'Cancelled on client');
    await flushMicrotasks();
    expect(h.channels[0]!.calls[0]!.cancelled).toEqual([grpc.status.CANCELLED, 'Cancelled on client']);
    expect(h.statuses.map((s) => s.code)).toEqual([grpc.status.CANCELLED]);
    await h.pool.close();
  });
});

/** A server call standing in as a parent: its deadline, and 'cancelled' when the test says. */
class FakeParent extends EventEmitter {
  constructor(readonly deadline: grpc.Deadline = Infinity) {
    super();
  }
  getDeadline(): grpc.Deadline {
    return this.deadline;
  }
  cancel(): void {
    this.emit('cancelled', 'cancelled');
  }
  get asParent(): ParentCall {
    return this as unknown as ParentCall;
  }
}

const { DEADLINE, CANCELLATION } = grpc.propagate;
const parentCancelled = expect.objectContaining({ code: grpc.status.CANCELLED, details: PARENT_CANCELLED });

describe('GuardedCall: its parent (`{ parent: call }`), honoured as grpc-js does, whatever the call is doing', () => {
  it("waiting for a channel: the parent's deadline ends it when earlier than its own (DEADLINE flag; default flags too)", async () => {
    for (const flags of [DEADLINE, undefined]) {
      const h = harness();
      const parent = new FakeParent(Date.now() + 200);
      h.newCall(Date.now() + 10_000, parent.asParent, flags);
      await flushMicrotasks();
      await h.clock.tick(150); // grpc deadlines are wall-clock: a ms may pass between here and the timer
      expect(h.statuses).toHaveLength(0);
      await h.clock.tick(50);
      expect(h.statuses).toEqual([expect.objectContaining({ code: grpc.status.DEADLINE_EXCEEDED })]);
      expect(parent.listenerCount('cancelled')).toBe(0);
      await h.connectNext(); // the shared connect still lands; nobody rides it
      expect(h.channels[0]!.calls).toHaveLength(0);
      await h.pool.close();
    }
  });

  it("without the DEADLINE flag the parent's deadline is not its own; an earlier own deadline stays", async () => {
    const h = harness();
    const parent = new FakeParent(Date.now() + 200);
    h.newCall(Date.now() + 500, parent.asParent, CANCELLATION);
    await flushMicrotasks();
    await h.clock.tick(200);
    expect(h.statuses).toHaveLength(0);
    await h.clock.tick(300);
    expect(h.statuses).toEqual([expect.objectContaining({ code: grpc.status.DEADLINE_EXCEEDED })]);
    const early = harness();
    early.newCall(Date.now() + 100, new FakeParent(Date.now() + 5_000).asParent, DEADLINE);
    await flushMicrotasks();
    await early.clock.tick(100);
    expect(early.statuses).toEqual([expect.objectContaining({ code: grpc.status.DEADLINE_EXCEEDED })]);
    await h.connectNext();
    await early.connectNext();
    await h.pool.close();
    await early.pool.close();
  });

  it('waiting for a channel: the parent\'s cancellation ends it with CANCELLED "Cancelled by parent call", on a later tick, and it stops listening', async () => {
    const h = harness();
    const parent = new FakeParent();
    h.newCall(Infinity, parent.asParent, undefined); // grpc's default flags
    expect(parent.listenerCount('cancelled')).toBe(1);
    parent.cancel();
    expect(h.statuses).toHaveLength(0); // never inside the parent's own emit
    await flushMicrotasks();
    expect(h.statuses).toEqual([parentCancelled]);
    expect(parent.listenerCount('cancelled')).toBe(0);
    await h.connectNext();
    expect(h.channels[0]!.calls).toHaveLength(0);
    await h.pool.close();
  });

  it('riding: the grpc-js call runs by the earlier deadline without the parent (no listener grpc-js never removes); a cancellation cancels it, never resent', async () => {
    const h = harness();
    const at = Date.now() + 5_000;
    const parent = new FakeParent(at);
    h.newCall(Infinity, parent.asParent, undefined);
    await h.connectNext();
    const rec = h.channels[0]!.calls[0]!;
    expect(rec.parent).toBeNull();
    expect(rec.deadline).toBe(at);
    expect(parent.listenerCount('cancelled')).toBe(1); // its own, only
    parent.cancel();
    await flushMicrotasks();
    expect(rec.cancelled).toEqual([grpc.status.CANCELLED, PARENT_CANCELLED]);
    expect(h.statuses).toEqual([parentCancelled]);
    expect(parent.listenerCount('cancelled')).toBe(0);
    expect(h.pendingConnects).toHaveLength(0);
    expect(h.channels[0]!.calls).toHaveLength(1);
    await h.pool.close();
  });

  it("backing off between retries: the parent's cancellation ends it, and no further attempt is made", async () => {
    const h = harness();
    (h.host as { retry: unknown }).retry = { maxAttempts: 3, backoff: () => 1_000, budget: null, clock: h.clock, statuses: new Set<number>(), shutdown: new AbortController().signal };
    const parent = new FakeParent();
    h.newCall(Infinity, parent.asParent, undefined);
    await h.failConnectNext(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }));
    await flushMicrotasks();
    expect(h.statuses).toHaveLength(0); // backing off
    expect(h.clock.pending).toBeGreaterThan(0);
    parent.cancel();
    await flushMicrotasks();
    expect(h.statuses).toEqual([parentCancelled]);
    expect(parent.listenerCount('cancelled')).toBe(0);
    await h.clock.tick(1_000);
    await flushMicrotasks();
    expect(h.pendingConnects).toHaveLength(0); // the retry was not made
    expect(h.statuses).toHaveLength(1);
    await h.pool.close();
  });

  it('without the CANCELLATION flag it never listens; with no parent nothing is done', async () => {
    const h = harness();
    const parent = new FakeParent();
    const call = h.newCall(Infinity, parent.asParent, DEADLINE);
    expect(parent.listenerCount('cancelled')).toBe(0);
    parent.cancel();
    await flushMicrotasks();
    expect(h.statuses).toHaveLength(0);
    call.cancelWithStatus(grpc.status.CANCELLED, 'Cancelled on client');
    await flushMicrotasks();
    await h.connectNext();
    await h.pool.close();
  });
});

describe('GuardedCall: "not sent" survives a resend that found no server (an outside review, r145)', () => {
  it('a call whose first channel said it never left, resent to a refused connect, ends not sent', async () => {
    const h = harness();
    const first = h.newCall();
    await h.connectNext();
    h.channels[0]!.calls[0]!.listener!.onReceiveStatus(ok()); // warm: channel 0 is current
    await flushMicrotasks();
    const call = h.newCall();
    call.sendMessageWithContext({}, Buffer.from('m'));
    call.halfClose();
    await flushMicrotasks();
    const rec = h.channels[0]!.calls[1]!;
    expect(rec.messages).toEqual(['m']); // a grpc-js call was started with it
    // The server died in the same tick: the channel is retired under the call, and grpc-js says
    // the call found no connection (the pool goes back for a fresh one as never sent).
    h.pooleds[0]!.retireIfNotReady!();
    rec.listener!.onReceiveStatus({ code: grpc.status.UNAVAILABLE, details: 'No connection established. Last error: read ECONNRESET', metadata: new grpc.Metadata() });
    await flushMicrotasks();
    // The redial is refused, as the guard's connector reports it (grpc-js's words, the guard's mark).
    const refused = { code: grpc.status.UNAVAILABLE, details: 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1', metadata: new grpc.Metadata() };
    await h.failConnectNext(new ChannelConnectError('fake:1', refused));
    await flushMicrotasks();
    expect(h.statuses).toHaveLength(2);
    const last = h.statuses[1]!;
    expect(last.code).toBe(grpc.status.UNAVAILABLE);
    expect(last.details).toBe(refused.details);
    expect(classify(last)).toMatchObject({ kind: 'dial', notSent: true });
    void first;
    await h.pool.close();
  });
});
