/**
 * A headless Chromium from npm, not from the system: `@sparticuz/chromium` ships the binary
 * inside its tarball (brotli), so `npm ci` is all a fresh machine needs. The shared libraries it
 * needs beyond Debian's base (NSS, NSPR) come from the same package's Amazon Linux 2023 bundle,
 * unpacked beside it and handed to the browser alone through LD_LIBRARY_PATH; this process's own
 * environment is left as it was.
 */
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';

/** Switches that keep a test browser quiet and off the network. */
const QUIET = ['--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Unpacks (once per machine, in the temp dir) and launches the npm-shipped headless Chromium. */
export async function launchChromium(): Promise<Browser> {
  const libs = join(tmpdir(), 'al2023', 'lib');
  // An earlier unpack without the library bundle would short-circuit it: start over.
  if (!existsSync(join(libs, 'libnss3.so'))) rmSync(join(tmpdir(), 'chromium'), { force: true });
  const saved = { ...process.env };
  let executablePath: string;
  let args: string[];
  let env: Record<string, string>;
  try {
    // The package unpacks its library bundle only where it believes it runs on Amazon Linux 2023.
    process.env.AWS_LAMBDA_JS_RUNTIME = 'nodejs20.x';
    const { default: Sparticuz } = await import('@sparticuz/chromium');
    executablePath = await Sparticuz.executablePath();
    args = Sparticuz.args;
    env = { ...(process.env as Record<string, string>) };
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  }
  delete env.AWS_LAMBDA_JS_RUNTIME;
  return chromium.launch({ executablePath, args: [...args, ...QUIET], env, headless: true });
}
