/**
 * Whether a request body can be sent again.
 *
 * Bytes (a string, a Buffer, a typed array, an ArrayBuffer), a Blob, a FormData and an array
 * can be sent as often as needed. A stream or a one-shot iterable (a generator; fetch hands every
 * body to its dispatcher as one) can be sent once: it may be retried only if no attempt has
 * started reading it, which is the case when the dial failed. A {@link RequestBody} tells the
 * two apart by watching the body rather than guessing: a stream counts as read once anything
 * reads it or it ended; an iterable is handed to undici through a wrapper that notes the first
 * time undici starts iterating it.
 *
 * @module
 */
import type { Readable } from 'node:stream';

type Body = unknown;

/** How an attempt's body is produced, and whether it can still be sent. */
export interface RequestBody {
  /** The body to hand the attempt about to start. */
  forAttempt(): Body;
  /** True when {@link forAttempt} hands out the body as it was given (no wrapper). */
  readonly asGiven: boolean;
  /** True when a one-shot body has been read (fully or partly): it cannot be sent again. */
  readonly consumed: boolean;
}

/** A body that is sent again as it is (none, bytes, Blob, FormData, an array). */
class Replayable implements RequestBody {
  readonly consumed = false;
  readonly asGiven = true;
  constructor(readonly body: Body) {}
  forAttempt(): Body {
    return this.body;
  }
}

/** A readable stream: read at most once. */
class StreamBody implements RequestBody {
  /**
   * Whether it is a Node Readable, which tells when it has been read. A stream-like that is not
   * (form-data's CombinedStream, an old-style `Stream`) tells nothing: it goes through
   * forAttempt(), and is spent once an attempt has it. Taken as unread, it was sent again empty
   * after a reset, and undici waited for bytes that never came: the call hung.
   */
  readonly asGiven: boolean;
  #handedOut = false;
  constructor(readonly stream: Readable) {
    this.asGiven = typeof (stream as Partial<Readable>).readableDidRead === 'boolean';
  }
  forAttempt(): Body {
    this.#handedOut = true;
    return this.stream;
  }
  get consumed(): boolean {
    if (!this.asGiven) return this.#handedOut;
    const s = this.stream;
    // readableFlowing leaves null once anything consumes it (a 'data' listener, pipe, resume).
    return s.readableDidRead === true || s.destroyed === true || s.readableEnded === true || (s.readableFlowing ?? null) !== null;
  }
}

/** A one-shot iterable (a generator, fetch's body): handed out through a wrapper that notes use. */
class IterableBody implements RequestBody {
  readonly asGiven = false;
  #started = false;
  constructor(readonly source: AsyncIterable<unknown> | Iterable<unknown>) {}
  get consumed(): boolean {
    return this.#started;
  }
  forAttempt(): Body {
    const source = this.source;
    const start = (): void => {
      this.#started = true;
    };
    if (typeof (source as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
      return {
        [Symbol.asyncIterator]: () => {
          start();
          return (source as AsyncIterable<unknown>)[Symbol.asyncIterator]();
        },
      };
    }
    return {
      [Symbol.iterator]: () => {
        start();
        return (source as Iterable<unknown>)[Symbol.iterator]();
      },
    };
  }
}

function isStream(body: object): body is Readable {
  const b = body as { pipe?: unknown; on?: unknown };
  return typeof b.pipe === 'function' && typeof b.on === 'function';
}

/** undici's own test (`util.isFormDataLike`): any FormData, undici's or the global one. */
function isFormData(body: object): boolean {
  const b = body as { [Symbol.toStringTag]?: unknown; append?: unknown; getAll?: unknown };
  return b[Symbol.toStringTag] === 'FormData' && typeof b.append === 'function' && typeof b.getAll === 'function';
}

function isIterable(body: object): body is AsyncIterable<unknown> | Iterable<unknown> {
  return (
    typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function' ||
    typeof (body as Iterable<unknown>)[Symbol.iterator] === 'function'
  );
}

const NONE = new Replayable(undefined);

/** Wraps `body` (a dispatch option's body) in the {@link RequestBody} that fits it. */
export function requestBody(body: Body): RequestBody {
  if (body === undefined) return NONE;
  if (typeof body !== 'object' || body === null) return new Replayable(body);
  if (Buffer.isBuffer(body) || ArrayBuffer.isView(body) || body instanceof ArrayBuffer || Array.isArray(body)) return new Replayable(body);
  if (isStream(body)) return new StreamBody(body);
  // A FormData is iterable (its entries), but undici encodes it as multipart each time it is sent.
  if (isFormData(body)) return new Replayable(body);
  // Blob and FormData are read afresh each time they are sent (they are async-iterable only
  // through their own methods, never as themselves).
  if (!isIterable(body)) return new Replayable(body);
  return new IterableBody(body);
}
