#!/usr/bin/env node
/**
 * The `dialguard` command.
 *
 *   dialguard demo [scene...]   replay the incidents on embedded peers, before and after
 *
 * @module
 */
import { runDemo } from './demo/index.js';

const usage = `usage: dialguard <command>

  demo [scene...]   replay the seeds' incidents on embedded loopback peers, unguarded vs guarded
`;

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'demo':
      await runDemo(rest);
      return 0;
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
