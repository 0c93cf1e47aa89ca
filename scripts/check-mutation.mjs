#!/usr/bin/env node
// Mutation score floors, after `stryker run` wrote its JSON report: fails (exit 1) when the score
// of the whole mutated code, or of a file with a floor of its own, is below its floor in
// test/mutation-floor.json. Score = (killed + timed out) / (killed + timed out + survived + no
// coverage), as Stryker counts it. Survivors left on purpose carry a Stryker disable comment.
import { readFileSync } from 'node:fs';

const report = JSON.parse(readFileSync(process.argv[2] ?? 'reports/mutation/mutation.json', 'utf8'));
const floor = JSON.parse(readFileSync(new URL('../test/mutation-floor.json', import.meta.url), 'utf8'));

function score(mutants) {
  let detected = 0;
  let valid = 0;
  for (const m of mutants) {
    if (m.status === 'Killed' || m.status === 'Timeout') detected++;
    if (['Killed', 'Timeout', 'Survived', 'NoCoverage'].includes(m.status)) valid++;
  }
  return valid === 0 ? 100 : (100 * detected) / valid;
}

const rows = [];
const problems = [];
const all = Object.values(report.files).flatMap((f) => f.mutants);
const overall = score(all);
rows.push(['(all mutated files)', overall, floor.overall]);
if (overall < floor.overall) problems.push(`overall ${overall.toFixed(2)} % < ${floor.overall} %`);
for (const [file, min] of Object.entries(floor.files)) {
  const f = report.files[file];
  if (f === undefined) {
    problems.push(`${file} has a floor but is not in the report`);
    continue;
  }
  const s = score(f.mutants);
  rows.push([file, s, min]);
  if (s < min) problems.push(`${file} ${s.toFixed(2)} % < ${min} %`);
}
for (const [name, s, min] of rows) console.log(`${name.padEnd(36)} ${s.toFixed(2).padStart(6)} %   floor ${min} %`);
if (problems.length > 0) {
  console.error(`mutation floors: FAILED\n  - ${problems.join('\n  - ')}`);
  process.exit(1);
}
console.log('mutation floors: ok');
