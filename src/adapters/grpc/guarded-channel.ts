/**
 * The channel a guarded client holds: a grpc-js `ChannelInterface` in front of the guard's pool.
 * Every client naming the same target, credentials and options rides the same pooled channel;
 * this object only hands out {@link GuardedCall}s and reports the pooled channel's state.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import type { TimerHandle } from '../../core/clock.js';
import type { ChannelConnector } from './channel-connector.js';
import { remaining } from './call-retry.js';
import { type CallHost, type CallOwner, GuardedCall } from './guarded-call.js';
import { type ChannelSpec, asGrpcSpellsIt } from './target.js';
import { MAX_DURATION } from '../../core/validate.js';

type ChannelRef = ReturnType<grpc.ChannelInterface['getChannelzRef']>;
type ServerSurfaceCall = Parameters<grpc.ChannelInterface['createCall']>[3];

/** What a guarded channel needs from its guard. */
export interface ChannelHost extends CallHost {
  readonly connector: ChannelConnector;
  /** Starts connecting `spec`'s channel if nothing is (for `getConnectivityState(true)`). */
  warm(spec: ChannelSpec): void;
}

interface Watcher {
  readonly currentState: grpc.connectivityState;
  readonly callback: (error?: Error) => void;
  timer: TimerHandle | undefined;
}

const { IDLE, SHUTDOWN, TRANSIENT_FAILURE } = grpc.connectivityState;

/** A grpc-js channel whose calls ride the guard's pooled channel. */
export class GuardedChannel implements grpc.ChannelInterface, CallOwner {
  readonly #host: ChannelHost;
  readonly #spec: ChannelSpec;
  #closed = false;
  /** Its calls waiting for a connection (see CallOwner): a call on a READY channel is never here. */
  readonly #waiting = new Set<GuardedCall>();
  readonly #watchers = new Set<Watcher>();
  #unsubscribe: (() => void) | undefined;

  /** @internal Made by `GrpcGuard.channel()`. */
  constructor(host: ChannelHost, spec: ChannelSpec) {
    this.#host = host;
    this.#spec = spec;
  }

  /**
   * Stops this client: new calls throw, as on a closed grpc-js channel; calls in flight finish.
   * The pooled channel stays for the guard's other clients until it is idle or the guard closes.
   */
  /**
   * As grpc-js's: calls under way finish, and a call waiting for a connection (for one, a retry,
   * or a READY channel) ends now with UNAVAILABLE "Channel closed before call started". Left to
   * wait, such calls ran through their connect timeouts and retries, dialling after the close.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const call of [...this.#waiting]) call.channelClosed();
    this.#host.specs.release(this.#spec);
    this.#notify();
  }

  /** Whether its client closed it. */
  get closed(): boolean {
    return this.#closed;
  }

  /** @internal A call of this channel waits for a connection. */
  waiting(call: GuardedCall): void {
    this.#waiting.add(call);
  }

  /** @internal A call that waited ended. */
  done(call: GuardedCall): void {
    this.#waiting.delete(call);
  }

  /** The target as grpc-js's own channel spells it: with its default scheme, `dns:`, when it names none grpc-js knows. */
  getTarget(): string {
    return asGrpcSpellsIt(this.#spec.target);
  }

  /**
   * The pooled channel's state: READY when one is live, CONNECTING while one is being
   * established, TRANSIENT_FAILURE after a failed establishment (or while the breaker refuses the
   * host), IDLE otherwise, SHUTDOWN once this client or the guard closed.
   *
   * `tryToConnect` from IDLE or TRANSIENT_FAILURE starts a connect, at once or (after failed
   * ones, or while the breaker refuses the host) once grpc's reconnect backoff and the breaker
   * allow one, as a grpc-js channel reconnects; watchers then see CONNECTING and READY.
   */
  getConnectivityState(tryToConnect: boolean): grpc.connectivityState {
    if (this.#closed || this.#host.closed) return SHUTDOWN;
    const state = this.#host.connector.stateOf(this.#spec.key);
    if (state !== IDLE && state !== TRANSIENT_FAILURE) return state;
    // Asked to connect: at once, or once the reconnect backoff and the breaker allow (grpc-js
    // reconnects from TRANSIENT_FAILURE too, so `waitForReady()` sees CONNECTING and READY).
    if (tryToConnect) this.#host.reconnect(this.#spec);
    const now = this.#host.connector.stateOf(this.#spec.key);
    if (now !== IDLE) return now;
    return this.#host.refused(this.#spec) ? TRANSIENT_FAILURE : IDLE;
  }

  /**
   * Calls `callback` once the state differs from `currentState` (at once if it already does), or
   * with an error at `deadline`.
   */
  watchConnectivityState(currentState: grpc.connectivityState, deadline: Date | number, callback: (error?: Error) => void): void {
    if (this.#closed || this.#host.closed) throw new Error('Channel has been shut down');
    const watcher: Watcher = { currentState, callback, timer: undefined };
    const left = remaining(deadline);
    if (left <= 0) {
      process.nextTick(callback, new Error('Deadline passed without connectivity state change'));
      return;
    }
    // Past 2^31-1 ms a timer fires at once; a deadline that far away is waited out as none.
    // Not unref'd, as grpc-js's own: a process waiting for a channel waits (unref'd, one with
    // nothing else to do exited without ever calling back).
    if (left <= MAX_DURATION) {
      const { clock } = this.#host;
      watcher.timer = clock.setTimeout(() => {
        this.#remove(watcher);
        callback(new Error('Deadline passed without connectivity state change'));
      }, left);
    }
    this.#watchers.add(watcher);
    this.#unsubscribe ??= this.#host.onChange(this.#spec.key, () => this.#notify()); // through the guard: a pending reconnect then keeps the process alive
    if (this.getConnectivityState(false) !== currentState) process.nextTick(() => this.#notify());
  }

  /** The live pooled channel's channelz reference; a placeholder (id -1) while there is none. */
  getChannelzRef(): ChannelRef {
    const live = this.#host.connector.liveChannel(this.#spec.key);
    return live?.getChannelzRef() ?? ({ kind: 'channel', id: -1, name: this.#spec.target } as unknown as ChannelRef);
  }

  createCall(
    method: string,
    deadline: grpc.Deadline,
    host: string | null | undefined,
    parentCall: ServerSurfaceCall,
    propagateFlags: number | null | undefined,
  ): GuardedCall {
    if (typeof method !== 'string') throw new TypeError('Channel#createCall: method must be a string');
    if (!(typeof deadline === 'number' || deadline instanceof Date)) throw new TypeError('Channel#createCall: deadline must be a number or Date');
    if (this.#closed || this.#host.closed) throw new Error('Channel has been shut down');
    return new GuardedCall(this.#host, this.#spec, method, deadline, host, parentCall, propagateFlags, this);
  }

  /**
   * Tells the watchers whose state is gone, each on a later tick: a change often happens inside
   * the caller's own call (`getConnectivityState(true)` starts a connect), and a callback must
   * never run re-entrantly inside it.
   */
  #notify(): void {
    const state = this.getConnectivityState(false);
    for (const w of [...this.#watchers]) {
      if (w.currentState === state) continue;
      this.#remove(w);
      process.nextTick(w.callback);
    }
  }

  #remove(w: Watcher): void {
    if (w.timer !== undefined) this.#host.clock.clearTimeout(w.timer);
    this.#watchers.delete(w);
    if (this.#watchers.size === 0) {
      this.#unsubscribe?.();
      this.#unsubscribe = undefined;
    }
  }
}
