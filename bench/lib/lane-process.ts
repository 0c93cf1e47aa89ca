/**
 * A bench lane in a process of its own: one client, its own event loop, JIT and heap, running
 * rounds when the parent asks (over IPC) and reporting each round's throughput and CPU.
 *
 * Why: two clients in one process share what a user's two processes would not: the JIT's
 * feedback, the heap and its GC, and grpc-js's subchannel pool (two clients with equal options
 * ride one connection). A/A runs of bench/grpc's healthy lane in one process read 1.029 (two raw
 * clients) and 1.030 (two guarded ones), the client created second ahead, over 150 pairs; in two
 * processes, raw against raw read 0.997 (150 pairs) and 1.04 (500), the machine's own noise.
 * (undici's lane read 1.001 and 0.998 in one process: it shares nothing of that kind.) A user's
 * process runs one kind of client, so each lane gets one process; rounds still alternate, so
 * only one lane runs at a time.
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { once } from 'node:events';
import { promisify } from 'node:util';
import { type Paired, pairedRuns } from './paired.js';
import { progress } from './report.js';
import { type Throughput, throughput } from './timing.js';

/** What the parent sends: run a round of `ms`, or close and report. */
type Command = { run: number } | { close: true };

/** A lane process, seen from the parent. */
export interface LaneProcess {
  /** Runs one round of `ms` in the child. */
  run(ms: number): Promise<Throughput>;
  /** Closes the child's client and ends the child; resolves with what it reported on closing. */
  close(): Promise<Record<string, unknown>>;
}

/** Bounds one answer from a lane: a round of a few hundred ms never takes this long. */
const ANSWER_TIMEOUT = 60_000;

/**
 * Starts this bench's own script again as a lane child, with `args` after the parent's own
 * arguments (the child finds its role in them and calls {@link serveLane}). Resolves once the
 * child is ready.
 */
export async function laneProcess(args: readonly string[]): Promise<LaneProcess> {
  const child = fork(process.argv[1]!, [...process.argv.slice(2), ...args], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await answer(child); // { ready: true }
  return {
    run: async (ms) => {
      child.send({ run: ms } satisfies Command);
      return (await answer(child)) as unknown as Throughput;
    },
    close: async () => {
      const exited = once(child, 'exit');
      child.send({ close: true } satisfies Command);
      const report = await answer(child);
      await exited;
      return report;
    },
  };
}

/** The child's next message; rejects if it exits first or stays silent past ANSWER_TIMEOUT. */
function answer(child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    const onMessage = (message: Record<string, unknown>): void => {
      done();
      resolve(message);
    };
    const onExit = (code: number | null): void => {
      done();
      reject(new Error(`lane process ${child.pid} exited (${code}) before answering`));
    };
    const timer = setTimeout(() => {
      done();
      child.kill('SIGKILL');
      reject(new Error(`lane process ${child.pid} did not answer within ${ANSWER_TIMEOUT} ms`));
    }, ANSWER_TIMEOUT);
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

/**
 * The child's side: `callers` concurrent loops of `call` for each round the parent asks; on
 * close, `close()` runs and its report goes back before the process disconnects.
 */
export function serveLane(callers: number, call: () => Promise<unknown>, close: () => Promise<Record<string, unknown>>): void {
  process.on('message', (command: Command) => {
    const reply = 'run' in command ? throughput(callers, command.run, call) : close();
    reply.then(
      (message) => {
        process.send!(message);
        if (!('run' in command)) process.disconnect();
      },
      (err: unknown) => {
        process.stderr.write(`lane failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
        process.exit(1);
      },
    );
  });
  process.send!({ ready: true });
}

/** How {@link pairedLanes} runs two lanes, each in processes of its own. */
export interface LaneRun {
  /** The child arguments of lane A (the raw lane, the ratio's denominator) and of lane B. */
  readonly a: readonly string[];
  readonly b: readonly string[];
  readonly rounds: number;
  readonly ms: number;
  /**
   * Pairs run by one pair of lane processes before both are replaced. A process keeps for its
   * life whatever made it a little faster or slower than its twin (where its memory and threads
   * landed): one pair of raw gRPC processes read 1.05, 0.99 and 1.01 against each other in three
   * 200-pair runs. Fresh processes every 25 pairs spread that over 20 placements in 500 pairs.
   */
  readonly generation: number;
  /** Each fresh process runs this long before its first measured round. */
  readonly warmUpMs: number;
}

/**
 * Lane A against lane B in alternating rounds ({@link pairedRuns}), each lane in a process of its
 * own, both replaced every `generation` pairs; which is forked (and warmed) first alternates from
 * one generation to the next. Returns the pairs and what each of B's processes reported on
 * closing.
 */
export async function pairedLanes(run: LaneRun): Promise<{ paired: Paired; reports: Array<Record<string, unknown>> }> {
  const reports: Array<Record<string, unknown>> = [];
  let generation = 0;
  let current: { a: LaneProcess; b: LaneProcess } | undefined;
  const start = async (): Promise<void> => {
    const aFirst = generation++ % 2 === 0;
    const first = await laneProcess(aFirst ? run.a : run.b);
    const second = await laneProcess(aFirst ? run.b : run.a);
    await first.run(run.warmUpMs);
    await second.run(run.warmUpMs);
    current = aFirst ? { a: first, b: second } : { a: second, b: first };
  };
  const stop = async (): Promise<void> => {
    await current!.a.close();
    reports.push(await current!.b.close());
    current = undefined;
  };
  await start();
  const paired = await pairedRuns(
    run.rounds,
    run.ms,
    (ms) => current!.a.run(ms),
    (ms) => current!.b.run(ms),
    async (i) => {
      if ((i + 1) % run.generation !== 0 || i + 1 === run.rounds) return;
      await stop();
      await start();
    },
  );
  await stop();
  return { paired, reports };
}

/**
 * Runs this bench's own script again with `flag` added, and returns the JSON value the child
 * prints last: a lane whose JIT feedback and heap must not mix with the parent's clients.
 */
export async function inChild<T>(flag: string): Promise<T> {
  const { stdout } = await promisify(execFile)(process.execPath, [...process.execArgv, process.argv[1]!, ...process.argv.slice(2), flag], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as T;
}

/** A bench's raw-against-guarded healthy lanes, each client a lane child: {@link healthyLanes}. */
export interface HealthyLanes extends Omit<LaneRun, 'a' | 'b'> {
  /** The child's flag; the child finds `raw` or `guarded` and `url` after it. */
  readonly flag: string;
  readonly url: string;
  /** Also raw against raw by the same method: what it reads when there is nothing to find. */
  readonly calibrate: boolean;
  /**
   * Also raw against this lane kind by the same method (the child finds it where it finds `raw`):
   * the least any layer of that kind costs, for the guarded lane to be read against.
   */
  readonly floor?: string | undefined;
}

/** Raw (lane A) against guarded (lane B) by {@link pairedLanes}, and the calibration and the floor when asked. */
export async function healthyLanes(run: HealthyLanes): Promise<Paired & { calibration: Paired | undefined; floor: Paired | undefined }> {
  const { flag, url, calibrate, floor: floorKind, ...lane } = run;
  const lanes = async (a: string, b: string): Promise<Paired> => (await pairedLanes({ ...lane, a: [flag, a, url], b: [flag, b, url] })).paired;
  const main = await lanes('raw', 'guarded');
  let calibration: Paired | undefined;
  if (calibrate) {
    progress(`calibration: raw against raw, ${run.rounds} pairs, each in a process of its own`);
    calibration = await lanes('raw', 'raw');
  }
  let floor: Paired | undefined;
  if (floorKind !== undefined) {
    progress(`floor: raw against ${floorKind}, ${run.rounds} pairs, each in a process of its own`);
    floor = await lanes('raw', floorKind);
  }
  return { ...main, calibration, floor };
}
