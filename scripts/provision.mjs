#!/usr/bin/env node
// Run by `npm test` before any test (the "pretest" script). npm brings every JavaScript piece,
// Chromium included; what no npm package ships is checked here: the real servers the suite runs
// (memcached, redis-server, nginx) and the tools its network-namespace tests use (unshare, ip). As root with apt-get,
// missing ones are installed from Debian's packages; otherwise this stops, before any test runs,
// with the exact command to run. DIALGUARD_NO_INSTALL=1 never installs.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';

/** [command on PATH, Debian package, what needs it] */
const NEEDS = [
  ['memcached', 'memcached', 'the memcached storm scenario and its tests (a real server)'],
  ['redis-server', 'redis-server', 'the dialguard/redis tests (a real server)'],
  ['nginx', 'nginx-light', 'the tests against a real nginx (reloads, GOAWAY churn, a restart)'],
  ['unshare', 'util-linux', 'the [netns] tests: a network namespace of their own'],
  ['ip', 'iproute2', 'the [netns] tests: the veth packet-drop blackhole'],
];

const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
const missing = () => NEEDS.filter(([cmd]) => !has(cmd));

let lacking = missing();
if (lacking.length === 0) {
  console.log(`provision: ok (${NEEDS.map(([cmd]) => cmd).join(', ')} found)`);
  process.exit(0);
}
const pkgs = lacking.map(([, pkg]) => pkg);
const command = `apt-get install -y --no-install-recommends ${pkgs.join(' ')}`;
for (const [cmd, pkg, why] of lacking) console.log(`provision: ${cmd} not found (Debian package ${pkg}), needed by ${why}`);

const root = process.getuid?.() === 0;
if (root && has('apt-get') && process.env.DIALGUARD_NO_INSTALL !== '1') {
  console.log(`provision: installing: ${command}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Debian's packages start their service on install (nginx on port 80, memcached on 11211): the
  // tests run their own instances, so no service is started (policy-rc.d answering 101, "action
  // forbidden", for the install's duration only, as container images do).
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) {
    try {
      writeFileSync(policy, '#!/bin/sh\nexit 101\n', { mode: 0o755 });
    } catch {
      /* no /usr/sbin to write: the services start, which the tests do not mind */
    }
  }
  const install = () => spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...pkgs], { env, stdio: 'inherit' });
  try {
    if (install().status !== 0) {
      spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'inherit' });
      install();
    }
  } finally {
    if (ownPolicy) rmSync(policy, { force: true });
  }
  lacking = missing();
  if (lacking.length === 0) {
    console.log('provision: ok (installed)');
    process.exit(0);
  }
}
const sudo = root ? '' : 'sudo ';
console.error(
  `provision: FAILED: no test was run. Install what is missing, then run npm test again:\n` +
    `  ${sudo}apt-get update && ${sudo}${command}\n` +
    (root ? '' : '(as root, npm test installs them itself)\n'),
);
process.exit(1);
