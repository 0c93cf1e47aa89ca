/**
 * The package as a user gets it (issue 13): `npm pack`, then an install of the tarball into a
 * temporary consumer project, offline (the package has no dependencies; its peers are optional).
 * Every subpath must import from ESM and from CJS `require` (Node's require(esm), 20.19+), the
 * tarball must hold nothing but the allow-list, and the adapters must load nothing of the
 * demo, chaos or CLI code. publint and arethetypeswrong (ESM-only profile) must be clean. And
 * every ```ts block of the README is a program that typechecks against the installed package
 * in a strict consumer (NodeNext, exactOptionalPropertyTypes; TypeScript 5.9 and 7); those that need
 * no outside host run.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, unknown>;
  peerDependencies: Record<string, string>;
  sideEffects?: unknown;
  files: string[];
};
const subpaths = Object.keys(pkg.exports)
  .filter((k) => k !== './package.json')
  .map((k) => (k === '.' ? 'dialguard' : `dialguard/${k.slice(2)}`));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** What may ship: the library's JS and types, LICENSE, README and package.json. Nothing else. */
const ALLOWED = [/^package\.json$/, /^LICENSE$/, /^README\.md$/, /^dist\/src\/(?!cli[/.]|chaos\/|demo\/)[\w/.-]+\.(js|d\.ts)$/];

let dir: string;
let tarball: string;
let files: string[];
let consumer: string;

function run(cmd: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = {}): { stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 180_000, env: { ...process.env, NO_COLOR: '1', ...env } });
  const output = `${r.error?.message ?? ''}\n${r.stdout}\n${r.stderr}`;
  expect(r.status, `${cmd} ${args.join(' ')} failed (exit ${r.status}):\n${output.slice(-3_000)}`).toBe(0);
  return { stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'dialguard-pack-'));
  const packed = JSON.parse(run(npm, ['pack', '--json', '--pack-destination', dir], root).stdout.replace(/^[^[]*/, '')) as Array<{ filename: string; files: Array<{ path: string }> }>;
  tarball = join(dir, packed[0]!.filename);
  files = packed[0]!.files.map((f) => f.path).sort();
  consumer = join(dir, 'consumer');
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
  const install = run(npm, ['install', '--offline', '--no-audit', '--no-fund', '--no-package-lock', tarball], consumer);
  expect(`${install.stdout}${install.stderr}`).not.toMatch(/prepare/);
}, 240_000);
afterAll(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** Runs an ESM snippet in the consumer project. */
function esm(code: string, args: readonly string[] = []): string {
  return run(process.execPath, [...args, '--input-type=module', '-e', code], consumer).stdout;
}

/** Runs a CommonJS snippet in the consumer project. */
function cjs(code: string): string {
  return run(process.execPath, ['--no-warnings', '--input-type=commonjs', '-e', code], consumer).stdout;
}

/**
 * Makes the optional peers, Node's types, and the clients the README's examples plug dialguard
 * into (axios, got, node-redis, ioredis) importable in the consumer: links to this repo's copies.
 */
function linkPeers(): void {
  for (const peer of [...Object.keys(pkg.peerDependencies), '@types/node', 'axios', 'got', 'redis', 'ioredis']) {
    const at = join(consumer, 'node_modules', peer);
    mkdirSync(dirname(at), { recursive: true });
    try {
      symlinkSync(join(root, 'node_modules', peer), at, 'dir');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

describe('the packed package', () => {
  it('holds only the allow-list: library JS and types, LICENSE, README, package.json; no maps, no demo, chaos or CLI', () => {
    const stray = files.filter((f) => !ALLOWED.some((re) => re.test(f)));
    expect(stray).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    expect(files.filter((f) => f.endsWith('.map'))).toEqual([]);
    // Nor a comment naming one: a bundler's source-map loader (webpack's, Vite's) warned once per
    // file that the map it names is missing.
    const installed = join(consumer, 'node_modules', 'dialguard');
    const naming = files.filter((f) => f.endsWith('.js') && readFileSync(join(installed, f), 'utf8').includes('sourceMappingURL'));
    expect(naming).toEqual([]);
    // every export's JS and types are in it
    for (const target of Object.values(pkg.exports)) {
      if (typeof target === 'string') continue;
      const { types, default: js } = target as { types: string; default: string };
      expect(files).toContain(types.slice(2));
      expect(files).toContain(js.slice(2));
    }
  });

  it('installs offline without running a prepare script, with no peers present, and the core imports', () => {
    const out = esm("const m = await import('dialguard'); console.log(Object.keys(m).length);");
    expect(Number(out.trim())).toBeGreaterThan(10);
  });

  it('every subpath imports from ESM and from CJS require, with the same exports', () => {
    linkPeers();
    for (const subpath of subpaths) {
      const viaImport = JSON.parse(esm(`console.log(JSON.stringify(Object.keys(await import('${subpath}')).sort()))`)) as string[];
      const viaRequire = JSON.parse(cjs(`console.log(JSON.stringify(Object.keys(require('${subpath}')).sort()))`)) as string[];
      expect(viaImport.length, subpath).toBeGreaterThan(0);
      expect(viaRequire.filter((k) => k !== '__esModule' && k !== 'module.exports'), subpath).toEqual(viaImport);
    }
  });

  it("import('dialguard/undici') loads none of the demo, chaos, CLI or testing code (file count measured)", () => {
    linkPeers();
    const log = join(dir, 'loaded.txt');
    writeFileSync(join(consumer, 'hooks.mjs'), "import { appendFileSync } from 'node:fs';\nexport async function load(url, context, next) {\n  if (url.startsWith('file:')) appendFileSync(process.env.LOADED_LOG, url + '\\n');\n  return next(url, context);\n}\n");
    writeFileSync(join(consumer, 'register.mjs'), "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n");
    run(process.execPath, ['--import', './register.mjs', '--input-type=module', '-e', "await import('dialguard/undici')"], consumer, { LOADED_LOG: log });
    const loaded = readFileSync(log, 'utf8')
      .split('\n')
      .filter((u) => u.includes('/node_modules/dialguard/'))
      .map((u) => u.slice(u.indexOf('/node_modules/dialguard/') + '/node_modules/dialguard/'.length));
    expect(loaded.length).toBeGreaterThan(0);
    expect(loaded.filter((f) => /^dist\/src\/(cli|chaos|demo|testing)[/.]/.test(f))).toEqual([]);
    // Nor the other adapters: a user of fetch pays for no gRPC, Redis, node:http or OTel code.
    expect(loaded.filter((f) => /^dist\/src\/(adapters\/(grpc|redis|http|otel)|http2)[/.]/.test(f))).toEqual([]);
    // The measure, for the record (issue 13): the adapter's own files, core, guard, pool, retry,
    // observe. 41 since the pool's pieces (trip, idle sweep, user code) got files of their own;
    // 48 with the agent's dial-waiters (whose dial a traced connection is); 50 with the TLS
    // session cache, a file of its own since Http2Client keeps sessions too.
    console.log(`import('dialguard/undici') loaded ${loaded.length} dialguard files`);
    expect(loaded.length).toBeLessThan(52);
  });

  it('declares sideEffects: false and ships LICENSE as the MIT text', () => {
    expect(pkg.sideEffects).toBe(false);
    expect(readFileSync(join(consumer, 'node_modules/dialguard/LICENSE'), 'utf8')).toMatch(/^MIT License/);
  });

  it('publint is clean, and arethetypeswrong is clean for ESM importers (node16/nodenext and bundler)', () => {
    const publint = run(process.execPath, [join(root, 'node_modules/publint/src/cli.js'), 'run', tarball, '--strict'], root);
    expect(publint.stdout).toMatch(/All good/);
    run(process.execPath, [join(root, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarball, '--profile', 'esm-only', '--format', 'json', '--quiet'], root);
  });
});

/** The README's ```ts blocks, each with the line it starts on. */
function readmeBlocks(): Array<{ line: number; code: string }> {
  const lines = readFileSync(join(root, 'README.md'), 'utf8').split('\n');
  const blocks: Array<{ line: number; code: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```ts') continue;
    const start = i + 1;
    while (i + 1 < lines.length && lines[i + 1] !== '```') i++;
    blocks.push({ line: start + 1, code: lines.slice(start, i + 1).join('\n') });
  }
  return blocks;
}

/** A block that can run here: it declares nothing it leaves unimplemented and names no outside host. */
const runnable = (code: string): boolean => !/\bdeclare\b|\.internal\b/.test(code);

describe('the README examples, as a user pastes them', () => {
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const tsgo = join(root, 'node_modules/@typescript/native-preview/bin/tsgo');
  const blocks = readmeBlocks();

  it('every ```ts block typechecks against the installed package with TypeScript 5.9 and 7 (NodeNext, strict, exactOptionalPropertyTypes)', () => {
    linkPeers();
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    const at = join(consumer, 'readme');
    mkdirSync(at, { recursive: true });
    const names = blocks.map((b, i) => {
      const name = `example-${i + 1}-line-${b.line}.ts`;
      writeFileSync(join(at, name), `${b.code}\nexport {};\n`);
      return name;
    });
    writeFileSync(
      join(at, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          lib: ['ES2023', 'ESNext.Disposable'],
          types: ['node'],
          strict: true,
          exactOptionalPropertyTypes: true,
          skipLibCheck: true,
          outDir: 'out',
        },
        files: names,
      }),
    );
    // TypeScript 5.9 (tsc, which also emits them for the run below) and 7 (the native tsgo).
    for (const [compiler, extra] of [[tsc, []], [tsgo, ['--noEmit']]] as const) {
      const r = spawnSync(process.execPath, [compiler, '-p', at, ...extra], { cwd: at, encoding: 'utf8', timeout: 120_000 });
      expect(`${r.stdout}${r.stderr}`, `README examples that do not compile with ${compiler} (file names carry the README line)`).toBe('');
      expect(r.status).toBe(0);
    }
  }, 120_000);

  it("the package's own types check (skipLibCheck off) in a project whose lib has DOM, as TypeScript's default lib does", () => {
    // With DOM, RequestInit is the DOM's, which has no dispatcher: forFetch's type named
    // RequestInit['dispatcher'] and every import of dialguard/undici failed to compile (an outside review).
    linkPeers();
    const at = join(consumer, 'dom');
    mkdirSync(at, { recursive: true });
    const subpaths = ['dialguard', 'dialguard/undici', 'dialguard/http', 'dialguard/http2', 'dialguard/grpc', 'dialguard/redis', 'dialguard/otel', 'dialguard/testing'];
    writeFileSync(join(at, 'uses.ts'), `${subpaths.map((p, i) => `import * as m${i} from '${p}';`).join('\n')}\nimport { GuardedAgent, forFetch } from 'dialguard/undici';\nconst agent = new GuardedAgent();\nvoid fetch('http://127.0.0.1:1/', { dispatcher: forFetch(agent) } as RequestInit).catch(() => agent.close());\nexport const all = [${subpaths.map((_, i) => `m${i}`).join(', ')}];\n`);
    writeFileSync(
      join(at, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', lib: ['ES2023', 'DOM', 'ESNext.Disposable'], types: ['node'], strict: true, skipLibCheck: false, noEmit: true },
        files: ['uses.ts'],
      }),
    );
    const r = spawnSync(process.execPath, [tsc, '-p', at], { cwd: at, encoding: 'utf8', timeout: 120_000 });
    expect(`${r.stdout}${r.stderr}`).toBe('');
    expect(r.status).toBe(0);
  }, 120_000);

  it('the blocks that need no outside host run to completion against loopback', () => {
    const ran = blocks.flatMap((b, i) => (runnable(b.code) ? [`example-${i + 1}-line-${b.line}.js`] : []));
    expect(ran.length).toBeGreaterThanOrEqual(1);
    for (const file of ran) run(process.execPath, [join(consumer, 'readme', 'out', file)], join(consumer, 'readme'));
  });
});
