/**
 * One call's ride through `ConnectionPool.use()` or `ride()`: the lease its work gets, the settlers of the
 * call's promise and the caller's abort listener, in one object, so the pool's warm, synchronous
 * path (`#embark`, ended by `#land`) makes no closure per call for them.
 *
 * @module
 */
import type { InCallerContext } from '../observe/tracing.js';
import { type Lease, type PooledConnection, Ride } from './pooled-connection.js';

/**
 * One call's ride through `use()`: the lease `fn` gets, and what the pool needs to end the call
 * (its promise's settlers, the caller's signal, whether it may go back). Also the caller's abort
 * listener (`handleEvent`), so a ride costs no closure for it.
 * @internal
 */
export class Trip<C> extends Ride<C> {
  /** Set once the ride has ended (see `ConnectionPool.#land`). */
  landed = false;

  constructor(
    readonly conn: PooledConnection<C>,
    turn: number,
    readonly caller: AbortSignal | undefined,
    readonly fn: (lease: Lease<C>) => unknown,
    /** The work reports its own end ({@link Trip.end}), rather than by `fn`'s promise. */
    readonly ends: boolean,
    /** How many more times the call may be sent again after its connection died under it (0: not idempotent). */
    readonly resends: number,
    /** How many times it was sent again so far, before this ride. */
    readonly resent: number,
    readonly stale: number,
    readonly land: (trip: Trip<C>, ok: boolean, value: unknown) => void,
    readonly resolve: (value: unknown) => void,
    readonly reject: (reason: unknown, resent?: number, sentBefore?: boolean) => void,
    /** The caller's async context, for a resend's redial to be traced in (captured only when dials are traced). */
    readonly inCaller: InCallerContext | undefined,
  ) {
    super(conn, turn);
  }

  /** Released (the connection died, or the caller aborted): the call ends now, with `reason`. */
  override release(reason: unknown): void {
    super.release(reason);
    this.land(this, false, reason);
  }

  /** The work riding it is over (`ok`: with `value`; else failed with it). The first end wins. */
  end(ok: boolean, value?: unknown): void {
    this.land(this, ok, value);
  }

  /** The caller's signal aborted. */
  handleEvent(): void {
    this.release(this.caller!.reason);
  }
}
