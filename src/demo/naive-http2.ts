/**
 * The raw `node:http2` client the HTTP/2 bench and demo compare against: how most code uses it.
 * One cached session per origin from `http2.connect`, replaced when it emits `close` or `error`
 * (and, with `dropOnError`, after any failed request). Node gives it no connect timeout and no
 * keep-alive; a request may carry its own timeout.
 *
 * @module
 */
import http2 from 'node:http2';

/** Options of {@link NaiveHttp2Client}. */
export interface NaiveHttp2Options {
  /** Drop the cached session after any failed request (the common "reconnect on error"). */
  dropOnError?: boolean;
  /** Called with the origin each time a session (a dial) is started. */
  onSession?: (origin: string) => void;
}

/** What a request returned. */
export interface NaiveResponse {
  status: number;
  body: Buffer;
}

/** One cached session per origin, nothing more. */
export class NaiveHttp2Client {
  readonly #sessions = new Map<string, http2.ClientHttp2Session>();
  readonly #all = new Set<http2.ClientHttp2Session>();
  readonly #dropOnError: boolean;
  readonly #onSession: ((origin: string) => void) | undefined;
  /** Sessions created. */
  sessionsOpened = 0;

  constructor(options: NaiveHttp2Options = {}) {
    this.#dropOnError = options.dropOnError ?? false;
    this.#onSession = options.onSession;
  }

  #session(origin: string): http2.ClientHttp2Session {
    let session = this.#sessions.get(origin);
    if (session === undefined || session.closed || session.destroyed) {
      const s = http2.connect(origin);
      this.sessionsOpened++;
      this.#onSession?.(origin);
      this.#all.add(s);
      const drop = (): void => {
        if (this.#sessions.get(origin) === s) this.#sessions.delete(origin);
      };
      s.on('error', drop);
      s.on('close', () => {
        drop();
        this.#all.delete(s);
      });
      this.#sessions.set(origin, s);
      session = s;
    }
    return session;
  }

  /** GETs `url`; rejects on a stream error, or after `timeout` ms when given. */
  request(url: string, options: { timeout?: number; signal?: AbortSignal } = {}): Promise<NaiveResponse> {
    const { origin, pathname, search } = new URL(url);
    let session: http2.ClientHttp2Session;
    let stream: http2.ClientHttp2Stream;
    try {
      session = this.#session(origin);
      stream = session.request({ ':path': `${pathname}${search}` });
      stream.end(); // a GET has no body: end the request, as Node's own http2 example does
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<NaiveResponse>((resolve, reject) => {
      let status = 0;
      const chunks: Buffer[] = [];
      let timer: ReturnType<typeof setTimeout> | undefined;
      let settled = false;
      const fail = (err: unknown): void => {
        if (settled) return;
        settled = true;
        if (timer !== undefined) clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        if (this.#dropOnError && this.#sessions.get(origin) === session) {
          // Drop it for new requests and close it once its streams end. (Destroying a session
          // with many streams in flight has crashed Node 20's http2 here: heap corruption.)
          this.#sessions.delete(origin);
          session.close();
        }
        reject(err);
      };
      const onAbort = (): void => fail(options.signal!.reason);
      if (options.timeout !== undefined) timer = setTimeout(() => fail(new Error(`request timed out after ${options.timeout} ms`)), options.timeout);
      options.signal?.addEventListener('abort', onAbort, { once: true });
      stream.on('response', (h) => {
        status = Number(h[':status']);
      });
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', fail);
      stream.on('end', () => {
        if (status >= 500 && this.#dropOnError) return fail(new Error(`status ${status}`));
        if (settled) return;
        settled = true;
        if (timer !== undefined) clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        resolve({ status, body: Buffer.concat(chunks) });
      });
      stream.on('close', () => {
        if (stream.rstCode !== 0) fail(Object.assign(new Error(`stream reset ${stream.rstCode}`), { rstCode: stream.rstCode }));
      });
    });
  }

  /** Destroys every session it ever opened that is still open. */
  close(): void {
    for (const s of this.#all) s.destroy();
    this.#all.clear();
    this.#sessions.clear();
  }
}
