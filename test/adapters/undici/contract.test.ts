/**
 * The dispatcher contract a drop-in for undici's `Agent` must keep (issue 18), written by us and
 * checked side by side: every clause runs, with the very same assertions, against undici's own
 * `Agent` and against `GuardedAgent` (retries on, as by default). A clause that held for the
 * Agent and fails for GuardedAgent is a contract break; one that fails for both is a wrong test.
 *
 * The clauses: handler callback order (undici's legacy handler and its controller API), upgrade
 * and CONNECT, WebSocket limits taken from the dispatcher, streaming request and response bodies under backpressure, abort and destroy,
 * trailers, the `'connect'`/`'disconnect'`/`'drain'` events, and the errors' codes. Where a
 * server's count matters (requests, connections, bytes read) it is counted at the server.
 * Loopback servers only.
 */
import { createHash } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { Readable, Writable } from 'node:stream';
import { Agent, type Dispatcher, FormData, WebSocket, connect, errors, request, stream, upgrade } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent } from '../../../src/adapters/undici/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { refusing } from '../../../src/testing/tcp-peers.js';
import { leakCheckEach } from '../../helpers/leaks.js';

const cleanup = leakCheckEach();

// ---------------------------------------------------------------------------------------------
// The two dispatchers under the same contract.

interface Subject {
  name: string;
  /** A fresh dispatcher with these undici Agent options; destroyed after the test. */
  make(options?: Agent.Options): Agent;
}

function tracked<A extends Agent>(agent: A): A {
  cleanup.push(() => agent.destroy());
  return agent;
}

const subjects: Subject[] = [
  { name: "undici's Agent", make: (options = {}) => tracked(new Agent(options)) },
  {
    name: 'GuardedAgent',
    // Retries on (the default), with a private breaker and no backoff or budget so that no test
    // shares state with another or waits.
    make: (options = {}) =>
      tracked(new GuardedAgent({ connectTimeout: 2_000, breaker: new HostBreaker(), budget: null, backoff: () => 0, undici: options })),
  },
];

// ---------------------------------------------------------------------------------------------
// Loopback servers.

interface Server {
  origin: string;
  port: number;
  http: http.Server;
  /** Requests received (headers complete). */
  requests: number;
  /** TCP connections accepted. */
  connections: number;
  /** Connections open now. */
  readonly sockets: Set<net.Socket>;
}

/** A `node:http` server on 127.0.0.1, counting, closed (every socket destroyed) after the test. */
async function server(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Server> {
  const sockets = new Set<net.Socket>();
  const s: Server = { origin: '', port: 0, http: http.createServer({ keepAliveTimeout: 5_000 }), requests: 0, connections: 0, sockets };
  s.http.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    s.requests++;
    handler(req, res);
  });
  s.http.on('connection', (socket: net.Socket) => {
    s.connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => s.http.listen({ host: '127.0.0.1', port: 0 }, () => resolve()));
  s.port = (s.http.address() as net.AddressInfo).port;
  s.origin = `http://127.0.0.1:${s.port}`;
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        s.http.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  );
  return s;
}

/** Answers `ok` once the request body is read. */
const ok = (req: http.IncomingMessage, res: http.ServerResponse): void => {
  req.resume();
  req.on('end', () => res.end('ok'));
};

/** Answers each request only when `release()` is called. */
function holding(): { handler: (req: http.IncomingMessage, res: http.ServerResponse) => void; release: () => void } {
  const waiting: http.ServerResponse[] = [];
  let released = false;
  return {
    handler: (req, res) => {
      req.resume();
      if (released) res.end('ok');
      else waiting.push(res);
    },
    release: () => {
      released = true;
      for (const res of waiting.splice(0)) res.end('ok');
    },
  };
}

/** Waits until `read()` has not changed for `quietMs` (bounded by `maxMs`), returns its value. */
async function settled(read: () => number, quietMs = 150, maxMs = 5_000): Promise<number> {
  const until = Date.now() + maxMs;
  let last = read();
  let since = Date.now();
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    const now = read();
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) break;
  }
  return last;
}

/** What `p` rejected with; fails the test if it resolved. */
async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a rejection, the call succeeded');
}

// ---------------------------------------------------------------------------------------------
// Handlers that record their callbacks.

/** A legacy (undici 5/6 style) handler recording its callbacks in order. */
function legacyRecorder(options: { pauseFirstData?: boolean } = {}): {
  handler: Dispatcher.DispatchHandler;
  events: string[];
  done: Promise<Error | undefined>;
  abort: () => ((err?: Error) => void) | undefined;
  resume: () => (() => void) | undefined;
  trailers: () => string[] | null | undefined;
} {
  const events: string[] = [];
  let abort: ((err?: Error) => void) | undefined;
  let resume: (() => void) | undefined;
  let trailers: string[] | null | undefined;
  let paused = false;
  let settle!: (err: Error | undefined) => void;
  const done = new Promise<Error | undefined>((resolve) => (settle = resolve));
  const handler = {
    onConnect(a: (err?: Error) => void) {
      abort = a;
      events.push('onConnect');
    },
    onBodySent() {
      if (events.at(-1) !== 'onBodySent') events.push('onBodySent');
    },
    onRequestSent() {
      events.push('onRequestSent');
    },
    onResponseStarted() {
      events.push('onResponseStarted');
    },
    onHeaders(status: number, _headers: Buffer[], r: () => void) {
      resume = r;
      events.push(`onHeaders ${status}`);
      return true;
    },
    onData() {
      if (events.at(-1) !== 'onData') events.push('onData');
      if (options.pauseFirstData === true && !paused) {
        paused = true;
        events.push('paused');
        return false;
      }
      return true;
    },
    onComplete(t: string[] | null) {
      trailers = t;
      events.push('onComplete');
      settle(undefined);
    },
    onError(err: Error) {
      events.push('onError');
      settle(err);
    },
  };
  return { handler: handler as unknown as Dispatcher.DispatchHandler, events, done, abort: () => abort, resume: () => resume, trailers: () => trailers };
}

/** A controller-API (undici 7) handler recording its callbacks in order. */
function controllerRecorder(): {
  handler: Dispatcher.DispatchHandler;
  events: string[];
  done: Promise<Error | undefined>;
  trailers: () => Record<string, string | string[] | undefined> | undefined;
  body: () => string;
} {
  const events: string[] = [];
  const chunks: Buffer[] = [];
  let trailers: Record<string, string | string[] | undefined> | undefined;
  let settle!: (err: Error | undefined) => void;
  const done = new Promise<Error | undefined>((resolve) => (settle = resolve));
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart() {
      events.push('onRequestStart');
    },
    onResponseStart(_controller, status) {
      events.push(`onResponseStart ${status}`);
    },
    onResponseData(_controller, chunk) {
      chunks.push(chunk);
      if (events.at(-1) !== 'onResponseData') events.push('onResponseData');
    },
    onResponseEnd(_controller, t) {
      trailers = t as Record<string, string | string[] | undefined>;
      events.push('onResponseEnd');
      settle(undefined);
    },
    onResponseError(_controller, err) {
      events.push('onResponseError');
      settle(err);
    },
  };
  return { handler, events, done, trailers: () => trailers, body: () => Buffer.concat(chunks).toString() };
}

// ---------------------------------------------------------------------------------------------
// The contract.

for (const subject of subjects) {
  describe(`undici dispatcher contract: ${subject.name}`, () => {
    describe('handler callback order', () => {
      it('legacy handler, GET: onConnect, onRequestSent, onResponseStarted, onHeaders, onData, onComplete', async () => {
        const s = await server(ok);
        const agent = subject.make();
        const r = legacyRecorder();
        agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, r.handler);
        expect(await r.done).toBeUndefined();
        expect(r.events).toEqual(['onConnect', 'onRequestSent', 'onResponseStarted', 'onHeaders 200', 'onData', 'onComplete']);
      });

      it('legacy handler, POST with a body: upload progress before the response', async () => {
        const s = await server(ok);
        const agent = subject.make();
        const r = legacyRecorder();
        agent.dispatch({ origin: s.origin, path: '/', method: 'POST', body: 'hello' }, r.handler);
        expect(await r.done).toBeUndefined();
        expect(r.events).toEqual(['onConnect', 'onBodySent', 'onRequestSent', 'onResponseStarted', 'onHeaders 200', 'onData', 'onComplete']);
      });

      it('controller handler: onRequestStart, onResponseStart, onResponseData, onResponseEnd', async () => {
        const s = await server(ok);
        const agent = subject.make();
        const r = controllerRecorder();
        agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, r.handler);
        expect(await r.done).toBeUndefined();
        expect(r.events).toEqual(['onRequestStart', 'onResponseStart 200', 'onResponseData', 'onResponseEnd']);
        expect(r.body()).toBe('ok');
      });

      it('a failure: one onError and nothing after it (retries stay inside the call)', async () => {
        // Two refusing peers: a GuardedAgent's breaker may refuse a host that refused it thrice.
        const peers = [await refusing(), await refusing()];
        for (const peer of peers) cleanup.push(() => peer.close());
        const agent = subject.make();
        const legacy = legacyRecorder();
        agent.dispatch({ origin: `http://127.0.0.1:${peers[0]!.port}`, path: '/', method: 'GET' }, legacy.handler);
        expect((await legacy.done) as Error & { code?: string }).toMatchObject({ code: 'ECONNREFUSED' });
        const controller = controllerRecorder();
        agent.dispatch({ origin: `http://127.0.0.1:${peers[1]!.port}`, path: '/', method: 'GET' }, controller.handler);
        expect((await controller.done) as Error & { code?: string }).toMatchObject({ code: 'ECONNREFUSED' });
        await new Promise((resolve) => setTimeout(resolve, 50)); // anything late would land here
        // undici calls onConnect when it writes the request, so never for a refused dial; a
        // GuardedAgent calls it once per call (a documented difference: README, Compatibility).
        expect(legacy.events.filter((e) => e !== 'onConnect')).toEqual(['onError']);
        expect(legacy.events.filter((e) => e === 'onConnect').length).toBeLessThanOrEqual(1);
        expect(controller.events.filter((e) => e !== 'onRequestStart')).toEqual(['onResponseError']);
        expect(controller.events.filter((e) => e === 'onRequestStart').length).toBeLessThanOrEqual(1);
      });

      it('a response is the answer: a 500 to a GET and a 503 to a POST are delivered once, never re-sent', async () => {
        // (A GuardedAgent retries 429/502/503/504 to an idempotent request: documented, README.)
        let n = 0;
        const s = await server((req, res) => {
          req.resume();
          res.statusCode = n++ === 0 ? 500 : 503;
          res.end('no');
        });
        const agent = subject.make();
        const get = await request(`${s.origin}/`, { dispatcher: agent });
        expect([get.statusCode, await get.body.text()]).toEqual([500, 'no']);
        const post = await request(`${s.origin}/`, { dispatcher: agent, method: 'POST', body: 'x' });
        expect([post.statusCode, await post.body.text()]).toEqual([503, 'no']);
        expect(s.requests).toBe(2);
      });
    });

    describe('upgrade and CONNECT', () => {
      it('upgrade: 101 hands over the socket, bytes flow both ways, one upgrade request at the server', async () => {
        const s = await server(ok);
        let upgrades = 0;
        s.http.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
          upgrades++;
          socket.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: ${req.headers.upgrade}\r\n\r\n`);
          socket.on('data', (d: Buffer) => socket.write(`echo:${d}`));
          socket.on('end', () => socket.end());
        });
        const agent = subject.make();
        const { headers, socket } = await upgrade(`${s.origin}/`, { dispatcher: agent, protocol: 'dialguard-test' });
        expect(headers.upgrade).toBe('dialguard-test');
        socket.write('ping');
        const [reply] = (await once(socket, 'data')) as [Buffer];
        expect(String(reply)).toBe('echo:ping');
        socket.end();
        await once(socket, 'close');
        expect(upgrades).toBe(1);
      });

      it('CONNECT: a tunnel to the server, bytes flow both ways, one CONNECT at the server', async () => {
        const s = await server(ok);
        let tunnels = 0;
        s.http.on('connect', (_req: http.IncomingMessage, socket: net.Socket) => {
          tunnels++;
          socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
          socket.on('data', (d: Buffer) => socket.write(`echo:${d}`));
          socket.on('end', () => socket.end());
        });
        const agent = subject.make();
        const { statusCode, socket } = await connect(`${s.origin}/`, { dispatcher: agent });
        expect(statusCode).toBe(200);
        socket.write('ping');
        const [reply] = (await once(socket, 'data')) as [Buffer];
        expect(String(reply)).toBe('echo:ping');
        socket.end();
        await once(socket, 'close');
        expect(tunnels).toBe(1);
      });
    });

    describe('WebSocket', () => {
      it("undici's WebSocket takes its limits from the dispatcher: 64 KiB refused at maxPayloadSize 1024, delivered without", async () => {
        const s = await server(ok);
        s.http.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
          socket.on('data', () => socket.destroy()); // the client's close frame: hang up
          const accept = createHash('sha1').update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
          socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
          const header = Buffer.alloc(10);
          header[0] = 0x82; // FIN, binary
          header[1] = 127; // a 64-bit length follows
          header.writeBigUInt64BE(BigInt(64 * 1024), 2);
          socket.write(Buffer.concat([header, Buffer.alloc(64 * 1024, 7)]));
        });
        const messages = async (dispatcher: Dispatcher): Promise<number> => {
          const ws = new WebSocket(`ws://127.0.0.1:${s.port}/`, { dispatcher });
          let n = 0;
          ws.addEventListener('message', () => {
            n++;
            ws.close();
          });
          ws.addEventListener('error', () => {});
          await once(ws as unknown as EventEmitter, 'close');
          return n;
        };
        expect(await messages(subject.make({ webSocket: { maxPayloadSize: 1024 } }))).toBe(0);
        expect(await messages(subject.make())).toBe(1);
      });
    });

    describe('streaming bodies with backpressure', () => {
      const CHUNK = 64 * 1024;
      const TOTAL = 48 * 1024 * 1024;

      it('a request body stream is pulled only as the server reads: a paused server stops the source', async () => {
        let received = 0;
        let serverReq: http.IncomingMessage | undefined;
        const s = await server((req, res) => {
          serverReq = req;
          req.pause();
          req.on('data', (d: Buffer) => {
            received += d.length;
          });
          req.on('end', () => res.end(String(received)));
        });
        let produced = 0;
        const source = Readable.from(
          (function* () {
            while (produced < TOTAL) {
              produced += CHUNK;
              yield Buffer.alloc(CHUNK, 1);
            }
          })(),
          { objectMode: false, highWaterMark: CHUNK },
        );
        const agent = subject.make();
        const answered = request(`${s.origin}/`, { dispatcher: agent, method: 'PUT', body: source });
        await expect.poll(() => serverReq !== undefined).toBe(true);
        const whilePaused = await settled(() => produced);
        // Socket buffers hold some MiB; the whole body must not have been read ahead.
        expect(whilePaused).toBeLessThan(TOTAL / 2);
        serverReq!.resume();
        const res = await answered;
        expect(await res.body.text()).toBe(String(TOTAL));
        expect(received).toBe(TOTAL);
        expect(s.requests).toBe(1);
      });

      it('a FormData body is sent as multipart, every part at the server', async () => {
        let received = '';
        let type = '';
        const s = await server((req, res) => {
          type = String(req.headers['content-type']);
          req.on('data', (d: Buffer) => {
            received += String(d);
          });
          req.on('end', () => res.end('ok'));
        });
        const agent = subject.make();
        const form = new FormData();
        form.append('name', 'dialguard');
        form.append('file', new Blob(['file-content'], { type: 'text/plain' }), 'a.txt');
        const res = await request(`${s.origin}/`, { dispatcher: agent, method: 'POST', body: form });
        expect(await res.body.text()).toBe('ok');
        expect(type).toMatch(/^multipart\/form-data; boundary=/);
        expect(received).toContain('dialguard');
        expect(received).toContain('file-content');
        expect(s.requests).toBe(1);
      });

      it("an unread response body stops the server's writes; reading resumes them, every byte arrives", async () => {
        let written = 0;
        const s = await server(async (req, res) => {
          req.resume();
          res.writeHead(200, { 'content-length': String(TOTAL) });
          while (written < TOTAL) {
            written += CHUNK;
            if (!res.write(Buffer.alloc(CHUNK, 2))) await once(res, 'drain');
          }
          res.end();
        });
        const agent = subject.make();
        const res = await request(`${s.origin}/`, { dispatcher: agent });
        const whileUnread = await settled(() => written);
        expect(whileUnread).toBeLessThan(TOTAL / 2);
        let got = 0;
        for await (const chunk of res.body) got += (chunk as Buffer).length;
        expect(got).toBe(TOTAL);
        expect(written).toBe(TOTAL);
      });

      it("legacy handler: onData returning false pauses the response until resume()", async () => {
        let written = 0;
        const s = await server(async (req, res) => {
          req.resume();
          res.writeHead(200, { 'content-length': String(TOTAL) });
          while (written < TOTAL) {
            written += CHUNK;
            if (!res.write(Buffer.alloc(CHUNK, 2))) await once(res, 'drain');
          }
          res.end();
        });
        const agent = subject.make();
        const r = legacyRecorder({ pauseFirstData: true });
        agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, r.handler);
        await expect.poll(() => r.events.includes('paused')).toBe(true);
        expect(await settled(() => written)).toBeLessThan(TOTAL / 2);
        r.resume()!();
        expect(await r.done).toBeUndefined();
        expect(written).toBe(TOTAL);
        expect(r.events).toEqual(['onConnect', 'onRequestSent', 'onResponseStarted', 'onHeaders 200', 'onData', 'paused', 'onData', 'onComplete']);
      });
    });

    describe('abort and destroy', () => {
      it('a signal aborted before the call: rejects with its reason, the server sees nothing', async () => {
        const s = await server(ok);
        const agent = subject.make();
        const reason = new Error('caller gave up');
        const err = await rejection(request(`${s.origin}/`, { dispatcher: agent, signal: AbortSignal.abort(reason) }));
        expect(err).toBe(reason);
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(s.requests).toBe(0);
      });

      it('abort mid-response with a reason: the body fails with that reason, the server sees its connection close', async () => {
        let serverRes: http.ServerResponse | undefined;
        const s = await server((req, res) => {
          req.resume();
          serverRes = res;
          res.writeHead(200);
          res.write('first');
        });
        const agent = subject.make();
        const ac = new AbortController();
        const res = await request(`${s.origin}/`, { dispatcher: agent, signal: ac.signal });
        const reason = new Error('caller gave up');
        const reading = rejection(res.body.text());
        ac.abort(reason);
        expect(await reading).toBe(reason);
        await expect.poll(() => serverRes?.destroyed ?? serverRes?.socket?.destroyed).toBe(true);
        await expect.poll(() => s.sockets.size).toBe(0);
        expect(s.requests).toBe(1);
      });

      it('an abort that names no reason: RequestAbortedError (UND_ERR_ABORTED), from a handler and an EventEmitter signal', async () => {
        const hold = holding();
        const s = await server(hold.handler);
        const agent = subject.make();
        const r = legacyRecorder();
        agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, r.handler);
        await expect.poll(() => s.requests).toBe(1);
        r.abort()!();
        expect(await r.done).toBeInstanceOf(errors.RequestAbortedError);
        const ee = new EventEmitter();
        const streamed = stream(`${s.origin}/`, { dispatcher: agent, signal: ee, method: 'GET' }, () => new Writable({ write: (_c, _e, cb) => cb() }));
        await expect.poll(() => s.requests).toBe(2);
        ee.emit('abort');
        expect(await rejection(streamed)).toMatchObject({ code: 'UND_ERR_ABORTED' });
        hold.release();
        expect(s.requests).toBe(2);
      });

      it('close(): calls in flight finish, then a new call fails with ClientDestroyedError; the callback form calls back', async () => {
        const hold = holding();
        const s = await server(hold.handler);
        const agent = subject.make();
        const inFlight = request(`${s.origin}/`, { dispatcher: agent });
        await expect.poll(() => s.requests).toBe(1);
        let closed = false;
        const closing = agent.close().then(() => {
          closed = true;
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(closed).toBe(false);
        hold.release();
        const res = await inFlight;
        expect(await res.body.text()).toBe('ok');
        await closing;
        // undici's Agent answers a call after close() as destroyed (UND_ERR_DESTROYED).
        expect(await rejection(request(`${s.origin}/`, { dispatcher: agent }))).toBeInstanceOf(errors.ClientDestroyedError);
        await new Promise<void>((resolve) => agent.close(() => resolve()));
        expect(s.requests).toBe(1);
      });

      it('destroy(err): calls in flight fail with err at once; later calls fail with ClientDestroyedError', async () => {
        const hold = holding();
        const s = await server(hold.handler);
        const agent = subject.make();
        const inFlight = rejection(request(`${s.origin}/`, { dispatcher: agent }));
        await expect.poll(() => s.requests).toBe(1);
        const cause = new Error('shutting down');
        await new Promise<void>((resolve) => agent.destroy(cause, () => resolve()));
        expect(await inFlight).toBe(cause);
        expect(await rejection(request(`${s.origin}/`, { dispatcher: agent }))).toBeInstanceOf(errors.ClientDestroyedError);
        await expect.poll(() => s.sockets.size).toBe(0);
        hold.release();
        expect(s.requests).toBe(1);
      });

      it('compose(): the composed dispatcher serves, then closes; another destroys; the agent under it is closed too', async () => {
        const s = await server(ok);
        for (const end of ['close', 'destroy'] as const) {
          const agent = subject.make();
          let through = 0;
          const composed = agent.compose((dispatch) => (opts, handler) => {
            through++;
            return dispatch(opts, handler);
          });
          expect(await (await request(`${s.origin}/`, { dispatcher: composed })).body.text()).toBe('ok');
          await composed[end]();
          expect(through).toBe(1);
          expect(await rejection(request(`${s.origin}/`, { dispatcher: agent }))).toMatchObject({ code: 'UND_ERR_DESTROYED' });
        }
        expect(s.requests).toBe(2);
      });

      it('close() and destroy() refuse a callback that is not a function: InvalidArgumentError', async () => {
        const agent = subject.make();
        expect(() => agent.close({} as never)).toThrow(errors.InvalidArgumentError);
        expect(() => agent.destroy(new Error('x'), {} as never)).toThrow(errors.InvalidArgumentError);
      });

      it('destroy() without an error: calls in flight fail with ClientDestroyedError (UND_ERR_DESTROYED)', async () => {
        const hold = holding();
        const s = await server(hold.handler);
        const agent = subject.make();
        const inFlight = rejection(request(`${s.origin}/`, { dispatcher: agent }));
        await expect.poll(() => s.requests).toBe(1);
        await agent.destroy();
        expect(await inFlight).toMatchObject({ code: 'UND_ERR_DESTROYED' });
        hold.release();
        expect(s.requests).toBe(1);
      });
    });

    describe('trailers', () => {
      const withTrailers = (req: http.IncomingMessage, res: http.ServerResponse): void => {
        req.resume();
        res.writeHead(200, { trailer: 'x-checksum' });
        res.write('body');
        res.addTrailers({ 'x-checksum': 'abc123' });
        res.end();
      };

      it('request(): trailers filled in once the body has ended', async () => {
        const s = await server(withTrailers);
        const agent = subject.make();
        const res = await request(`${s.origin}/`, { dispatcher: agent });
        expect(await res.body.text()).toBe('body');
        expect(res.trailers).toEqual({ 'x-checksum': 'abc123' });
      });

      it('legacy onComplete gets the raw trailers; the controller API onResponseEnd gets them parsed', async () => {
        const s = await server(withTrailers);
        const agent = subject.make();
        const legacy = legacyRecorder();
        agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, legacy.handler);
        expect(await legacy.done).toBeUndefined();
        expect((legacy.trailers() ?? []).map(String)).toEqual(['x-checksum', 'abc123']);
        const controller = controllerRecorder();
        agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, controller.handler);
        expect(await controller.done).toBeUndefined();
        expect(controller.trailers()).toEqual({ 'x-checksum': 'abc123' });
      });
    });

    describe('events', () => {
      it("'connect' and 'disconnect' once per connection, naming the origin and the agent as targets[0]", async () => {
        const s = await server(ok);
        const agent = subject.make();
        const seen: Array<[string, string, unknown]> = [];
        agent.on('connect', (origin, targets) => seen.push(['connect', String(origin), targets[0]]));
        agent.on('disconnect', (origin, targets) => seen.push(['disconnect', String(origin), targets[0]]));
        for (let i = 0; i < 3; i++) await (await request(`${s.origin}/`, { dispatcher: agent })).body.text();
        await agent.close();
        const origin = new URL(s.origin).origin;
        const n = s.connections;
        expect(n).toBeGreaterThan(0);
        expect(seen.filter(([e]) => e === 'connect')).toHaveLength(n);
        expect(seen.filter(([e]) => e === 'disconnect')).toHaveLength(n);
        expect(seen.every(([, o, t]) => new URL(o).origin === origin && t === agent)).toBe(true);
      });

      it("a connection the server closes: 'disconnect' carries the error, the next call connects again", async () => {
        const s = await server((req, res) => {
          req.resume();
          res.setHeader('connection', 'close');
          res.end('ok');
        });
        const agent = subject.make();
        const disconnects: Array<Error & { code?: string }> = [];
        agent.on('disconnect', (_origin, _targets, err) => disconnects.push(err));
        await (await request(`${s.origin}/`, { dispatcher: agent })).body.text();
        await expect.poll(() => disconnects.length).toBe(1);
        expect(disconnects[0]).toMatchObject({ code: 'UND_ERR_INFO' });
        await (await request(`${s.origin}/`, { dispatcher: agent })).body.text();
        expect(s.connections).toBe(2);
      });

      it("dispatch() returns false when the origin is saturated, and 'drain' follows naming the agent", async () => {
        const hold = holding();
        const s = await server(hold.handler);
        const agent = subject.make({ connections: 1, pipelining: 1 });
        const results: boolean[] = [];
        const handlers = [legacyRecorder(), legacyRecorder(), legacyRecorder()];
        for (const r of handlers) results.push(agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, r.handler));
        expect(results).toContain(false);
        const drained = once(agent, 'drain');
        hold.release();
        const [origin, targets] = (await drained) as [URL, Dispatcher[]];
        expect(new URL(String(origin)).origin).toBe(new URL(s.origin).origin);
        expect(targets[0]).toBe(agent);
        for (const r of handlers) expect(await r.done).toBeUndefined();
        expect(s.requests).toBe(3);
      });
    });

    describe("errors' codes", () => {
      it('a refused connection: ECONNREFUSED', async () => {
        const peer = await refusing();
        cleanup.push(() => peer.close());
        const agent = subject.make();
        expect(await rejection(request(`http://127.0.0.1:${peer.port}/`, { dispatcher: agent }))).toMatchObject({ code: 'ECONNREFUSED' });
      });

      it('a socket closed mid-response: SocketError (UND_ERR_SOCKET)', async () => {
        const s = await server((req, res) => {
          req.resume();
          res.writeHead(200, { 'content-length': '100' });
          res.write('partial');
          setImmediate(() => res.socket?.destroy());
        });
        const agent = subject.make();
        const err = await rejection(request(`${s.origin}/`, { dispatcher: agent, method: 'POST', body: 'x' }).then((r) => r.body.text()));
        expect(err).toBeInstanceOf(errors.SocketError);
        expect(err.code).toBe('UND_ERR_SOCKET');
        expect(s.requests).toBe(1);
      });

      it("a per-request headersTimeout: HeadersTimeoutError (UND_ERR_HEADERS_TIMEOUT); bodyTimeout: BodyTimeoutError", async () => {
        const hold = holding();
        const s = await server((req, res) => {
          if (req.url === '/body') {
            req.resume();
            res.writeHead(200);
            res.write('some');
          } else hold.handler(req, res);
        });
        const agent = subject.make();
        const headers = await rejection(request(`${s.origin}/`, { dispatcher: agent, method: 'POST', body: 'x', headersTimeout: 100 }));
        expect(headers).toMatchObject({ code: 'UND_ERR_HEADERS_TIMEOUT' });
        const res = await request(`${s.origin}/body`, { dispatcher: agent, method: 'POST', body: 'x', bodyTimeout: 100 });
        expect(await rejection(res.body.text())).toMatchObject({ code: 'UND_ERR_BODY_TIMEOUT' });
        hold.release();
      });

      it('invalid request options: InvalidArgumentError (UND_ERR_INVALID_ARG), the server sees nothing', async () => {
        const s = await server(ok);
        const agent = subject.make();
        expect(await rejection(request(`${s.origin}/`, { dispatcher: agent, method: 'G ET' }))).toMatchObject({ code: 'UND_ERR_INVALID_ARG' });
        expect(await rejection(request(`${s.origin}/`, { dispatcher: agent, headers: { 'bad header': 'x' } }))).toMatchObject({ code: 'UND_ERR_INVALID_ARG' });
        expect(() => agent.dispatch({ origin: s.origin, path: '/', method: 'GET' }, undefined as never)).toThrow(errors.InvalidArgumentError);
        expect(s.requests).toBe(0);
      });

      it('a response over maxResponseSize: ResponseExceededMaxSizeError (UND_ERR_RES_EXCEEDED_MAX_SIZE)', async () => {
        const s = await server((req, res) => {
          req.resume();
          res.end(Buffer.alloc(4096));
        });
        const agent = subject.make({ maxResponseSize: 1024 });
        const err = await rejection(request(`${s.origin}/`, { dispatcher: agent, method: 'POST', body: 'x' }).then((r) => r.body.text()));
        expect(err).toMatchObject({ code: 'UND_ERR_RES_EXCEEDED_MAX_SIZE' });
        expect(s.requests).toBe(1);
      });
    });
  });
}
