/**
 * One pooled connection with an identity: what rides it (leases), and whether it is retired
 * (takes no new requests) or gone (its transport is dead: everything riding it is released now).
 *
 * @module
 */
import { ConnectionGoneError } from '../core/errors.js';

/**
 * What a request holds while it rides a connection, from `ConnectionPool.use`.
 */
export interface Lease<C> {
  /** The connection. Valid for the duration of the `use` callback only. */
  readonly connection: C;
  /** The connection's identity: unique within the pool, never reused. */
  readonly id: number;
  /** The pool target the connection serves. */
  readonly target: string;
  /**
   * Aborted when the request must stop: the caller aborted (reason: the caller's), or the
   * connection is gone (reason: {@link ConnectionGoneError}). Pass it to whatever the request
   * awaits; the pool also releases the request itself when it fires.
   */
  readonly signal: AbortSignal;
  /** Which turn this is: 1, or more when a sibling retired an earlier connection under it. */
  readonly turn: number;
}

/** Why a connection stopped taking requests. */
export type RetireReason = 'failure' | 'goaway' | 'idle' | 'closing';

/**
 * @internal One request riding a connection: the lease handed to it. Released at most once, by
 * the connection dying or the caller aborting; its `signal` is made only if someone asks, so a
 * request that never looks costs no AbortController.
 */
export class Ride<C> implements Lease<C> {
  readonly connection: C;
  readonly id: number;
  readonly target: string;
  readonly turn: number;
  /** Why it was released, once it has been. */
  released: unknown;
  #isReleased = false;
  #controller: AbortController | undefined;
  /** Set by the pool: ends the ride at once with `reason`. */
  onRelease: ((reason: unknown) => void) | undefined;

  constructor(conn: PooledConnection<C>, turn: number) {
    this.connection = conn.connection;
    this.id = conn.id;
    this.target = conn.target;
    this.turn = turn;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#isReleased) this.#controller.abort(this.released);
    }
    return this.#controller.signal;
  }

  /** Ends the ride with `reason` (first call wins). */
  release(reason: unknown): void {
    if (this.#isReleased) return;
    this.#isReleased = true;
    this.released = reason;
    this.#controller?.abort(reason);
    this.onRelease?.(reason);
  }
}

/** @internal The pool's record of one connection. */
export class PooledConnection<C> {
  readonly id: number;
  readonly target: string;
  readonly connection: C;
  /** Requests riding it now. */
  readonly rides = new Set<Ride<C>>();
  /** Clock time a request last started or ended on it. */
  lastUsed: number;
  /** Set once: no new requests. */
  retired: RetireReason | undefined;
  /** Set once: the transport is dead; every ride was released with it. */
  goneReason: ConnectionGoneError | undefined;
  /** Set once the pool has asked the connector to close it. */
  closing: Promise<void> | undefined;

  constructor(id: number, target: string, connection: C, now: number) {
    this.id = id;
    this.target = target;
    this.connection = connection;
    this.lastUsed = now;
  }

  get leases(): number {
    return this.rides.size;
  }

  get isGone(): boolean {
    return this.goneReason !== undefined;
  }

  /** Whether a new request may ride it. */
  get usable(): boolean {
    return this.retired === undefined;
  }

  /** Takes no new requests from now on. Returns false if it already had retired. */
  retire(reason: RetireReason): boolean {
    if (this.retired !== undefined) return false;
    this.retired = reason;
    return true;
  }

  /** The transport is dead: retire it and release every ride on it. False if already gone. */
  markGone(cause: unknown): boolean {
    if (this.goneReason !== undefined) return false;
    this.retire('failure');
    this.goneReason = new ConnectionGoneError(this.target, this.id, { cause });
    for (const ride of [...this.rides]) ride.release(this.goneReason);
    return true;
  }
}
