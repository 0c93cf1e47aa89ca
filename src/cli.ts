#!/usr/bin/env node
/**
 * The `dialguard` command.
 *
 *   dialguard demo [scene...]                        the incidents, before and after (about a minute)
 *   dialguard chaos [--quick] [--json] [--report FILE] [--scenario a,b]
 *
 * @module
 */
import { runChaos } from './chaos/index.js';
import { runDemo } from './demo/index.js';

const usage = `usage: dialguard <command>

  demo [scene...]      replay the seeds' incidents on embedded loopback peers, unguarded vs guarded
  chaos [options]      replay them under load, side by side, with a live view
      --scenario a,b   only these scenarios (s5, dead-proxy, memcached)
      --quick          shorter timings (a smoke run)
      --json           one JSON line per scenario on stdout (the rest goes to stderr)
      --report FILE    write a self-contained HTML report with the time series
`;

/** Reads `--name value` from `args`. */
function flag(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) throw new Error(`${name} needs a value`);
  return v;
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'demo':
      await runDemo(rest);
      return 0;
    case 'chaos': {
      const known = new Set(['--quick', '--json', '--report', '--scenario']);
      const bad = rest.filter((a, i) => a.startsWith('--') && !known.has(a) && !(i > 0 && ['--report', '--scenario'].includes(rest[i - 1]!)));
      if (bad.length > 0) throw new Error(`unknown option ${bad.join(', ')}\n${usage}`);
      const results = await runChaos({
        quick: rest.includes('--quick'),
        json: rest.includes('--json'),
        report: flag(rest, '--report'),
        only: flag(rest, '--scenario')?.split(',').filter((s) => s.length > 0),
      });
      const broken = results.filter((r) => r.lanes.guarded.summary.lost_calls + r.lanes.guarded.summary.double_settled > 0);
      return broken.length > 0 ? 1 : 0;
    }
    case undefined:
    case '-h':
    case '--help':
      process.stdout.write(usage);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`unknown command ${JSON.stringify(command)}\n${usage}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`dialguard: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
