/**
 * TLS sessions kept to resume them: a reconnect to a host reached before offers its last session,
 * and a server that takes it skips the full handshake (its certificate chain and key exchange).
 * Seed 002's redial storm paid a full handshake per dial; a restart or a GOAWAY costs one
 * abbreviated handshake per connection with a session at hand.
 *
 * @module
 */
import type tls from 'node:tls';

/** TLS sessions by key (a servername, an origin), bounded: the least recently stored goes first. */
export class TlsSessionCache {
  readonly #sessions = new Map<string, Buffer>();

  /** @param capacity - sessions kept at most; 0 keeps none. */
  constructor(readonly capacity: number) {}

  /** The session last kept under `key`, if any. */
  get(key: string): Buffer | undefined {
    return this.#sessions.get(key);
  }

  /** Keeps `session` under `key` (the most recent now), dropping the least recently stored when full. */
  set(key: string, session: Buffer): void {
    if (this.capacity === 0) return;
    this.#sessions.delete(key);
    if (this.#sessions.size >= this.capacity) {
      const oldest = this.#sessions.keys().next();
      if (oldest.done !== true) this.#sessions.delete(oldest.value);
    }
    this.#sessions.set(key, session);
  }

  /**
   * Keeps, under `key`, the sessions `socket` (connected, its handshake over) is handed. TLS 1.3
   * sends its tickets after the handshake ('session', heard from now on). TLS 1.2's session is
   * emitted in the same turn as 'secureConnect', before a dial is over and a listener could be
   * there: it is read from the socket instead (heard only through the listener, no TLS 1.2
   * connection was ever resumed: an outside review, 0 of 29 over 10 nginx reloads).
   */
  remember(key: string, socket: tls.TLSSocket): void {
    if (this.capacity === 0) return;
    if (socket.getProtocol?.() === 'TLSv1.2') {
      const session = socket.getSession?.();
      if (session !== undefined) this.set(key, session);
    }
    socket.on('session', (session: Buffer) => this.set(key, session));
  }
}
