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
  /**
   * The server's answer has reached the caller (a streamed response's headers, say): the call is
   * committed, and never goes back for a fresh connection, whatever ends it from now on. Until
   * then, an idempotent call whose connection died under it may be sent again.
   */
  commit(): void;
}

/**
 * Why a connection stopped taking requests while its transport was still alive: the peer's
 * GOAWAY, idle past its timeout, the pool closing, or `refusing`: it refuses new requests while
 * alive (an HTTP/2 session resetting streams with ENHANCE_YOUR_CALM, see `Http2Client`).
 */
export type RetireReason = 'goaway' | 'idle' | 'closing' | 'refusing';

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
  /** Its neighbours among the rides of its connection (see {@link PooledConnection.addRide}). */
  prev: Ride<C> | undefined;
  next: Ride<C> | undefined;
  /** Whether it is on its connection's list. */
  riding = false;
  /** {@link Lease.commit} was called: never sent again. */
  committed = false;

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

  commit(): void {
    this.committed = true;
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
  /**
   * Requests riding it now, as a list threaded through the rides themselves. Not a `Set`: a
   * long-lived connection whose Set gains and loses a ride per request churns the Set's table,
   * which V8 then promotes and collects in full GCs (measured: several major GCs per 100 000
   * requests at 64 in flight, about 2 µs a request; none with the list).
   */
  #head: Ride<C> | undefined;
  #leases = 0;
  /** Clock time it was opened, or its last ride ended (it is idle from then while nothing rides it). */
  lastUsed: number;
  /** Set once: no new requests, those in flight may finish. */
  retired: RetireReason | undefined;
  /** Set once: the transport is dead; every ride was released with it. */
  goneReason: ConnectionGoneError | undefined;
  /**
   * Rides that failed on their own, with anything but "not sent", after it was found gone and
   * before their release (see ConnectionPool.#gone): the death cut them.
   */
  cutAfterGone = 0;
  /**
   * Set once a ride on it succeeded: the connection worked. A sent request that its death cut
   * goes back for a fresh one only then (see ConnectionPool.#land).
   */
  proven = false;
  /** Set once the pool has asked the connector to close it. */
  closing: Promise<void> | undefined;

  constructor(id: number, target: string, connection: C, now: number) {
    this.id = id;
    this.target = target;
    this.connection = connection;
    this.lastUsed = now;
  }

  /** Requests riding it now. */
  get leases(): number {
    return this.#leases;
  }

  /** Puts `ride` on this connection. */
  addRide(ride: Ride<C>): void {
    if (ride.riding) return;
    ride.riding = true;
    ride.prev = undefined;
    ride.next = this.#head;
    if (this.#head !== undefined) this.#head.prev = ride;
    this.#head = ride;
    this.#leases++;
  }

  /** Takes `ride` off this connection; a ride not on it is left alone. */
  removeRide(ride: Ride<C>): void {
    if (!ride.riding) return;
    ride.riding = false;
    if (ride.prev !== undefined) ride.prev.next = ride.next;
    else this.#head = ride.next;
    if (ride.next !== undefined) ride.next.prev = ride.prev;
    ride.prev = undefined;
    ride.next = undefined;
    this.#leases--;
  }

  /** The rides on it now (a copy: releasing one may take it off). */
  rides(): Array<Ride<C>> {
    const all: Array<Ride<C>> = [];
    for (let r = this.#head; r !== undefined; r = r.next) all.push(r);
    return all;
  }

  /** Whether a new request may ride it: neither retired nor gone. */
  get usable(): boolean {
    return this.retired === undefined && this.goneReason === undefined;
  }

  /** Takes no new requests from now on. Returns false if it already had retired. */
  retire(reason: RetireReason): boolean {
    if (this.retired !== undefined) return false;
    this.retired = reason;
    return true;
  }

  /**
   * The transport is dead: release every ride on it (unless `release` is false: then
   * {@link PooledConnection.releaseRides} does, later). False if already gone.
   */
  markGone(cause: unknown, release = true): boolean {
    if (this.goneReason !== undefined) return false;
    this.goneReason = new ConnectionGoneError(this.target, this.id, { cause });
    if (release) this.releaseRides();
    return true;
  }

  /** Releases every ride still on it with its gone reason (a no-op unless it is gone). */
  releaseRides(): void {
    const reason = this.goneReason;
    if (reason === undefined) return;
    for (const ride of this.rides()) ride.release(reason);
  }
}
