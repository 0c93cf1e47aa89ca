/**
 * A memcached text-protocol connection: requests written in order, responses matched in order
 * (a request that timed out keeps its place, and its late response is read and dropped, so the
 * stream never falls out of step). Only what the chaos scenario needs: get, set, version.
 *
 * @module
 */
import type net from 'node:net';
import { RequestTimeoutError } from '../../core/errors.js';

interface Waiter {
  resolve: (value: string | undefined) => void;
  reject: (err: unknown) => void;
  timer: ReturnType<typeof setTimeout> | undefined;
  done: boolean;
}

/** A memcached server said something other than the expected answer. */
export class MemcachedError extends Error {
  override readonly name = 'MemcachedError';
}

/** One socket to one memcached server. */
export class MemcachedConnection {
  readonly socket: net.Socket;
  readonly #waiters: Waiter[] = [];
  #buffer = '';
  /** A VALUE block being read: bytes still expected and the value so far. */
  #value: string | undefined;
  #closed: unknown;

  constructor(socket: net.Socket) {
    this.socket = socket;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.#read(chunk));
    socket.on('error', (err) => this.#fail(err));
    socket.on('close', () => this.#fail(new Error('memcached connection closed')));
  }

  /** Whether the socket is gone. */
  get closed(): boolean {
    return this.#closed !== undefined;
  }

  /** `get key`: the value, or undefined on a miss. */
  get(key: string, timeout: number): Promise<string | undefined> {
    return this.#send(`get ${key}\r\n`, timeout);
  }

  /** `set key 0 0 n`: resolves when STORED. */
  async set(key: string, value: string, timeout: number): Promise<void> {
    const r = await this.#send(`set ${key} 0 0 ${Buffer.byteLength(value, 'latin1')}\r\n${value}\r\n`, timeout);
    if (r !== 'STORED') throw new MemcachedError(`set ${key}: ${r}`);
  }

  /** `version`: the server's version string (a cheap liveness check). */
  async version(timeout: number): Promise<string> {
    const r = await this.#send('version\r\n', timeout);
    if (r === undefined || !r.startsWith('VERSION ')) throw new MemcachedError(`version: ${String(r)}`);
    return r.slice(8);
  }

  close(): void {
    this.socket.destroy();
  }

  #send(command: string, timeout: number): Promise<string | undefined> {
    if (this.#closed !== undefined) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined, done: false };
      waiter.timer = setTimeout(() => {
        waiter.done = true; // keeps its place: the late answer is read and dropped
        reject(new RequestTimeoutError(timeout));
      }, timeout);
      this.#waiters.push(waiter);
      this.socket.write(command, 'latin1');
    });
  }

  #answer(value: string | undefined): void {
    const w = this.#waiters.shift();
    if (w === undefined || w.done) return;
    w.done = true;
    clearTimeout(w.timer);
    w.resolve(value);
  }

  #read(chunk: string): void {
    this.#buffer += chunk;
    for (;;) {
      const eol = this.#buffer.indexOf('\r\n');
      if (eol < 0) return;
      const line = this.#buffer.slice(0, eol);
      this.#buffer = this.#buffer.slice(eol + 2);
      if (line.startsWith('VALUE ')) {
        const bytes = Number(line.split(' ')[3]);
        if (this.#buffer.length < bytes + 2) {
          // Wait for the whole block: put the header back and stop.
          this.#buffer = `${line}\r\n${this.#buffer}`;
          return;
        }
        this.#value = this.#buffer.slice(0, bytes);
        this.#buffer = this.#buffer.slice(bytes + 2);
        continue;
      }
      if (line === 'END') {
        const v = this.#value;
        this.#value = undefined;
        this.#answer(v);
        continue;
      }
      this.#answer(line); // STORED, VERSION x, ERROR, CLIENT_ERROR x, SERVER_ERROR x
    }
  }

  #fail(err: unknown): void {
    if (this.#closed !== undefined) return;
    this.#closed = err;
    for (const w of this.#waiters.splice(0)) {
      if (w.done) continue;
      w.done = true;
      clearTimeout(w.timer);
      w.reject(err);
    }
  }
}
