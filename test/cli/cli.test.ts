/**
 * The `dialguard` command line (issue 13): parseArgs, --help/-h and --version on every command,
 * and a usage error (one line naming it, the usage, exit 2, no stack trace) for a bad flag or
 * value. In-process with fake runners, so no help or error path can start a run unnoticed; and a
 * few through the real entry point in a child process, for exit codes and streams.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ChaosOptions } from '../../src/chaos/index.js';
import { type CliIo, main } from '../../src/cli/main.js';

const pkgVersion = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

interface Run {
  code: number;
  out: string;
  err: string;
  demos: Array<readonly string[]>;
  chaos: ChaosOptions[];
}

async function run(...argv: string[]): Promise<Run> {
  const r: Run = { code: -1, out: '', err: '', demos: [], chaos: [] };
  const io: CliIo = {
    out: (t) => void (r.out += t),
    err: (t) => void (r.err += t),
    demo: async (scenes) => void r.demos.push(scenes),
    chaos: async (options) => {
      r.chaos.push(options);
      return 0;
    },
    sceneNames: ['dead-host', 'dead-connection', 'fetch'],
    scenarioNames: ['s5', 'dead-proxy', 'memcached'],
  };
  r.code = await main(argv, io);
  return r;
}

/** A usage error: exit 2, nothing run, nothing on stdout, one line naming `what`, then the usage. */
function expectUsageError(r: Run, what: RegExp, usage: RegExp): void {
  expect(r.code).toBe(2);
  expect(r.demos).toEqual([]);
  expect(r.chaos).toEqual([]);
  expect(r.out).toBe('');
  const [first, blank, ...usageLines] = r.err.split('\n');
  expect(first).toMatch(what);
  expect(first).toMatch(/^dialguard: /);
  expect(blank).toBe('');
  expect(usageLines.join('\n')).toMatch(usage);
  expect(r.err).not.toMatch(/\n\s+at /);
}

describe('dialguard CLI: help and version on every command', () => {
  for (const argv of [['chaos', '-h'], ['chaos', '--help'], ['chaos', '--quick', '-h']]) {
    it(`${argv.join(' ')} prints the chaos usage, options and an example, exits 0 and starts no run`, async () => {
      const r = await run(...argv);
      expect(r.code).toBe(0);
      expect(r.chaos).toEqual([]);
      expect(r.out).toMatch(/^usage: dialguard chaos/);
      for (const opt of ['--scenario', '--quick', '--json', '--report', '--help', '--version', 'example:']) expect(r.out).toContain(opt);
      expect(r.err).toBe('');
    });
  }

  for (const argv of [['demo', '--help'], ['demo', '-h'], ['demo', 'fetch', '--help']]) {
    it(`${argv.join(' ')} prints the demo usage with its scenes and exits 0 without running a scene`, async () => {
      const r = await run(...argv);
      expect(r.code).toBe(0);
      expect(r.demos).toEqual([]);
      expect(r.out).toMatch(/^usage: dialguard demo/);
      expect(r.out).toContain('dead-host, dead-connection, fetch');
      expect(r.out).toContain('example:');
    });
  }

  for (const argv of [['--help'], ['-h'], ['help']]) {
    it(`${argv.join(' ')} prints the commands and exits 0`, async () => {
      const r = await run(...argv);
      expect(r).toMatchObject({ code: 0, err: '' });
      expect(r.out).toMatch(/^usage: dialguard <command>/);
      expect(r.out).toContain('example:');
    });
  }

  for (const argv of [['--version'], ['demo', '--version'], ['chaos', '--version']]) {
    it(`${argv.join(' ')} prints the package version and exits 0`, async () => {
      const r = await run(...argv);
      expect(r).toMatchObject({ code: 0, out: `dialguard ${pkgVersion}\n`, err: '', chaos: [], demos: [] });
    });
  }
});

describe('dialguard CLI: options reach the run', () => {
  it('--report=x.html is accepted, as is --report x.html', async () => {
    expect((await run('chaos', '--report=x.html')).chaos).toEqual([{ quick: false, json: false, report: 'x.html' }]);
    expect((await run('chaos', '--report', 'x.html')).chaos).toEqual([{ quick: false, json: false, report: 'x.html' }]);
  });

  it('chaos --quick --json --scenario s5,dead-proxy runs those two, quick, as JSON', async () => {
    const r = await run('chaos', '--quick', '--json', '--scenario', 's5,dead-proxy');
    expect(r.code).toBe(0);
    expect(r.chaos).toEqual([{ quick: true, json: true, only: ['s5', 'dead-proxy'] }]);
  });

  it('demo with scenes runs those; demo alone runs all', async () => {
    expect((await run('demo', 'fetch', 'dead-host')).demos).toEqual([['fetch', 'dead-host']]);
    expect((await run('demo')).demos).toEqual([[]]);
  });
});

describe('dialguard CLI: bad flags and values are one line, the usage, exit 2', () => {
  const cases: Array<[string[], RegExp, RegExp]> = [
    [['chaos', '--bogus'], /unknown option --bogus$/, /^usage: dialguard chaos/],
    [['chaos', '-x'], /unknown option -x$/, /^usage: dialguard chaos/],
    [['demo', '--help2'], /unknown option --help2$/, /^usage: dialguard demo/],
    [['demo', 'nope'], /unknown scene "nope"/, /^usage: dialguard demo/],
    [['chaos', '--report'], /--report.*argument missing/, /^usage: dialguard chaos/],
    [['chaos', '--report='], /--report needs a file name/, /^usage: dialguard chaos/],
    [['chaos', '--report', '--json'], /--report.*ambiguous/, /^usage: dialguard chaos/],
    [['chaos', '--quick=yes'], /--quick.*does not take an argument/, /^usage: dialguard chaos/],
    [['chaos', '--scenario', 'nope'], /unknown scenario "nope" for --scenario/, /^usage: dialguard chaos/],
    [['chaos', '--scenario', ','], /--scenario needs at least one name/, /^usage: dialguard chaos/],
    [['chaos', 'extra'], /unexpected argument "extra"/, /^usage: dialguard chaos/],
    [['frob'], /unknown command "frob"/, /^usage: dialguard <command>/],
    [['--frob'], /unknown option --frob/, /^usage: dialguard <command>/],
    [[], /no command given/, /^usage: dialguard <command>/],
  ];
  for (const [argv, what, usage] of cases) {
    it(`"${argv.join(' ')}" is a usage error naming it`, async () => {
      expectUsageError(await run(...argv), what, usage);
    });
  }
});

describe('dialguard CLI: through the real entry point', () => {
  const viteNode = fileURLToPath(new URL('../../node_modules/vite-node/vite-node.mjs', import.meta.url));
  const cli = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
  const spawnCli = (...argv: string[]) => spawnSync(process.execPath, [viteNode, cli, ...argv], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, NO_COLOR: '1' } });

  it('chaos -h exits 0 with the usage on stdout (it used to start the full run)', () => {
    const r = spawnCli('chaos', '-h');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: dialguard chaos/);
    expect(r.stderr).toBe('');
  });

  it('chaos --bogus exits 2: one line naming it, the usage, no stack trace, on stderr', () => {
    const r = spawnCli('chaos', '--bogus');
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.split('\n')[0]).toBe('dialguard: unknown option --bogus');
    expect(r.stderr).toContain('usage: dialguard chaos');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('--version prints the version', () => {
    const r = spawnCli('--version');
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`dialguard ${pkgVersion}\n`);
  });
});
