/**
 * GuardedAgent as a drop-in for undici's Agent: the contract breaks undici's own suite found
 * (issue 18), each against real loopback servers through real undici (request, stream,
 * pipeline, fetch, WebSocket, dispatch). Each test names the break it pins.
 */
import { createHash } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Agent, type Dispatcher, EventSource, FormData, buildConnector, getGlobalDispatcher, setGlobalDispatcher, WebSocket, errors, fetch as undiciFetch, interceptors, pipeline, request, stream } from 'undici';
import { describe, expect, it } from 'vitest';
import { GuardedAgent, forFetch, retriesOf } from '../../../src/adapters/undici/index.js';
import { ClientCertificateRejectedError, RetriesExhaustedError } from '../../../src/core/errors.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';
import { lookupBreaker } from '../../../src/guard/addresses.js';
import { acceptAndHold, refusing } from '../../../src/testing/tcp-peers.js';
import { TEST_CERT, TEST_KEY } from '../../../src/testing/test-cert.js';
import { OTHER_CERT, OTHER_KEY } from '../../helpers/other-cert.js';
import { answer, failure, guarded, httpServer, leakChecked, manualBreaker } from './helpers.js';

leakChecked();

/** A legacy dispatch handler that records the order of its callbacks. */
function recorder(): { handler: Dispatcher.DispatchHandler & Record<string, unknown>; events: string[]; done: Promise<Error | undefined>; abort: () => ((err?: Error) => void) | undefined } {
  const events: string[] = [];
  let abort: ((err?: Error) => void) | undefined;
  let settle!: (err: Error | undefined) => void;
  const done = new Promise<Error | undefined>((resolve) => (settle = resolve));
  const handler = {
    onConnect(a: (err?: Error) => void) {
      abort = a;
      events.push('connect');
    },
    onBodySent(chunk: Buffer | string) {
      events.push(`body:${String(chunk)}`);
    },
    onRequestSent() {
      events.push('sent');
    },
    onResponseStarted() {
      events.push('started');
    },
    onHeaders(status: number) {
      events.push(`headers:${status}`);
      return true;
    },
    onData() {
      return true;
    },
    onComplete() {
      events.push('complete');
      settle(undefined);
    },
    onError(err: Error) {
      events.push('error');
      settle(err);
    },
  };
  return { handler: handler as never, events, done, abort: () => abort };
}

/** A server that takes each request and answers only when told (or never). */
async function holdingServer(): Promise<{ origin: string; release: () => void; requests: () => number; close: () => Promise<void> }> {
  const waiting: http.ServerResponse[] = [];
  let released = false;
  let requests = 0;
  const server = await httpServer((req, res) => {
    requests++;
    req.resume();
    if (released) res.end('ok');
    else waiting.push(res);
  });
  return {
    origin: server.origin,
    release: () => {
      released = true;
      for (const res of waiting.splice(0)) res.end('ok');
    },
    requests: () => requests,
    close: () => server.close(),
  };
}

describe('1. errors: the caller sees the last attempt’s own error, the retry story attached', () => {
  it('a refused origin rejects with ECONNREFUSED after 3 attempts; retriesOf() holds all 3', async () => {
    const peer = await refusing();
    const { agent } = guarded({ breaker: manualBreaker(10).breaker });
    const { error } = await failure(request(`http://${peer.address}/`, { dispatcher: agent }));
    expect(error).toMatchObject({ code: 'ECONNREFUSED' });
    const story = retriesOf(error);
    expect(story).toBeInstanceOf(RetriesExhaustedError);
    expect((story as RetriesExhaustedError).errors.map((e) => (e as { code: string }).code)).toEqual(['ECONNREFUSED', 'ECONNREFUSED', 'ECONNREFUSED']);
  });

  it('a later call the opened host refused has no retry story: not the story of the call whose dials opened it, which the refusal keeps as its cause (was: that call\'s 3 attempts; an outside review)', async () => {
    const peer = await refusing();
    const breaker = new HostBreaker({ failureThreshold: 3, minOutage: 0, openDuration: () => 60_000 });
    const { agent } = guarded({ breaker });
    const first = await failure(request(`http://${peer.address}/`, { dispatcher: agent }));
    expect(first.error).toMatchObject({ code: 'ECONNREFUSED' });
    expect(retriesOf(first.error)).toBeInstanceOf(RetriesExhaustedError);
    const refused = await failure(request(`http://${peer.address}/`, { dispatcher: agent }));
    expect(refused.error).toMatchObject({ code: 'DIALGUARD_HOST_UNAVAILABLE', cause: { code: 'ECONNREFUSED' } });
    expect(retriesOf(refused.error)).toBeUndefined();
    const fetched = await failure(fetch(`http://${peer.address}/`, { dispatcher: forFetch(agent) }));
    expect(fetched.error).toMatchObject({ name: 'TypeError', cause: { code: 'DIALGUARD_HOST_UNAVAILABLE' } });
    expect(retriesOf(fetched.error)).toBeUndefined();
  });

  it("fetch(): retriesOf() reads the story through fetch's TypeError('fetch failed') as well (was: undefined, only its cause had it)", async () => {
    const peer = await refusing();
    const { agent } = guarded({ breaker: manualBreaker(10).breaker });
    const { error } = await failure(fetch(`http://${peer.address}/`, { dispatcher: forFetch(agent) }));
    expect(error).toMatchObject({ name: 'TypeError', cause: { code: 'ECONNREFUSED' } });
    const story = retriesOf(error);
    expect(story).toBeInstanceOf(RetriesExhaustedError);
    expect((story as RetriesExhaustedError).errors).toHaveLength(3);
    expect(retriesOf(new TypeError('fetch failed', { cause: new Error('plain') }))).toBeUndefined();
  });

  it("a connect timeout is undici's ConnectTimeoutError, as with a plain Agent; dialguard's (phase, host, timeout) is its cause", async () => {
    await using peer = await acceptAndHold(); // TCP accepted, the TLS handshake never answered
    const plain = new Agent({ connect: { timeout: 150, rejectUnauthorized: false } });
    const { agent } = guarded({ breaker: manualBreaker(10).breaker, connectTimeout: 150, maxAttempts: 1, tls: { rejectUnauthorized: false } });
    try {
      for (const dispatcher of [plain, agent]) {
        const { error } = await failure(request(`https://${peer.address}/`, { dispatcher }));
        // Code written for undici matches either way (was: DIALGUARD_CONNECT_TIMEOUT, and no instanceof).
        expect(error).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT', name: 'ConnectTimeoutError' });
        expect(error).toBeInstanceOf(errors.ConnectTimeoutError);
        expect((error as Error).message).toMatch(/^Connect Timeout Error/);
        if (dispatcher === agent) expect((error as Error).cause).toMatchObject({ code: 'DIALGUARD_CONNECT_TIMEOUT', phase: 'tls', timeout: 150 });
      }
    } finally {
      await plain.close();
    }
  });

  it('a failed lookup rejects with ENOTFOUND (through the connect.lookup option)', async () => {
    let lookups = 0;
    const lookup = (host: string, _opts: unknown, callback: (err: Error) => void): void => {
      lookups++;
      callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname: host }));
    };
    const { agent } = guarded({ breaker: manualBreaker(10).breaker, undici: { connect: { lookup: lookup as never } } });
    const { error } = await failure(request('http://no-such-host.test:1/', { dispatcher: agent }));
    expect(error).toMatchObject({ code: 'ENOTFOUND' });
    expect(lookups).toBeGreaterThanOrEqual(1);
  });

  it('a socket that dies mid-request rejects with UND_ERR_SOCKET after 3 attempts the server saw', async () => {
    await using server = await httpServer((req) => req.socket.destroy());
    const { agent } = guarded({ breaker: manualBreaker(10).breaker });
    const { error } = await failure(request(`${server.origin}/`, { dispatcher: agent }));
    expect(error).toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect(server.requests).toBe(3);
    expect((retriesOf(error) as RetriesExhaustedError).errors).toHaveLength(3);
  });

  it("undici's dns interceptor still fails over to the other family on ECONNREFUSED", async () => {
    await using server = await httpServer(answer(200, 'v6'), { host: '::1' });
    const lookup = (_origin: URL, _opts: unknown, cb: (err: null, addresses: Array<{ address: string; family: number }>) => void): void =>
      cb(null, [
        { address: '127.0.0.1', family: 4 }, // nothing listens on this port on IPv4: refused
        { address: '::1', family: 6 },
      ]);
    const { agent } = guarded({ breaker: manualBreaker(10).breaker });
    const dispatcher = agent.compose(interceptors.dns({ lookup: lookup as never, dualStack: true, affinity: 4 }));
    const res = await request(`http://localhost:${server.port}/`, { dispatcher });
    expect(await res.body.text()).toBe('v6');
    expect(server.requests).toBe(1);
  });
});

/** A tiny WebSocket server: answers the handshake, then sends one binary message of `size` bytes. */
async function wsServer(size: number): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = http.createServer((_req, res) => res.end());
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('data', () => socket.destroy()); // the client's close frame: hang up
    socket.once('close', () => sockets.delete(socket));
    const accept = createHash('sha1')
      .update(`${String(req.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
      .digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const header = Buffer.alloc(10);
    header[0] = 0x82; // FIN, binary
    header[1] = 127; // 64-bit length follows
    header.writeBigUInt64BE(BigInt(size), 2);
    socket.write(Buffer.concat([header, Buffer.alloc(size, 7)]));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Opens a WebSocket through `dispatcher` and reports how many messages arrived before it closed. */
async function messagesUntilClose(url: string, dispatcher: Dispatcher): Promise<{ messages: number }> {
  const ws = new WebSocket(url, { dispatcher });
  let messages = 0;
  ws.addEventListener('message', () => {
    messages++;
    ws.close();
  });
  ws.addEventListener('error', () => {});
  await once(ws as unknown as EventEmitter, 'close');
  return { messages };
}

/** What undici's WebSocket and EventSource read from their dispatcher (DispatcherBase's getters, untyped). */
interface Limits {
  webSocketOptions: { maxPayloadSize: number; maxFragments: number };
  eventSourceOptions: { maxEventSize: number };
}

describe('2. WebSocket and EventSource limits come from the GuardedAgent', () => {
  it("a 64 KiB message is refused with maxPayloadSize 1024 (undici's WebSocket), delivered without it", async () => {
    const server = await wsServer(64 * 1024);
    try {
      const { agent: limited } = guarded({ undici: { webSocket: { maxPayloadSize: 1024 } } });
      const refused = await messagesUntilClose(server.url, limited);
      expect(refused.messages).toBe(0);
      const { agent: plain } = guarded();
      expect((await messagesUntilClose(server.url, plain)).messages).toBe(1);
    } finally {
      await server.close();
    }
  });

  it('the limit holds when the GuardedAgent is the global dispatcher (no dispatcher option)', async () => {
    const server = await wsServer(64 * 1024);
    const previous = getGlobalDispatcher();
    try {
      const { agent } = guarded({ undici: { webSocket: { maxPayloadSize: 1024 } } });
      setGlobalDispatcher(agent);
      const ws = new WebSocket(server.url);
      let messages = 0;
      ws.addEventListener('message', () => {
        messages++;
        ws.close();
      });
      ws.addEventListener('error', () => {});
      await once(ws as unknown as EventEmitter, 'close');
      expect(messages).toBe(0);
    } finally {
      setGlobalDispatcher(previous);
      await server.close();
    }
  });

  it("undici's EventSource: an event over maxEventSize is refused (error first, no message)", async () => {
    const sse = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${'x'.repeat(8 * 1024)}\n\n`);
    });
    await new Promise<void>((resolve) => sse.listen(0, '127.0.0.1', () => resolve()));
    const { port } = sse.address() as net.AddressInfo;
    try {
      const first = async (dispatcher: Dispatcher): Promise<string> => {
        const source = new EventSource(`http://127.0.0.1:${port}/`, { dispatcher });
        try {
          return await new Promise<string>((resolve) => {
            source.addEventListener('message', () => resolve('message'));
            source.addEventListener('error', () => resolve('error'));
          });
        } finally {
          source.close();
        }
      };
      const { agent: limited } = guarded({ undici: { eventSource: { maxEventSize: 1024 } } });
      expect(await first(limited)).toBe('error');
      const { agent: plain } = guarded();
      expect(await first(plain)).toBe('message');
    } finally {
      sse.closeAllConnections();
      await new Promise<void>((resolve) => sse.close(() => resolve()));
    }
  });

  it("undici's defaults hold (128 MiB, 131 072 fragments), and eventSource options are kept", () => {
    const { agent } = guarded({ undici: { eventSource: { maxEventSize: 4096 } } });
    expect((agent as unknown as Limits).webSocketOptions).toEqual({ maxPayloadSize: 128 * 1024 * 1024, maxFragments: 131_072 });
    expect((agent as unknown as Limits).eventSourceOptions).toEqual({ maxEventSize: 4096 });
  });
});

describe('3. FormData request bodies', () => {
  it('request() and fetch() send a FormData as multipart', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded();
    const form = new FormData();
    form.append('field', 'value-1');
    const res = await request(`${server.origin}/`, { dispatcher: agent, method: 'POST', body: form });
    expect(await res.body.text()).toBe('ok');
    const viaFetch = await undiciFetch(`${server.origin}/`, { dispatcher: agent, method: 'POST', body: form });
    expect(await viaFetch.text()).toBe('ok');
    expect(server.bodies).toHaveLength(2);
    for (const body of server.bodies) expect(body).toMatch(/name="field"\r\n\r\nvalue-1\r\n/);
  });
});

describe('4. a composed GuardedAgent', () => {
  it('serves, then closes; another one destroys', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const passThrough: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => dispatch(opts, handler);
    const { agent: a } = guarded();
    const composed = a.compose(passThrough);
    expect(await (await request(`${server.origin}/`, { dispatcher: composed })).body.text()).toBe('ok');
    await composed.close();
    expect(a.closed).toBe(true);
    const { agent: b } = guarded();
    await b.compose(passThrough).destroy();
    expect(b.destroyed).toBe(true);
  });
});

describe('5. an abort that names no reason is RequestAbortedError', () => {
  it("a handler's abort(), and EventEmitter signals on stream() and pipeline()", async () => {
    const server = await holdingServer();
    try {
      const { agent } = guarded();
      const r = recorder();
      agent.dispatch({ origin: server.origin, path: '/', method: 'GET' }, r.handler);
      await expect.poll(() => server.requests()).toBe(1);
      r.abort()!();
      expect(await r.done).toBeInstanceOf(errors.RequestAbortedError);

      const ee1 = new EventEmitter();
      const streamed = stream(`${server.origin}/`, { dispatcher: agent, signal: ee1, method: 'GET' }, () => new Writable({ write: (_c, _e, cb) => cb() }));
      await expect.poll(() => server.requests()).toBe(2);
      ee1.emit('abort');
      await expect(streamed).rejects.toBeInstanceOf(errors.RequestAbortedError);

      const ee2 = new EventEmitter();
      const duplex = pipeline(`${server.origin}/`, { dispatcher: agent, signal: ee2, method: 'GET' }, ({ body }) => body);
      duplex.resume();
      duplex.end();
      const failed = once(duplex, 'error');
      await expect.poll(() => server.requests()).toBe(3);
      ee2.emit('abort');
      expect((await failed)[0]).toBeInstanceOf(errors.RequestAbortedError);
    } finally {
      server.release();
      await server.close();
    }
  });
});

describe('6. backpressure', () => {
  it("dispatch() returns false when saturated, as undici's Agent does, and 'drain' follows", async () => {
    const server = await holdingServer();
    const raw = new Agent({ connections: 1, pipelining: 1 });
    try {
      const { agent } = guarded({ undici: { connections: 1, pipelining: 1 } });
      const answers = async (dispatcher: Dispatcher): Promise<boolean[]> => {
        const results: boolean[] = [];
        const handlers = [recorder(), recorder(), recorder()];
        for (const r of handlers) results.push(dispatcher.dispatch({ origin: server.origin, path: '/', method: 'GET' }, r.handler));
        return results;
      };
      const rawAnswers = await answers(raw);
      const drained = once(agent, 'drain');
      const guardedAnswers = await answers(agent);
      expect(rawAnswers).toContain(false);
      expect(guardedAnswers).toEqual(rawAnswers);
      server.release();
      const [origin, targets] = (await drained) as [URL, Dispatcher[]];
      expect(String(origin)).toContain(new URL(server.origin).host);
      expect(targets[0]).toBe(agent);
    } finally {
      server.release();
      await raw.destroy();
      await server.close();
    }
  });
});

describe('7. connection events', () => {
  it("'connect' and 'disconnect' name the GuardedAgent as targets[0]", async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded();
    const seen: Array<[string, unknown]> = [];
    agent.on('connect', (_origin, targets) => seen.push(['connect', targets[0]]));
    agent.on('disconnect', (_origin, targets) => seen.push(['disconnect', targets[0]]));
    await (await request(`${server.origin}/`, { dispatcher: agent })).body.text();
    await agent.close();
    expect(seen).toEqual([
      ['connect', agent],
      ['disconnect', agent],
    ]);
  });
});

describe('8. onResponseStarted behind compose()', () => {
  it('reaches the handler once, before the headers; fetch reports a responseStart', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded();
    const composed = agent.compose((dispatch) => (opts, handler) => dispatch(opts, handler));
    const r = recorder();
    composed.dispatch({ origin: server.origin, path: '/', method: 'GET' }, r.handler);
    await r.done;
    expect(r.events.filter((e) => e === 'started' || e.startsWith('headers'))).toEqual(['started', 'headers:200']);
    const url = `${server.origin}/timed`;
    await (await undiciFetch(url, { dispatcher: composed })).text();
    await expect.poll(() => performance.getEntriesByName(url).length).toBeGreaterThan(0);
    const entry = performance.getEntriesByName(url)[0] as unknown as { responseStart: number };
    expect(entry.responseStart).toBeGreaterThan(0);
    performance.clearResourceTimings();
  });
});

describe('9. upload progress', () => {
  it('onBodySent and onRequestSent come after onConnect and before the headers', async () => {
    await using server = await httpServer(answer(200, 'ok'));
    const { agent } = guarded();
    const r = recorder();
    agent.dispatch({ origin: server.origin, path: '/', method: 'POST', body: 'hello' }, r.handler);
    expect(await r.done).toBeUndefined();
    expect(r.events.filter((e) => e !== 'started')).toEqual(['connect', 'body:hello', 'sent', 'headers:200', 'complete']);
  });
});

describe('10. invalid arguments', () => {
  it('a missing handler throws InvalidArgumentError', () => {
    const { agent } = guarded();
    expect(() => agent.dispatch({ origin: 'http://127.0.0.1:1', path: '/', method: 'GET' }, undefined as never)).toThrow(errors.InvalidArgumentError);
  });

  it("a handler without undici's methods is refused as undici's Request refuses it", () => {
    const { agent } = guarded();
    const opts = { origin: 'http://127.0.0.1:1', path: '/', method: 'GET' };
    const errs: Error[] = [];
    agent.dispatch(opts, { onError: (e: Error) => errs.push(e) } as never);
    expect(errs).toHaveLength(1); // at once, inside dispatch()
    expect(errs[0]).toBeInstanceOf(errors.InvalidArgumentError);
    expect(errs[0]!.message).toBe('invalid onConnect method');
    expect(() => agent.dispatch(opts, { onConnect() {} } as never)).toThrow('invalid onError method');
  });

  it('bad options: onError alone, synchronously; an onError that rethrows throws out of dispatch(); request() rejects', async () => {
    const { agent } = guarded();
    const bad = { origin: 'http://127.0.0.1:1', path: 'no-slash', method: 'GET' };
    const r = recorder();
    agent.dispatch(bad, r.handler);
    expect(r.events).toEqual(['error']); // no onConnect, and already there
    expect(await r.done).toBeInstanceOf(errors.InvalidArgumentError);
    const rethrowing = { ...r.handler, onError: (err: Error) => { throw err; } };
    expect(() => agent.dispatch(bad, rethrowing as never)).toThrow(errors.InvalidArgumentError);
    await expect(request('http://127.0.0.1:1/', { dispatcher: agent, method: 'G ET' })).rejects.toBeInstanceOf(errors.InvalidArgumentError);
  });
});

describe('close() while a call is between attempts', () => {
  it('the retry is not made, and the caller sees its last attempt’s error, not the closed agent', async () => {
    await using server = await httpServer((req) => req.socket.destroy());
    const { agent } = guarded({ breaker: manualBreaker(10).breaker, backoff: () => 50 });
    const call = failure(request(`${server.origin}/`, { dispatcher: agent }));
    await expect.poll(() => server.requests).toBe(1);
    const closing = agent.close();
    expect((await call).error).toMatchObject({ code: 'UND_ERR_SOCKET' });
    await closing;
    expect(server.requests).toBe(1);
  });
});

describe('11. close() and destroy() callbacks', () => {
  it('a callback that is not a function is refused with InvalidArgumentError', () => {
    const { agent } = guarded();
    expect(() => agent.close({} as never)).toThrow(errors.InvalidArgumentError);
    expect(() => agent.destroy(null, {} as never)).toThrow(errors.InvalidArgumentError);
  });
});

describe('a server that wants a client certificate the client lacks (TLS 1.3: its alert comes after the client’s handshake)', () => {
  it('the request fails once with the alert as its cause, one dial, never retried nor counted against the host', async () => {
    let connections = 0;
    const server = https.createServer({ key: TEST_KEY, cert: TEST_CERT, ca: TEST_CERT, requestCert: true, rejectUnauthorized: true }, (_req, res) => res.end('ok'));
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const origin = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
      const { agent, breaker } = guarded({ undici: { connect: { ca: TEST_CERT } } });
      const { error } = await failure(request(`${origin}/`, { dispatcher: agent }));
      // undici reports a bare "other side closed"; was: a dead connection under a GET, sent twice more.
      expect(error).toMatchObject({ code: 'UND_ERR_SOCKET', cause: { code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' } });
      expect(connections).toBe(1);
      expect(breaker.stats()).toMatchObject({ failed: 0, succeeded: 1 });
      const { agent: withCert } = guarded({ breaker, undici: { connect: { ca: TEST_CERT, key: TEST_KEY, cert: TEST_CERT } } });
      expect(await (await request(`${origin}/`, { dispatcher: withCert })).body.text()).toBe('ok');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('a server that rejects the client certificate it asked for (TLS 1.3: Node hangs up after the handshake, no alert)', () => {
  // Over HTTP/1.1 no byte is due before the response, so that hang-up reads as a server dying
  // under the request (a handler crash looks the same: an outside review saw a good certificate
  // labelled rejected when undici did tell them apart, and reverted it). What must hold: the host
  // is never counted, and the right client is served.
  it('the host is never counted against, and a client with the right certificate is served; a good certificate whose server hangs up is not labelled a rejection', async () => {
    let connections = 0;
    const server = https.createServer({ key: TEST_KEY, cert: TEST_CERT, ca: TEST_CERT, requestCert: true, rejectUnauthorized: true }, (req, res) => {
      if (req.url === '/crash') req.socket.destroy();
      else res.end('ok');
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    try {
      const origin = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
      const { agent, breaker } = guarded({ undici: { connect: { ca: TEST_CERT, key: OTHER_KEY, cert: OTHER_CERT } } });
      for (let i = 0; i < 3; i++) expect((await failure(request(`${origin}/`, { dispatcher: agent }))).error).toMatchObject({ code: 'UND_ERR_SOCKET' });
      expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0 });
      const { agent: withCert } = guarded({ breaker, maxAttempts: 1, undici: { connect: { ca: TEST_CERT, key: TEST_KEY, cert: TEST_CERT } } });
      expect(await (await request(`${origin}/`, { dispatcher: withCert })).body.text()).toBe('ok');
      const { agent: fresh } = guarded({ breaker, maxAttempts: 1, undici: { connect: { ca: TEST_CERT, key: TEST_KEY, cert: TEST_CERT } } });
      const { error } = await failure(request(`${origin}/crash`, { dispatcher: fresh })); // its connection's first request
      expect(error).toMatchObject({ code: 'UND_ERR_SOCKET' });
      expect((error as { cause?: unknown }).cause).not.toBeInstanceOf(ClientCertificateRejectedError);
      expect(breaker.stats()).toMatchObject({ failed: 0, refused: 0 });
      expect(connections).toBeGreaterThanOrEqual(5);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe("undici's connect options are honoured", () => {
  it('connect.lookup resolves the host; undici.connectTimeout: 0 and connectTimeout: 0 mean no limit', async () => {
    await using server = await httpServer(answer(200, 'looked up'));
    const names: string[] = [];
    const lookup = (host: string, opts: { all?: boolean }, callback: (...a: unknown[]) => void): void => {
      names.push(host);
      if (opts.all === true) callback(null, [{ address: '127.0.0.1', family: 4 }]);
      else callback(null, '127.0.0.1', 4);
    };
    const { agent, breaker } = guarded({ connectTimeout: 0, undici: { connectTimeout: 0, connect: { lookup: lookup as never, timeout: 0 } } });
    const res = await request(`http://service.test:${server.port}/`, { dispatcher: agent });
    expect(await res.body.text()).toBe('looked up');
    expect(names).toEqual(['service.test']);
    // A name is guarded per address (issue 16): the lookup is the name's dial, the connect the address's.
    expect(breaker.stats()).toMatchObject({ succeeded: 1 }); // the address's dial
    expect(lookupBreaker(breaker, lookup as never).stats()).toMatchObject({ succeeded: 1 }); // the name's lookup, counted apart
    expect(breaker.state(`127.0.0.1:${server.port}`)?.state).toBe('closed');
  });

  it('socketPath: every request rides the unix socket', async () => {
    const socketPath = path.join(os.tmpdir(), `dialguard-undici-${process.pid}-${Date.now()}.sock`);
    const server = http.createServer((_req, res) => res.end('over unix'));
    await new Promise<void>((resolve) => server.listen(socketPath, () => resolve()));
    try {
      const { agent } = guarded({ undici: { socketPath } });
      const res = await request('http://localhost/', { dispatcher: agent });
      expect(await res.body.text()).toBe('over unix');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a unix socket is its own breaker entry, by its path: a stopped daemon never gets a live socket or a TCP server of the same origin refused (was: all filed under localhost:80)', async () => {
    const dir = os.tmpdir();
    const dead = path.join(dir, `dialguard-dead-${process.pid}-${Date.now()}.sock`); // nothing listens: ENOENT
    const live = path.join(dir, `dialguard-live-${process.pid}-${Date.now()}.sock`);
    const server = http.createServer((_req, res) => res.end('live daemon'));
    await new Promise<void>((resolve) => server.listen(live, () => resolve()));
    await using tcp = await httpServer(answer(200, 'tcp'));
    try {
      const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
      const { agent: toDead } = guarded({ breaker, maxAttempts: 1, undici: { socketPath: dead } });
      for (let i = 0; i < 3; i++) await failure(request('http://localhost/', { dispatcher: toDead }));
      expect(breaker.state(dead)?.state).toBe('open');
      expect(breaker.stats()).toMatchObject({ failed: 1, refused: 2 });
      const { agent: toLive } = guarded({ breaker, undici: { socketPath: live } });
      expect(await (await request('http://localhost/', { dispatcher: toLive })).body.text()).toBe('live daemon');
      const { agent: overTcp } = guarded({ breaker });
      expect(await (await request(`http://localhost:${tcp.port}/`, { dispatcher: overTcp })).body.text()).toBe('tcp');
      expect(breaker.state('localhost:80')).toBeUndefined();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("a unix socket agent's early refusal asks by its path: the TCP origin open in the same breaker never refuses it (was: refused for as long as host:port was, the daemon serving; an outside review)", async () => {
    const sock = path.join(os.tmpdir(), `dialguard-back-${process.pid}-${Date.now()}.sock`);
    const breaker = new HostBreaker({ failureThreshold: 1, minOutage: 0, openDuration: 60_000 });
    const { agent } = guarded({ breaker, maxAttempts: 1, socketPath: sock });
    await failure(request('http://127.0.0.1:7/', { dispatcher: agent })); // the daemon not there yet: the origin is suspect
    const server = http.createServer((_req, res) => res.end('daemon back'));
    await new Promise<void>((resolve) => server.listen(sock, () => resolve()));
    try {
      breaker.reset(sock); // the daemon is back (its own entry closed)
      breaker.isolate('127.0.0.1:7'); // the TCP host:port of the same origin, refused
      const res = await request('http://127.0.0.1:7/', { dispatcher: agent });
      expect(await res.body.text()).toBe('daemon back');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a connector function opens the sockets, its dials still reported to the breaker', async () => {
    await using server = await httpServer(answer(200, 'custom'));
    let calls = 0;
    const base = buildConnector({});
    const connector: typeof base = (opts, cb) => {
      calls++;
      base(opts, cb);
    };
    const { agent, breaker } = guarded({ undici: { connect: connector } });
    expect(await (await request(`${server.origin}/`, { dispatcher: agent })).body.text()).toBe('custom');
    expect(calls).toBe(1);
    expect(breaker.stats()).toMatchObject({ succeeded: 1 });
  });
});

describe('undici.allowH2 (a contract pin: undici hands it to the connector with each dial)', () => {
  it('a TLS origin that speaks h2 is served over HTTP/2', async () => {
    const server = http2.createSecureServer({ cert: TEST_CERT, key: TEST_KEY, allowHTTP1: true }, (req, res) => res.end(req.httpVersion));
    const sessions = new Set<http2.ServerHttp2Session>();
    server.on('session', (session: http2.ServerHttp2Session) => sessions.add(session));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as net.AddressInfo;
    try {
      const { agent } = guarded({ tls: { ca: TEST_CERT }, undici: { allowH2: true } });
      expect(await (await request(`https://127.0.0.1:${port}/`, { dispatcher: agent })).body.text()).toBe('2.0');
      await agent.close();
    } finally {
      for (const session of sessions) session.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('GuardedAgent is an undici Agent', () => {
  it('instanceof Agent', () => {
    const { agent } = guarded();
    expect(agent).toBeInstanceOf(Agent);
    expect(agent).toBeInstanceOf(GuardedAgent);
  });
});
