/**
 * Why a channel failed to connect, in grpc-js's own words.
 *
 * A grpc-js channel reports only its state (TRANSIENT_FAILURE), never the error behind it. Its
 * picker, though, fails a call at once with that error in the details
 * (`No connection established. Last error: connect ECONNREFUSED ...`). One local call with no
 * wait-for-ready reads it: no I/O, answered within a millisecond or two.
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import { type Clock, type TimerHandle, unrefTimer } from '../../core/clock.js';

/**
 * Establishing a channel failed (refused, reset, a TLS or name-resolution failure): the status a
 * raw grpc-js call would have failed with. Shaped like a grpc-js `ServiceError` (numeric `code`,
 * `details`, `metadata`), so `classify` reads it the same way (a dial, not sent).
 */
export class ChannelConnectError extends Error {
  /** The grpc status code, UNAVAILABLE. */
  readonly code: grpc.status;
  readonly details: string;
  readonly metadata: grpc.Metadata;
  /** The channel's target. */
  readonly target: string;

  constructor(target: string, status: grpc.StatusObject) {
    super(`${status.code} ${grpc.status[status.code]}: ${status.details}`);
    this.name = 'ChannelConnectError';
    this.code = status.code;
    this.details = status.details;
    this.metadata = status.metadata;
    this.target = target;
  }
}

const PROBE_METHOD = '/dialguard.ConnectProbe/LastError';

/**
 * How long to wait for grpc-js to fail the probe, ms: it does so a turn or two of the event loop
 * after the call starts; a channel that left TRANSIENT_FAILURE meanwhile queues it instead.
 */
const PROBE_WAIT = 50;

/**
 * The status a call on `channel` (in TRANSIENT_FAILURE) fails with, or a generic UNAVAILABLE if
 * none comes within {@link PROBE_WAIT} ms. The caller closes the channel afterwards, which ends a
 * probe still queued.
 */
export function lastError(channel: grpc.Channel, clock: Clock): Promise<grpc.StatusObject> {
  const fallback: grpc.StatusObject = {
    code: grpc.status.UNAVAILABLE,
    details: 'No connection established',
    metadata: new grpc.Metadata(),
  };
  return new Promise((resolve) => {
    let timer: TimerHandle | undefined;
    const done = (status: grpc.StatusObject): void => {
      if (timer === undefined) return;
      clock.clearTimeout(timer);
      timer = undefined;
      resolve(status);
    };
    timer = unrefTimer(clock.setTimeout(() => done(fallback), PROBE_WAIT));
    try {
      const call = channel.createCall(PROBE_METHOD, Infinity, undefined, null, 0);
      call.start(new grpc.Metadata(), {
        onReceiveMetadata: () => {},
        onReceiveMessage: () => {},
        onReceiveStatus: (s) => done(s.code === grpc.status.UNAVAILABLE ? s : fallback),
      });
      call.halfClose();
    } catch {
      done(fallback);
    }
  });
}
