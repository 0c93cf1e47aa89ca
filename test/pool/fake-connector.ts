/**
 * An in-memory connector for pool tests: every connect is a deferred the test settles by hand,
 * every close is recorded, and the pool's watch hooks are kept so a test can kill a transport.
 */
import type { ConnectionWatch, Connector } from '../../src/pool/connection-pool.js';
import type { DialContext } from '../../src/guard/dial.js';

export interface FakeConnection {
  readonly n: number;
  readonly target: string;
  closed: boolean;
  watch?: ConnectionWatch;
}

interface Pending {
  target: string;
  ctx: DialContext;
  resolve: () => FakeConnection;
  reject: (err: unknown) => void;
}

export class FakeConnector implements Connector<FakeConnection> {
  /** Connects started, in order. */
  readonly pending: Pending[] = [];
  readonly opened: FakeConnection[] = [];
  readonly closed: FakeConnection[] = [];
  /** When set, connects settle at once this way instead of waiting for the test. */
  auto: 'resolve' | Error | undefined;

  get connects(): number {
    return this.pending.length;
  }

  connect(target: string, ctx: DialContext): Promise<FakeConnection> {
    return new Promise((resolve, reject) => {
      const p: Pending = {
        target,
        ctx,
        resolve: () => {
          const c: FakeConnection = { n: this.opened.length + 1, target, closed: false };
          this.opened.push(c);
          resolve(c);
          return c;
        },
        reject,
      };
      this.pending.push(p);
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
      if (this.auto === 'resolve') p.resolve();
      else if (this.auto instanceof Error) reject(this.auto);
    });
  }

  close(connection: FakeConnection): void {
    if (connection.closed) throw new Error(`connection ${connection.n} closed twice`);
    connection.closed = true;
    this.closed.push(connection);
  }

  watch(connection: FakeConnection, watch: ConnectionWatch): () => void {
    connection.watch = watch;
    return () => {
      connection.watch = undefined;
    };
  }

  /** Settles the newest pending connect successfully. */
  resolveLast(): FakeConnection {
    return this.pending[this.pending.length - 1]!.resolve();
  }
}

/** An error the test's classifier calls a dead connection (maybe sent). */
export class DeadError extends Error {
  readonly dead = true;
}

/** An error the test's classifier calls not sent (e.g. refused stream), connection alive. */
export class NotSentError extends Error {
  readonly notSent = true;
}

/** The classifier pool tests use: reads the markers above, nothing else is dead or unsent. */
export function testClassify(err: unknown): { connectionDead: boolean; notSent: boolean } {
  return { connectionDead: err instanceof DeadError, notSent: err instanceof NotSentError };
}

/** A promise the test settles by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
