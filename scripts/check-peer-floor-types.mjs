#!/usr/bin/env node
/**
 * The published types against the oldest version of each peer the package accepts: packs the
 * package, installs it in a scratch project with each peer at the floor of its range
 * (`peerDependencies`), and type-checks an import of every subpath with `strict` and
 * `skipLibCheck: false`. An outside review found `dialguard/undici` naming a type undici added in
 * 7.11 and `dialguard/grpc` a method grpc-js added in 1.14, both inside the ranges (^7.0.0,
 * ^1.10.0): every user on those versions failed tsc. Needs the npm registry. Exits non-zero
 * on any type error, with tsc's output.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const floor = (range) => range.replace(/^[\^~>=\s]+/, '').split(/\s/)[0];
const tsVersion = pkg.devDependencies.typescript;
const peers = Object.entries(pkg.peerDependencies).map(([name, range]) => `${name}@${floor(range)}`);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dialguard-peer-floor-'));
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 300_000 });
try {
  const tarball = path.join(dir, run('npm', ['pack', '--silent', '--pack-destination', dir], root).trim().split('\n').pop());
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'peer-floor', private: true, type: 'module' }));
  run('npm', ['install', '--no-audit', '--no-fund', '--silent', tarball, ...peers, `typescript@${tsVersion}`, '@types/node@20'], dir);
  const subpaths = Object.keys(pkg.exports).filter((p) => p !== './package.json').map((p) => (p === '.' ? 'dialguard' : `dialguard/${p.slice(2)}`));
  fs.writeFileSync(path.join(dir, 'all.ts'), subpaths.map((s, i) => `import * as m${i} from '${s}';\nexport const k${i} = Object.keys(m${i});\n`).join(''));
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', lib: ['ES2023', 'ESNext.Disposable'], module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: false, noEmit: true, types: ['node'] }, files: ['all.ts'] }),
  );
  try {
    run(path.join(dir, 'node_modules', '.bin', 'tsc'), ['-p', '.'], dir);
  } catch (err) {
    console.error(`peer-floor types: tsc failed with ${peers.join(', ')}:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    process.exit(1);
  }
  console.log(`peer-floor types: ${subpaths.length} subpaths type-check with ${peers.join(', ')} (typescript ${tsVersion}, strict, skipLibCheck false)`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
