#!/usr/bin/env node
/**
 * The `dialguard` command (`dialguard --help`; each command has `--help` too).
 *
 *   dialguard demo [scene...]                        the incidents, before and after (about 30 seconds)
 *   dialguard chaos [--quick] [--json] [--report FILE] [--scenario a,b]
 *
 * @module
 */
import { runChaos, scenarios } from './chaos/index.js';
import { main } from './cli/main.js';
import { runDemo, sceneNames } from './demo/index.js';
import { exitOnSignals } from './testing/local-process.js';

exitOnSignals(); // the servers and workers a scenario starts are reaped, whatever ends the run

main(process.argv.slice(2), {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  demo: (scenes) => runDemo(scenes),
  chaos: async (options) => {
    const results = await runChaos(options);
    return results.filter((r) => r.lanes.guarded.summary.lost_calls + r.lanes.guarded.summary.double_settled > 0).length;
  },
  sceneNames,
  scenarioNames: scenarios.map((s) => s.name),
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // A failure during a run, not a usage error: its stack helps whoever reports it.
    process.stderr.write(`dialguard: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
