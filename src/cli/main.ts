/**
 * The `dialguard` command's parsing and dispatch, apart from the process so it can be tested:
 * `node:util`'s parseArgs, `--help`/`-h` and `--version` on every command, and a usage error
 * (one line naming the flag or value, then the usage, exit 2, no stack trace) for anything else.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import type { ChaosOptions } from '../chaos/index.js';

/** Where the command writes, and what it runs: the real ones in the bin, fakes in tests. */
export interface CliIo {
  /** Standard output. */
  out(text: string): void;
  /** Standard error. */
  err(text: string): void;
  /** Runs the demo's named scenes (all when empty). */
  demo(scenes: readonly string[]): Promise<void>;
  /** Runs the chaos scenarios; resolves with the number of scenarios whose guarded lane lost or double-settled a call. */
  chaos(options: ChaosOptions): Promise<number>;
  /** The demo's scene names, for checking and for help. */
  readonly sceneNames: readonly string[];
  /** The chaos scenario names, for checking and for help. */
  readonly scenarioNames: readonly string[];
}

/** A bad command line: its one line, and the usage of the command it was for. */
class UsageError extends Error {
  override readonly name = 'UsageError';
  /** Stable code. */
  readonly code = 'DIALGUARD_USAGE';
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

/** The package's version, from the package.json above this file (src/ or dist/src/). */
export function version(): string {
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'dialguard' && pkg.version !== undefined) return pkg.version;
    } catch {
      /* not this one */
    }
  }
  return 'unknown';
}

const topUsage = `usage: dialguard <command> [options]

commands:
  demo [scene...]   replay the seeds' incidents on embedded loopback peers, unguarded vs guarded
  chaos [options]   replay them under load, side by side, with a live view

options:
  -h, --help        this help (each command has its own: dialguard chaos --help)
  --version         the version

example:
  dialguard demo dead-host
`;

function demoUsage(io: CliIo): string {
  return `usage: dialguard demo [scene...] [options]

Replays the incidents dialguard exists for on embedded loopback peers, unguarded and guarded side
by side (about 30 seconds; no setup, no privileges).

scenes (default: all): ${io.sceneNames.join(', ')}

options:
  -h, --help        this help
  --version         the version

example:
  dialguard demo dead-host fetch
`;
}

function chaosUsage(io: CliIo): string {
  return `usage: dialguard chaos [options]

Replays the incidents under load, unguarded and guarded side by side, with a live view
(CPU-heavy: several minutes; --quick for a smoke run).

options:
  --scenario a,b    only these scenarios (${io.scenarioNames.join(', ')}); default all
  --quick           shorter timings (a smoke run)
  --json            one JSON line per scenario on stdout (the rest goes to stderr)
  --report FILE     also write a self-contained HTML report with the time series
                    (--report=FILE works too)
  -h, --help        this help
  --version         the version

example:
  dialguard chaos --quick --scenario dead-proxy --report=report.html
`;
}

const common = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

/** Parses with parseArgs, turning its errors into one line that names the flag or value. */
function parse<T extends ParseArgsConfig>(config: T, usage: string): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    const code = (err as { code?: string }).code;
    const message = err instanceof Error ? err.message : String(err);
    const named = /'([^']+)'/.exec(message)?.[1];
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown option ${named ?? message}`, usage);
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') throw new UsageError(`unexpected argument ${JSON.stringify(named ?? message)}`, usage);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') throw new UsageError(message.split('\n')[0]!.replace(/\.$/, ''), usage);
    throw err;
  }
}

/** Prints help or version when asked; true when it did. */
function helped(values: { help?: boolean | undefined; version?: boolean | undefined }, usage: string, io: CliIo): boolean {
  if (values.help === true) io.out(usage);
  else if (values.version === true) io.out(`dialguard ${version()}\n`);
  else return false;
  return true;
}

async function demo(args: string[], io: CliIo): Promise<number> {
  const usage = demoUsage(io);
  const { values, positionals } = parse({ args, options: common, allowPositionals: true, strict: true }, usage);
  if (helped(values, usage, io)) return 0;
  const unknown = positionals.find((p) => !io.sceneNames.includes(p));
  if (unknown !== undefined) throw new UsageError(`unknown scene ${JSON.stringify(unknown)} (scenes: ${io.sceneNames.join(', ')})`, usage);
  await io.demo(positionals);
  return 0;
}

async function chaos(args: string[], io: CliIo): Promise<number> {
  const usage = chaosUsage(io);
  const { values } = parse(
    {
      args,
      options: {
        ...common,
        quick: { type: 'boolean' },
        json: { type: 'boolean' },
        report: { type: 'string' },
        scenario: { type: 'string' },
      },
      allowPositionals: false,
      strict: true,
    },
    usage,
  );
  if (helped(values, usage, io)) return 0;
  if (values.report !== undefined && values.report.trim() === '') throw new UsageError('--report needs a file name', usage);
  const only = values.scenario?.split(',').filter((s) => s.length > 0);
  if (values.scenario !== undefined && (only === undefined || only.length === 0)) throw new UsageError('--scenario needs at least one name', usage);
  const unknown = only?.find((s) => !io.scenarioNames.includes(s));
  if (unknown !== undefined) throw new UsageError(`unknown scenario ${JSON.stringify(unknown)} for --scenario (have ${io.scenarioNames.join(', ')})`, usage);
  const options: ChaosOptions = {
    quick: values.quick === true,
    json: values.json === true,
    ...(values.report !== undefined ? { report: values.report } : {}),
    ...(only !== undefined ? { only } : {}),
  };
  const broken = await io.chaos(options);
  return broken > 0 ? 1 : 0;
}

/**
 * Runs the command line `argv` (without node and the script) and resolves with the exit code:
 * 0 done or help shown, 1 a run found lost or double-settled calls, 2 a usage error.
 */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'demo':
        return await demo(rest, io);
      case 'chaos':
        return await chaos(rest, io);
      case '-h':
      case '--help':
      case 'help':
        io.out(topUsage);
        return 0;
      case '--version':
        io.out(`dialguard ${version()}\n`);
        return 0;
      case undefined:
        throw new UsageError('no command given', topUsage);
      default:
        throw new UsageError(command.startsWith('-') ? `unknown option ${command}` : `unknown command ${JSON.stringify(command)}`, topUsage);
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`dialguard: ${err.message}\n\n${err.usage}`);
    return 2;
  }
}
