#!/usr/bin/env node
// Suite integrity, after `vitest run` wrote its JSON report: fails (exit 1) when a test file ran
// no test, when fewer tests passed than the recorded floor, or when a privileged test did not
// pass (its parent only passes on hearing from its namespace child, so a pass means it ran).
// The floor lives in test/suite-floor.json; raise it when the suite grows.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const reportPath = process.argv[2] ?? 'reports/vitest.json';
const floorPath = new URL('../test/suite-floor.json', import.meta.url);
const report = JSON.parse(readFileSync(reportPath, 'utf8'));
const floor = JSON.parse(readFileSync(floorPath, 'utf8'));
const problems = [];

let passed = 0;
let privileged = 0;
for (const file of report.testResults) {
  const name = relative(process.cwd(), file.name);
  const ran = file.assertionResults.filter((t) => t.status === 'passed' || t.status === 'failed');
  if (ran.length === 0) problems.push(`${name} ran no test`);
  for (const t of file.assertionResults) {
    if (t.status === 'passed') passed++;
    if (t.title.startsWith('[netns]')) {
      if (t.status === 'passed') privileged++;
      else problems.push(`privileged test did not pass (${t.status}): ${name} > ${t.title}`);
    }
  }
}
if (report.numFailedTests > 0) problems.push(`${report.numFailedTests} test(s) failed`);
if (passed < floor.tests) problems.push(`only ${passed} tests passed, below the floor of ${floor.tests} (a test was lost or stopped running)`);
if (privileged < floor.privileged) problems.push(`only ${privileged} privileged tests ran, below the floor of ${floor.privileged}`);
if (report.testResults.length < floor.files) problems.push(`only ${report.testResults.length} test files ran, below the floor of ${floor.files}`);

const summary = `${passed} tests passed in ${report.testResults.length} files, ${privileged} privileged (floors: ${floor.tests}, ${floor.files}, ${floor.privileged})`;
if (problems.length > 0) {
  console.error(`suite integrity: FAILED\n  - ${problems.join('\n  - ')}\n${summary}`);
  process.exit(1);
}
console.log(`suite integrity: ok: ${summary}`);
if (passed > floor.tests + 20) console.log(`  (the floor could be raised to ${passed} in test/suite-floor.json)`);
