/**
 * A server whose ping policy the keep-alive breaks answers GOAWAY ENHANCE_YOUR_CALM
 * `too_many_pings` (gRFC A8; Go's and C-core's defaults do so for pings while idle, which
 * dialguard's default keep-alive sends). grpc-js doubles the connection's interval each time and
 * goes quiet; a GrpcGuard channel has a subchannel of its own and is closed when it leaves READY,
 * so before the fix every new channel pinged at the configured interval again and drew the same
 * GOAWAY (and grpc-js's ERROR log line) every few pings, for good.
 *
 * The server is a stock grpc-js server with Go's policy bolted onto its HTTP/2 sessions: a PING
 * while no stream is open, once the session has served its call, is a strike; the fourth is
 * answered GOAWAY `too_many_pings` and the connection closed (Go sends it past two strikes,
 * counting from the second idle ping).
 */
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { expect, it } from 'vitest';
import { GrpcGuard } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { eventually } from '../../helpers/eventually.js';
import { leakCheckEach } from '../../helpers/leaks.js';
import { EchoClient, call, echoService } from './helpers.js';

const cleanup = leakCheckEach();

/** Per server session: when each PING arrived (ms, Date.now()). */
type Sessions = number[][];

async function policedServer(): Promise<{ port: number; sessions: Sessions; goaways: () => number; echoes: () => number }> {
  const server = new grpc.Server();
  let echoes = 0;
  let goaways = 0;
  const unused = (_c: unknown, cb: grpc.sendUnaryData<Buffer>): void => cb({ code: grpc.status.UNIMPLEMENTED });
  server.addService(echoService, {
    Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      echoes++;
      cb(null, c.request);
    },
    Hold: unused,
    Fail: unused,
    Count: (c: grpc.ServerWritableStream<Buffer, Buffer>) => c.end(),
    Chat: (c: grpc.ServerDuplexStream<Buffer, Buffer>) => c.end(),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const sessions: Sessions = [];
  const timers = new Set<ReturnType<typeof setTimeout>>();
  for (const h2 of (server as unknown as { http2Servers: Map<http2.Http2Server, unknown> }).http2Servers.keys()) {
    h2.on('session', (session: http2.ServerHttp2Session) => {
      const pings: number[] = [];
      sessions.push(pings);
      let open = 0;
      let strikes = 0;
      let served = false;
      session.on('stream', (stream) => {
        open++;
        strikes = 0; // Go resets its strikes whenever it sends data
        stream.once('close', () => {
          open--;
          served = true;
        });
      });
      session.on('ping', () => {
        pings.push(Date.now());
        // Strikes only once the session has answered its call: on a loaded machine the call may
        // reach the server after a ping or two, and this test is about the idle pings after it.
        if (open > 0 || !served) return;
        if (++strikes <= 3) return;
        goaways++;
        session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from('too_many_pings'));
        const t = setTimeout(() => {
          timers.delete(t);
          session.destroy();
        }, 10);
        timers.add(t);
      });
    });
  }
  cleanup.push(() => {
    for (const t of timers) clearTimeout(t);
    server.forceShutdown();
  });
  return { port, sessions, goaways: () => goaways, echoes: () => echoes };
}

/** The shortest gap between two PINGs of one session, ms. */
const shortestGap = (pings: number[]): number => Math.min(...pings.slice(1).map((at, i) => at - pings[i]!));

it.each([
  ['an address', '127.0.0.1'],
  ['a name dialled per address', 'localhost'],
])('a GOAWAY too_many_pings doubles the keep-alive interval of the target\'s next channels, as grpc-js does for its own reconnects (%s)', async (_kind, host) => {
  const server = await policedServer();
  const breaker = new HostBreaker();
  const guard = new GrpcGuard({ breaker, keepAliveInterval: 100, keepAliveTimeout: 2_000, retry: false, closeTimeout: 100 });
  const client = new EchoClient(`${host}:${server.port}`, grpc.credentials.createInsecure(), guard.clientOptions());
  cleanup.push(() => guard.close());
  cleanup.push(() => client.close());
  let retired = 0;
  guard.on('retired', () => retired++);

  // Each round: one call on a fresh connection, then idle until the server sends it away.
  for (let round = 1; round <= 3; round++) {
    await call(client, 'Echo', 'x', { deadline: Date.now() + 5_000 });
    expect(server.sessions).toHaveLength(round);
    // Round n pings every 100 x 2^(n-1) ms and is sent away at its fourth idle PING.
    expect(await eventually(server.goaways, (n) => n === round, 4_000)).toBe(round);
    // The next call goes once the guard has let the channel go: started between the server's
    // GOAWAY and the client reading it, it went on the old session and failed RESOURCE_EXHAUSTED
    // (the GOAWAY's ENHANCE_YOUR_CALM), as with grpc-js alone.
    expect(await eventually(() => retired, (n) => n === round, 4_000)).toBe(round);
  }
  const [first, second, third] = server.sessions.map(shortestGap);
  // Timers fire late, never early: a gap is at least the interval the client used.
  expect(first).toBeGreaterThanOrEqual(90);
  expect(second).toBeGreaterThanOrEqual(190); // was ~100: the configured interval again
  expect(third).toBeGreaterThanOrEqual(390);
  expect(server.echoes()).toBe(3);
  expect(breaker.stats().opened).toBe(0); // a server's ping policy says nothing against the host
}, 15_000);
