#!/usr/bin/env node
// npm run bench [-- NAME... [bench flags]]: builds, then runs bench/NAME (all of bench/*.ts when
// no name is given), each ending with its JSON line. Exits non-zero if any bench fails.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const names = args.filter((a) => !a.startsWith('-') && !/^\d+$/.test(a));
const flags = args.filter((a) => !names.includes(a));
const all = readdirSync(new URL('../bench', import.meta.url))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3))
  .sort();
const chosen = names.length > 0 ? names : all;
for (const n of chosen) {
  if (!all.includes(n)) {
    console.error(`no bench named ${n}; have: ${all.join(', ')}`);
    process.exit(2);
  }
}
const build = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) process.exit(build.status ?? 1);
let failed = 0;
for (const n of chosen) {
  const r = spawnSync(process.execPath, [`dist/bench/${n}.js`, ...flags], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`bench ${n} failed (exit ${r.status})`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
