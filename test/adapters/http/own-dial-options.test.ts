/**
 * A request's own dial options are its own (found by an outside review): Node's agent files
 * requests by its `_agentKey`, which holds none of a request's `lookup`, `localPort`, `hints` or
 * `checkServerIdentity`. The guarded agents let one dial scout an unproven host for every request
 * of that key, and handed its failure to the others: request A with a `lookup` that fails, or
 * points where nothing listens, or a `localPort` in use, or (https) a `checkServerIdentity` that
 * rejects, and request B with none of them, sent together: B failed with A's ENOTFOUND,
 * ECONNREFUSED, EADDRINUSE or "certificate pin mismatch", 3 of 3 rounds. Node's own agents serve
 * B. A dial is now shared only between requests whose own dial options are the same.
 */
import type http from 'node:http';
import nodeHttp from 'node:http';
import nodeHttps from 'node:https';
import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { blackhole } from '../../../src/testing/blackhole.js';
import { TEST_CERT } from '../../../src/testing/test-cert.js';
import { type CountingServer, countingServer, get, guardedHttp, guardedHttps, leakChecked, plain } from './helpers.js';

const cleanups = leakChecked();

type Own = (server: CountingServer) => http.RequestOptions & { checkServerIdentity?: unknown };

const failingLookup = ((host: string, _opts: unknown, cb: (err: Error) => void) => {
  setTimeout(() => cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })), 20);
}) as unknown as net.LookupFunction;

/** Answers with 127.0.0.2, where nothing listens on the server's port. */
const elsewhereLookup = ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
  if (opts?.all === true) cb(null, [{ address: '127.0.0.2', family: 4 }]);
  else cb(null, '127.0.0.2', 4);
}) as unknown as net.LookupFunction;

const plainCases: Array<[string, Own]> = [
  ['a lookup that fails (ENOTFOUND)', () => ({ lookup: failingLookup })],
  ['a lookup to an address where nothing listens', () => ({ lookup: elsewhereLookup })],
  ['a localPort in use (EADDRINUSE)', (server) => ({ localPort: server.port })],
];

// (A check that throws is not here: Node's own TLS socket lets that throw escape as an uncaught
// exception, with or without an agent.)
const tlsCases: Array<[string, Own]> = [
  ['a checkServerIdentity that rejects (a pin)', () => ({ checkServerIdentity: () => new Error('certificate pin mismatch') })],
  ...plainCases,
];

/** A (with its own option) and B (with none) sent together, three rounds, every socket dropped between them. */
async function rounds(agent: http.Agent, url: string, own: http.RequestOptions): Promise<string[]> {
  const out: string[] = [];
  for (let round = 0; round < 3; round++) {
    const settle = (p: Promise<string>): Promise<string> => p.then(
      (body) => body,
      (e: NodeJS.ErrnoException) => `error ${e.code ?? e.message}`,
    );
    const [a, b] = await Promise.all([settle(get(url, agent, own)), settle(get(url, agent))]);
    out.push(`A ${a.startsWith('error') ? 'failed' : a} / B ${b}`);
    agent.destroy(); // every round dials afresh
  }
  return out;
}

describe("the guarded agents: one request's own dial options never fail another's request", () => {
  it.each(plainCases)('GuardedHttpAgent, A with %s: B is served every round, as with http.Agent', async (_name, own) => {
    const server = await countingServer();
    cleanups.push(() => server.close());
    const url = `http://localhost:${server.port}/`;
    const expected = Array(3).fill('A failed / B ok');
    expect(await rounds(plain(new nodeHttp.Agent()), url, own(server))).toEqual(expected);
    expect(await rounds(guardedHttp(), url, own(server))).toEqual(expected);
  });

  it.each(tlsCases)('GuardedHttpsAgent, A with %s: B is served every round, as with https.Agent', async (_name, own) => {
    const server = await countingServer({ tls: true });
    cleanups.push(() => server.close());
    const url = `https://localhost:${server.port}/`;
    const expected = Array(3).fill('A failed / B ok');
    // No TLS session cache: Node skips checkServerIdentity on a resumed session.
    expect(await rounds(plain(new nodeHttps.Agent({ ca: TEST_CERT, maxCachedSessions: 0 })), url, own(server) as http.RequestOptions)).toEqual(expected);
    expect(await rounds(guardedHttps({ maxCachedSessions: 0 }), url, own(server) as http.RequestOptions)).toEqual(expected);
  });
});

describe('the guarded agents: options that cannot shape a dial do not split the scout', () => {
  it('to an address, requests each with its own lookup (as a client wrapping a lookup per request gives) still wait for one scout: one SYN to a blackhole, not five', async () => {
    const hole = await blackhole();
    cleanups.push(() => hole.close());
    const agent = guardedHttp({ connectTimeout: 300 });
    const lookup = (): net.LookupFunction => ((_h: string, _o: unknown, cb: (...args: unknown[]) => void) => cb(null, '127.0.0.1', 4)) as unknown as net.LookupFunction;
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => get(`http://127.0.0.1:${hole.port}/`, agent, { lookup: lookup() }).then(
        () => 'served',
        (e: NodeJS.ErrnoException) => e.code,
      )),
    );
    expect(outcomes).toHaveLength(5);
    expect(outcomes.every((o) => o !== 'served')).toBe(true);
    expect(hole.attempts).toBe(1);
  });
});
