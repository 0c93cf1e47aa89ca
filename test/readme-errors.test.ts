/**
 * The README's error table is the errors the code throws: every class it names is exported from
 * the entry point the README says, an instance carries the `code` the table gives, and every
 * dialguard error class the package exports is in the table (issue 12, "Done when").
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as grpcEntry from '../src/adapters/grpc/index.js';
import * as main from '../src/index.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The rows of the table under `## Errors`: class name and code. */
function errorTable(): Array<{ name: string; code: string }> {
  const section = readme.slice(readme.indexOf('\n## Errors\n'));
  const body = section.slice(0, section.indexOf('\n## ', 1));
  const rows: Array<{ name: string; code: string }> = [];
  for (const line of body.split('\n')) {
    const m = /^\| `(\w+)` \| `(\w+)` \|/.exec(line);
    if (m !== null) rows.push({ name: m[1]!, code: m[2]! });
  }
  return rows;
}

/** One instance of each dialguard error class, made as the code makes it. */
const make: Record<string, () => unknown> = {
  HostUnavailableError: () => new main.HostUnavailableError('h:1', 10, 'open'),
  ConnectTimeoutError: () => new main.ConnectTimeoutError('h:1', 10, 'tcp'),
  ConnectionGoneError: () => new main.ConnectionGoneError('h:1', 1),
  KeepAliveTimeoutError: () => new main.KeepAliveTimeoutError(10, 10),
  TransportClosedError: () => new main.TransportClosedError('h:1'),
  ClientCertificateRejectedError: () => new main.ClientCertificateRejectedError('h:1'),
  RequestTimeoutError: () => new main.RequestTimeoutError(10),
  DeadlineExceededError: () => new main.DeadlineExceededError(10, 1),
  RetriesExhaustedError: () => new main.RetriesExhaustedError([new Error('x')], 'test'),
  RetryBudgetExhaustedError: () => new main.RetryBudgetExhaustedError(),
  NoServerAvailableError: () => new main.NoServerAvailableError(2, 10),
  PoolClosedError: () => new main.PoolClosedError(),
};

describe("README's error table", () => {
  const rows = errorTable();

  it('names every error code dialguard has, once each', () => {
    expect(rows.map((r) => r.code).sort()).toEqual(Object.values(main.ErrorCodes).sort());
  });

  it('each class it names is exported from dialguard, and an instance carries the code and name the table gives', () => {
    for (const { name, code } of rows) {
      const cls = (main as Record<string, unknown>)[name];
      expect(typeof cls, `${name} exported from dialguard`).toBe('function');
      expect(make[name], `a factory for ${name} in this test`).toBeDefined();
      const err = make[name]!();
      expect(err, name).toBeInstanceOf(cls as new () => unknown);
      expect(err, name).toBeInstanceOf(main.DialguardError);
      expect(err, name).toMatchObject({ code, name });
    }
  });

  it('every DialguardError class the package exports is in the table', () => {
    const exported = Object.entries(main)
      .filter(([, v]) => typeof v === 'function' && (v as { prototype?: unknown }).prototype instanceof main.DialguardError)
      .map(([k]) => k)
      .filter((k) => k !== 'DialguardError') // the base, named in the text above the table
      .sort();
    expect(exported).toEqual(rows.map((r) => r.name).sort());
  });

  it('names the base class, findError and isPermanent, all exported', () => {
    for (const name of ['DialguardError', 'findError', 'isPermanent']) {
      expect(readme, name).toContain(`\`${name}`);
      expect(typeof (main as Record<string, unknown>)[name], name).toBe('function');
    }
  });

  it('HostUnavailableError is permanent, as the table says; no other is', () => {
    for (const { name } of rows) expect(main.isPermanent(make[name]!()), name).toBe(name === 'HostUnavailableError');
  });

  it('the gRPC ChannelConnectError it names is exported from dialguard/grpc, an Error named for its class', () => {
    // The README promises the class by name and by instanceof; its wording around may change.
    expect(readme).toMatch(/failed\s+channel\s+connect\s+is\s+a\s+`ChannelConnectError`/);
    expect(readme).toMatch(/`err instanceof ChannelConnectError` holds/);
    const cls = (grpcEntry as Record<string, unknown>).ChannelConnectError as { name: string; prototype: unknown } | undefined;
    expect(typeof cls).toBe('function');
    expect(cls!.name).toBe('ChannelConnectError');
    expect(cls!.prototype).toBeInstanceOf(Error);
  });
});
