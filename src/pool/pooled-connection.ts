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

/** @internal The pool's record of one connection. */
export class PooledConnection<C> {
  readonly id: number;
  readonly target: string;
  readonly connection: C;
  /** Leases riding it now. */
  leases = 0;
  /** Clock time a lease last started or ended. */
  lastUsed: number;
  /** Set once: no new requests. */
  retired: RetireReason | undefined;
  /** Set once: the transport is dead; `gone.signal` has released every lease. */
  readonly #gone = new AbortController();
  /** Set once the pool has asked the connector to close it. */
  closing: Promise<void> | undefined;

  constructor(id: number, target: string, connection: C, now: number) {
    this.id = id;
    this.target = target;
    this.connection = connection;
    this.lastUsed = now;
  }

  /** Aborts when the connection is gone. */
  get goneSignal(): AbortSignal {
    return this.#gone.signal;
  }

  get isGone(): boolean {
    return this.#gone.signal.aborted;
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

  /** The transport is dead: retire it and release every lease riding it. False if already gone. */
  markGone(cause: unknown): boolean {
    if (this.isGone) return false;
    this.retire('failure');
    this.#gone.abort(new ConnectionGoneError(this.target, this.id, { cause }));
    return true;
  }
}
