/**
 * What a guarded call has sent: the messages waiting for a grpc-js call to take them, and, while
 * the call may still be sent again unchanged, every message sent so far (up to a byte limit).
 *
 * @module
 */
import type * as grpc from '@grpc/grpc-js';

type MessageContext = Parameters<ReturnType<grpc.ChannelInterface['createCall']>['sendMessageWithContext']>[0];

/** One message the caller sent: its write callback runs at most once, however often it is sent. */
export interface Sent {
  readonly context: MessageContext;
  readonly message: Buffer;
}

/** A call's sent messages; see the module docs. */
export class SendLog {
  readonly #limit: number;
  /** Messages no grpc-js call has taken yet (made on first use). */
  #queue: Sent[] | undefined;
  /** Every message sent (made on first use), while the call may still be resent. */
  #all: Sent[] | undefined;
  #bytes = 0;
  #resendable = true;
  /** Whether a grpc-js call was started with it: from then on what is sent may reach the server. */
  #started = false;

  /** @param limit - bytes kept for a resend; past it the call is never sent again once a grpc-js call has started. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /**
   * Whether the call may still be sent (again) unchanged: nothing was ever handed to a grpc-js
   * call (every message still waits in the queue, however many bytes: a call over the limit that
   * found no channel is still a first send), or everything sent is kept.
   */
  get resendable(): boolean {
    return this.#resendable || !this.#started;
  }

  /** A grpc-js call is started with it: from now on a message may reach the server. */
  started(): void {
    this.#started = true;
  }

  /** Records a message the caller sent; returns it as it is to be handed on. */
  record(context: MessageContext, message: Buffer): Sent {
    const sent: Sent = { context: once(context), message };
    if (this.#resendable) {
      this.#bytes += message.length;
      if (this.#bytes > this.#limit) this.#drop();
      else if (this.#all === undefined) this.#all = [sent]; // sized for the one message of a unary call
      else this.#all.push(sent);
    }
    return sent;
  }

  /** Keeps `sent` until a grpc-js call can take it. */
  queue(sent: Sent): void {
    if (this.#queue === undefined) this.#queue = [sent];
    else this.#queue.push(sent);
  }

  /** The messages waiting, handed over (the queue empties). */
  take(): Sent[] | undefined {
    const queued = this.#queue;
    this.#queue = undefined;
    return queued;
  }

  /** Queues every message sent so far, for a resend. False (nothing queued) if it may not be resent. */
  rewind(): boolean {
    if (!this.#resendable) return false;
    this.#queue = this.#all === undefined ? undefined : [...this.#all];
    return true;
  }

  /** The call is committed (the server answered, or the caller gave up): never resent. */
  commit(): void {
    this.#started = true; // whether or not a call started: never sent again
    this.#drop();
  }

  /** Keeps no more: once a grpc-js call has taken what was sent, it is never sent again. */
  #drop(): void {
    this.#resendable = false;
    this.#all = undefined;
  }

  /**
   * The call is over: drops everything. The write callbacks of messages no grpc-js call took are
   * called (on a later tick), as grpc-js calls a write's back once its call has ended: a writer
   * waiting on one (a `pipeline()` into a client-streaming call that failed before it had a
   * channel) otherwise waited forever.
   */
  clear(): void {
    const queued = this.#queue;
    this.#queue = undefined;
    this.commit();
    if (queued !== undefined) {
      process.nextTick(() => {
        for (const sent of queued) sent.context.callback?.();
      });
    }
  }
}

/** `context` whose write callback runs at most once, whichever grpc-js call it is handed to. */
function once(context: MessageContext): MessageContext {
  const callback = context.callback;
  if (callback === undefined) return context;
  let called = false;
  return {
    ...context,
    callback: (err) => {
      if (called) return;
      called = true;
      callback(err);
    },
  };
}
