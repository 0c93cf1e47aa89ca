/**
 * A socket the guarded agents hand to Node has the same hidden class as Node's agent's. The
 * connect events' first hook (connect-events.ts) redefined `socket._httpMessage` (an accessor,
 * then a data field again): each guarded socket took a hidden class of its own with a large
 * property store, ~2.4 KB more heap a keep-alive connection (an outside review, r144: axios over
 * 5 000 hosts held 23 MB more than Node's agent, and took 27 % longer). Nor is the request that
 * waited on the dial left in dictionary mode once its watch ends. Read with V8's own checks
 * (`%HaveSameMap`, `%HasFastProperties`), not a timing; plain and TLS, the raw agent in the same
 * test.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { GuardedHttpAgent, GuardedHttpsAgent } from '../../../src/adapters/http/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { TEST_CERT } from '../../../src/testing/test-cert.js';
import { countingServer, leakChecked } from './helpers.js';

const cleanups = leakChecked();

v8.setFlagsFromString('--allow-natives-syntax');
// eslint-disable-next-line @typescript-eslint/no-implied-eval -- V8's intrinsic parses only where the flag was set before
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;
// eslint-disable-next-line @typescript-eslint/no-implied-eval -- as above
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

/** One GET through `agent`; the request and the socket it rode, once the response ended. */
function socketOf(agent: http.Agent, port: number, secure: boolean): Promise<{ req: http.ClientRequest; socket: net.Socket }> {
  return new Promise((resolve, reject) => {
    const get = secure ? https.get : http.get;
    const req = get({ host: 'localhost', port, path: '/', agent, ...(secure ? { ca: TEST_CERT } : {}) }, (res) => {
      res.resume();
      res.on('end', () => resolve({ req, socket: req.socket! }));
    });
    req.on('error', reject);
  });
}

describe('guarded agents: the sockets handed to Node are shaped as the raw agent\'s', () => {
  for (const secure of [false, true]) {
    it(`${secure ? 'https' : 'http'}: fast, as the raw agent's (was: a hidden class of its own)`, async () => {
      const server = await countingServer({ tls: secure });
      const options = { keepAlive: true, breaker: new HostBreaker() };
      const guarded = secure ? new GuardedHttpsAgent(options) : new GuardedHttpAgent(options);
      const raw = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
      cleanups.push(() => {
        guarded.destroy();
        raw.destroy();
        return server.close();
      });
      const { req: rawReq, socket: rawSocket } = await socketOf(raw, server.port, secure);
      const { req: guardedReq, socket: guardedSocket } = await socketOf(guarded, server.port, secure);
      // The request that waited on the dial too (its destroy and setTimeout watched meanwhile):
      // was sent to dictionary mode when the watch ended.
      expect(hasFastProperties(rawReq)).toBe(true);
      expect(hasFastProperties(guardedReq)).toBe(true);
      expect(haveSameMap(rawReq, guardedReq)).toBe(true);
      expect(hasFastProperties(rawSocket)).toBe(true);
      expect(hasFastProperties(guardedSocket)).toBe(true);
      // The same hidden class as the raw agent's socket: nothing redefined on it, nothing added.
      expect(haveSameMap(rawSocket, guardedSocket)).toBe(true);
      expect(server.connections).toBe(2);
    });
  }
});
