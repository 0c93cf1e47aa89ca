/**
 * The two handler interfaces of undici 7, and the bridge from the newer one to the older.
 *
 * undici's clients drive every request through the older, callback-per-event interface
 * (`onConnect`, `onHeaders`, `onData`, `onComplete`, `onError`), and so do its own `fetch` and
 * `request()`. A handler of the newer, controller-based interface (`onRequestStart`,
 * `onResponseStart`...) is converted on the way in, which parses the headers into an object and,
 * behind `compose()`, back into raw buffers: several µs a request. The retrying layer therefore
 * speaks the older interface on both sides, and only a caller that brings a newer-style handler
 * pays for the conversion, as it would with undici alone.
 *
 * @module
 */
import type { Dispatcher } from 'undici';
import { util } from 'undici';

/** Raw header lines as undici's parser delivers them: name, value, name, value... */
export type RawHeaders = Buffer[] | string[];

/** The callback-per-event handler undici's clients call. */
export interface LegacyHandler {
  onConnect?(abort: (err?: Error) => void, context?: unknown): void;
  onBodySent?(chunk: unknown): void;
  onRequestSent?(): void;
  onResponseStarted?(): void;
  onHeaders?(statusCode: number, rawHeaders: RawHeaders, resume: () => void, statusText: string): boolean;
  onData?(chunk: Buffer): boolean;
  onComplete?(trailers: RawHeaders | null): void;
  onError?(err: Error): void;
}

/** Whether `handler` speaks the newer, controller-based interface. */
function isModern(handler: object): handler is Dispatcher.DispatchHandler {
  return typeof (handler as Dispatcher.DispatchHandler).onRequestStart === 'function';
}

/** `handler` as a {@link LegacyHandler}: itself, or bridged when it is of the newer kind. */
export function legacy(handler: Dispatcher.DispatchHandler): LegacyHandler {
  return isModern(handler) ? new ModernBridge(handler) : (handler as LegacyHandler);
}

/** The controller a newer-style handler holds, over the older interface's abort and resume. */
class BridgeController implements Dispatcher.DispatchController {
  #abort: (err?: Error) => void;
  #aborted = false;
  #reason: Error | null = null;
  #paused = false;
  resumeFn: (() => void) | undefined;
  rawHeaders: RawHeaders | null = null;
  rawTrailers: RawHeaders | null = null;

  constructor(abort: (err?: Error) => void) {
    this.#abort = abort;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  get paused(): boolean {
    return this.#paused;
  }

  abort(reason: Error): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#abort(reason);
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.resumeFn?.();
  }
}

/** A newer-style handler presented through the older interface. */
class ModernBridge implements LegacyHandler {
  readonly #handler: Dispatcher.DispatchHandler;
  #controller = new BridgeController(() => {});

  constructor(handler: Dispatcher.DispatchHandler) {
    this.#handler = handler;
  }

  onConnect(abort: (err?: Error) => void, context?: unknown): void {
    this.#controller = new BridgeController(abort);
    this.#handler.onRequestStart?.(this.#controller, context);
  }

  // Not part of the newer interface's declared type, but undici's own bridges pass them on
  // (fetch's Resource Timing needs onResponseStarted): so does this one.
  onResponseStarted(): void {
    (this.#handler as LegacyHandler).onResponseStarted?.();
  }

  onBodySent(chunk: unknown): void {
    (this.#handler as LegacyHandler).onBodySent?.(chunk);
  }

  onRequestSent(): void {
    (this.#handler as LegacyHandler).onRequestSent?.();
  }

  onHeaders(statusCode: number, rawHeaders: RawHeaders, resume: () => void, statusText: string): boolean {
    const c = this.#controller;
    c.resumeFn = resume;
    c.rawHeaders = rawHeaders;
    this.#handler.onResponseStart?.(c, statusCode, util.parseHeaders(rawHeaders as Buffer[]), statusText);
    return !c.paused;
  }

  onData(chunk: Buffer): boolean {
    this.#handler.onResponseData?.(this.#controller, chunk);
    return !this.#controller.paused;
  }

  onComplete(trailers: RawHeaders | null): void {
    const c = this.#controller;
    c.rawTrailers = trailers;
    this.#handler.onResponseEnd?.(c, util.parseHeaders((trailers ?? []) as Buffer[]));
  }

  onError(err: Error): void {
    this.#handler.onResponseError?.(this.#controller, err);
  }
}

/** The value of header `name` (lower case) in raw header lines, or undefined. */
export function rawHeader(rawHeaders: RawHeaders, name: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const key = rawHeaders[i]!;
    if (key.length === name.length && String(key).toLowerCase() === name) return String(rawHeaders[i + 1]);
  }
  return undefined;
}
