#!/usr/bin/env node
// Peer suites (issue 18), after `vitest run` wrote its JSON report: fails (exit 1) unless each
// suite that checks dialguard as a drop-in ran in full and passed: the standard gRPC interop
// cases (every case, plaintext, TLS and TLS with a host override, four client modes), the undici dispatcher contract
// (undici's Agent and GuardedAgent side by side) and the gRPC channel contract. A suite that
// stopped running, lost cases or was skipped must not pass CI quietly.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const reportPath = process.argv[2] ?? 'reports/vitest.json';
const report = JSON.parse(readFileSync(reportPath, 'utf8'));

/** Each peer suite and the fewest tests it must pass (its cases times its modes today). */
const suites = {
  'test/adapters/grpc/interop.test.ts': 180, // 15 cases x 3 transports x 4 client modes
  'test/adapters/undici/contract.test.ts': 60, // 30 clauses x 2 dispatchers
  'test/adapters/grpc/channel-contract.test.ts': 20, // 10 clauses x 2 client modes
};

const problems = [];
const lines = [];
for (const [file, floor] of Object.entries(suites)) {
  const result = report.testResults.find((r) => relative(process.cwd(), r.name) === file);
  if (result === undefined) {
    problems.push(`${file} did not run`);
    continue;
  }
  const passed = result.assertionResults.filter((t) => t.status === 'passed').length;
  const failed = result.assertionResults.filter((t) => t.status === 'failed').length;
  lines.push(`${file}: ${passed} passed`);
  if (failed > 0) problems.push(`${file}: ${failed} failed`);
  if (passed < floor) problems.push(`${file}: only ${passed} passed, below its ${floor} (a case was lost or skipped)`);
}
if (problems.length > 0) {
  console.error(`peer suites: FAILED\n  - ${problems.join('\n  - ')}`);
  process.exit(1);
}
console.log(`peer suites: ok\n  ${lines.join('\n  ')}`);
