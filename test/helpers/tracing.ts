/**
 * Listening to one of dialguard's tracing channels while a test body runs: the parts given are
 * called, the others are no-ops, and the subscription ends with the body however it ends.
 */
import type diagnosticsChannel from 'node:diagnostics_channel';

/** The parts of a tracing channel a test listens to. */
export type TraceParts = Partial<diagnosticsChannel.TracingChannelSubscribers<object>>;

/** Runs `body` with `parts` subscribed to `channel`; returns what `body` returned. */
export async function whileTraced<T>(channel: diagnosticsChannel.TracingChannel<object>, parts: TraceParts, body: () => Promise<T>): Promise<T> {
  const none = (): void => {};
  const handlers = { start: none, end: none, asyncStart: none, asyncEnd: none, error: none, ...parts };
  channel.subscribe(handlers);
  try {
    return await body();
  } finally {
    channel.unsubscribe(handlers);
  }
}
