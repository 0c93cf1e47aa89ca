/**
 * The unguarded baseline the demo and benches compare against: Node's own `net.connect`, with
 * the same connect timeout applied by hand (Node has none), no breaker, no memory.
 *
 * @module
 */
import net from 'node:net';

/** Counts the dials it makes. */
export class UnguardedDialer {
  /** Dials started. */
  dials = 0;

  constructor(readonly timeout: number) {}

  /** Connects to `host:port`, or rejects after `timeout` ms (the socket destroyed). */
  connect(host: string, port: number): Promise<net.Socket> {
    this.dials++;
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(Object.assign(new Error(`connect to ${host}:${port} timed out after ${this.timeout} ms`), { code: 'ETIMEDOUT' }));
      }, this.timeout);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(socket);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }
}

/**
 * One request the way seed 000's worker made it: up to `attempts` tries back to back, stopping
 * early on success or on an error `stop` calls permanent. Resolves with whether it got through
 * and the tries it spent.
 */
export async function attemptRequest(
  dialOnce: () => Promise<net.Socket>,
  attempts: number,
  stop: (err: unknown) => boolean,
): Promise<{ ok: boolean; tries: number }> {
  for (let tries = 1; tries <= attempts; tries++) {
    try {
      (await dialOnce()).destroy();
      return { ok: true, tries };
    } catch (err) {
      if (stop(err)) return { ok: false, tries };
    }
  }
  return { ok: false, tries: attempts };
}
