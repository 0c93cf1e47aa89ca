/**
 * GuardedCall on its own, over a real ConnectionPool and fake grpc-js channels driven by hand:
 * what it keeps while it waits for a channel and replays onto it, going back when the channel
 * it was handed is no longer READY, its deadline while waiting (on a manual clock), and a
 * cancellation while waiting. No sockets, no sleeps.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { PooledChannel } from '../../../src/adapters/grpc/channel-connector.js';
import { GuardedCall, type GrpcCall } from '../../../src/adapters/grpc/guarded-call.js';
import { SpecTable, grpcHostKey, targetOfKey } from '../../../src/adapters/grpc/target.js';
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
  createCall(): GrpcCall {
    const r: Recorded = { metadata: undefined, messages: [], halfClosed: false, reads: 0, cancelled: undefined, listener: undefined };
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
  const pendingConnects: Array<() => void> = [];
  const retired: string[] = [];
  const pool = new ConnectionPool<PooledChannel>({
    breaker: null,
    hostOf: (key) => grpcHostKey(targetOfKey(key)),
    clock,
    connectTimeout: 1_000,
    connector: {
      connect: (key) =>
        new Promise<PooledChannel>((resolve) => {
          pendingConnects.push(() => {
            const channel = new FakeChannel();
            channels.push(channel);
            resolve({ channel: channel as unknown as grpc.Channel, key, tracker: new ConnectTracker('tcp'), closed: false, retireIfNotReady: undefined });
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
  const newCall = (deadline: grpc.Deadline = Infinity): GuardedCall => {
    const call = new GuardedCall(host, spec, '/fake.S/M', deadline, undefined, null, 0);
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
  return { clock, pool, channels, retired, statuses, messages, newCall, connectNext };
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
