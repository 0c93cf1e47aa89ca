/**
 * One ride of a guarded gRPC call on one channel ({@link Turn}), which is also the listener of its
 * grpc-js call: one object per ride with shared methods, reporting to its call through a hook
 * that GuardedCall sets from its static block.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import type { Trip } from '../../pool/trip.js';
import type { PooledChannel } from './channel-connector.js';
import type { GrpcCall, GuardedCall } from './guarded-call.js';

/** What a {@link Turn} reports to its call (GuardedCall's code, which alone reaches its private state). */
export interface TurnReport {
  metadata(call: GuardedCall, turn: Turn, metadata: grpc.Metadata): void;
  message(call: GuardedCall, turn: Turn, message: unknown): void;
  status(call: GuardedCall, turn: Turn, status: grpc.StatusObject): void;
}

/** Set once, by GuardedCall's static block (see {@link reportTurnsTo}). */
let report: TurnReport;

/**
 * @internal Where every {@link Turn} reports: called once, from GuardedCall's static block, since
 * only code inside that class reaches its private state. A second call throws.
 */
export function reportTurnsTo(to: TurnReport): void {
  if (report !== undefined) throw new Error('dialguard: the gRPC turn report is set once');
  report = to;
}

/**
 * One ride of the call on one channel, and the listener of its grpc-js call: a class rather than
 * a listener of closures, so a healthy call allocates one small object here, not four.
 *
 * @internal
 */
export class Turn implements grpc.InterceptingListener {
  /** Still the call's current ride: what it delivers reaches the caller. */
  active = true;
  /** Its grpc-js call delivered a status. */
  ended = false;
  /** The server answered on it (headers, a message, or a trailers-only status). */
  answered = false;
  /** A resend's messages are still going out one write at a time: new writes queue behind them. */
  replaying = false;
  /** The pool's ride this turn runs on, until {@link Turn.settle} ends it. */
  trip: Trip<PooledChannel> | undefined;

  /**
   * The call it rides for, until its status is in. Then let go: node:http2 keeps a finished
   * stream past a young-generation GC, and grpc-js's call chain (this listener at its top) with
   * it, so a listener holding its GuardedCall had every call's wrapper, send log and the caller's
   * listener promoted to the old generation (bytes promoted per call, `--trace-gc-nvp`: raw
   * grpc-js 7.5 KB, guarded 8.0 KB before, 6.7 KB after). The pool's ride goes too, once settled.
   */
  owner: GuardedCall | undefined;

  constructor(
    owner: GuardedCall,
    readonly call: GrpcCall,
    readonly pooled: PooledChannel,
    /** The pooled channel's identity. */
    readonly connectionId: number,
    trip: Trip<PooledChannel>,
  ) {
    this.owner = owner;
    this.trip = trip;
  }

  /** Ends the pool's ride (`ok`: the call ran, its status in the call; else failed with `status`), once. */
  settle(ok: boolean, status?: grpc.StatusObject): void {
    const trip = this.trip;
    this.trip = undefined;
    trip?.end(ok, status);
  }

  onReceiveMetadata(metadata: grpc.Metadata): void {
    const owner = this.owner;
    if (owner !== undefined) report.metadata(owner, this, metadata);
  }

  onReceiveMessage(message: unknown): void {
    const owner = this.owner;
    if (owner !== undefined) report.message(owner, this, message);
  }

  onReceiveStatus(status: grpc.StatusObject): void {
    const owner = this.owner;
    if (owner === undefined) return; // grpc-js reports one status per call
    this.owner = undefined;
    report.status(owner, this, status); // settles the ride, which lets go of it
  }
}
