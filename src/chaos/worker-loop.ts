/**
 * What every chaos client worker (memcached, redis) does the same way: batch its report and send
 * it every 200 ms, run call loops that count each call's settlement exactly once, and start when
 * forked with its config as JSON in argv[2].
 *
 * @module
 */
import { fileURLToPath } from 'node:url';

/** The fields every worker report has; `C` is one call's record. */
export interface WorkerReportBase<C> {
  calls: C[];
  /** Wall-clock times of the dials to the watched node. */
  dials: number[];
  /** Dials to any node since the last report. */
  opened: number;
  breaker: Array<[open: 0 | 1, at: number]>;
  done?: { lost: number; double: number };
}

/** How often a worker sends its batch, ms: often enough for the live view, rarely enough for IPC. */
export const FLUSH_EVERY = 200;

/** An empty batch. */
export function emptyBatch<C>(): WorkerReportBase<C> {
  return { calls: [], dials: [], opened: 0, breaker: [] };
}

/**
 * A worker's report so far (`batch`, filled in by the worker), sent and replaced with an empty one
 * every {@link FLUSH_EVERY} ms from {@link start} on; {@link finish} sends the last with the final counts.
 */
export class Reporter<R extends WorkerReportBase<unknown>> {
  /** What has happened since the last report. */
  batch: R = emptyBatch() as R;
  #flush: NodeJS.Timeout | undefined;

  constructor(readonly send: (r: R) => Promise<void>) {}

  /** Starts sending the batch every {@link FLUSH_EVERY} ms. */
  start(): void {
    this.#flush = setInterval(() => {
      const out = this.batch;
      this.batch = emptyBatch() as R;
      void this.send(out);
    }, FLUSH_EVERY);
  }

  /** Stops sending every {@link FLUSH_EVERY} ms. */
  stop(): void {
    clearInterval(this.#flush);
  }

  /** Stops the timer and sends what is left with `done`. */
  async finish(done: { lost: number; double: number }): Promise<void> {
    this.stop();
    await this.send({ ...this.batch, done });
  }
}

/** One loop's hooks for {@link runCallLoops}. */
export interface CallLoops {
  /** How many loops run side by side. */
  loops: number;
  /** Each loop stops starting calls once this many ms have passed. */
  durationMs: number;
  /** The i-th call of loop `loop`. */
  call(loop: number, i: number): Promise<unknown>;
  /** Records a settled call (wall-clock start and end). Called once per call. */
  record(loop: number, start: number, end: number, ok: 0 | 1): void;
  /** Waited for between one loop's calls. */
  pause(): Promise<unknown>;
}

/**
 * Runs the loops until `durationMs` has passed and resolves with the calls started but never
 * settled (`lost`) and the settlements after a call's first (`double`).
 */
export async function runCallLoops(o: CallLoops): Promise<{ lost: number; double: number }> {
  const until = Date.now() + o.durationMs;
  let started = 0;
  let settled = 0;
  let double = 0;
  await Promise.all(
    Array.from({ length: o.loops }, async (_, loop) => {
      for (let i = 0; Date.now() < until; i++) {
        const t0 = Date.now();
        started++;
        let count = 0;
        const settle = (ok: 0 | 1): void => {
          if (++count > 1) {
            double++;
            return;
          }
          settled++;
          o.record(loop, t0, Date.now(), ok);
        };
        await o.call(loop, i).then(
          () => settle(1),
          () => settle(0),
        );
        await o.pause();
      }
    }),
  );
  return { lost: started - settled, double };
}

/**
 * When this process was forked to run the module at `moduleUrl` with a config in argv[2], runs
 * `run` with that config, a `send` over IPC and a promise of the parent's first message, then
 * exits (1, with `name` in the message, if it failed). Otherwise does nothing: tests import the
 * module and call its worker in-process.
 */
export function runWhenForked<C, R>(moduleUrl: string, name: string, run: (config: C, send: (r: R) => Promise<void>, go: Promise<void>) => Promise<void>): void {
  if (process.send === undefined || process.argv[2] === undefined || process.argv[1] !== fileURLToPath(moduleUrl)) return;
  const send = (r: R): Promise<void> => new Promise((resolve) => process.send!(r, () => resolve()));
  const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
  run(JSON.parse(process.argv[2]) as C, send, go).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${name} failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
}
