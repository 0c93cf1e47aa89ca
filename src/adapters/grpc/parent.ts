/**
 * A call's parent: the server call it was made inside (`{ parent: call }` in the call options),
 * honoured as grpc-js honours it (its resolving-call.js), for the guarded call's whole life
 * (waiting for a channel, the backoff between retries, the ride), not only the grpc-js call on
 * the channel:
 *
 * - with the DEADLINE flag, the call's deadline is the earlier of its own and the parent's
 *   (grpc-js's `minDeadline`: a number, and an own deadline that is NaN gives way to the parent's);
 * - with the CANCELLATION flag, the parent's `cancelled` event cancels the call with CANCELLED
 *   "Cancelled by parent call".
 *
 * Flags left out are grpc's DEFAULTS (both), as grpc-js's channel reads them. Unlike grpc-js,
 * which never removes its listener, the call stops listening to its parent when it ends.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';

/** A server call a client call may name as its parent. */
export type ParentCall = NonNullable<Parameters<grpc.ChannelInterface['createCall']>[3]>;

/** grpc-js's own details for a call its parent's cancellation ended. */
export const PARENT_CANCELLED = 'Cancelled by parent call';

const { DEADLINE, CANCELLATION, DEFAULTS } = grpc.propagate;

/** The deadline a call with `own` and `parent` (and `flags`) runs by. */
export function deadlineUnder(own: grpc.Deadline, parent: ParentCall, flags: number | null | undefined): grpc.Deadline {
  if (((flags ?? DEFAULTS) & DEADLINE) === 0) return own;
  return minDeadline(own, parent.getDeadline());
}

/**
 * Calls `cancel` when `parent` is cancelled, if `flags` propagate cancellation; returns the
 * stopper (undefined when nothing listens).
 */
export function followCancellation(parent: ParentCall, flags: number | null | undefined, cancel: () => void): (() => void) | undefined {
  if (((flags ?? DEFAULTS) & CANCELLATION) === 0) return undefined;
  parent.on('cancelled', cancel);
  return () => parent.removeListener('cancelled', cancel);
}

/** grpc-js's `minDeadline` (deadline.js): the earliest, in ms; Infinity when none is earlier. */
export function minDeadline(...deadlines: grpc.Deadline[]): number {
  let min = Infinity;
  for (const d of deadlines) {
    const ms = d instanceof Date ? d.getTime() : d;
    if (ms < min) min = ms;
  }
  return min;
}
