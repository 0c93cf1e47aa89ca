/**
 * classify() on the errors a remote server turned into text (seed 004), on error shapes read from
 * the clients' sources for paths a loopback peer cannot provoke, on dialguard's own errors, and on
 * hostile inputs it must survive. Real captured failures are in classify-real.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Classification, type FailureKind, afterAnswerBegan, classify, failedEstablishing, heardOnLiveConnection, leftHostRefusing, markLeftRefusing, registerClassifier } from '../../src/core/classify.js';
import {
  ConnectTimeoutError,
  ConnectionGoneError,
  DeadlineExceededError,
  KeepAliveTimeoutError,
  TransportClosedError,
  HostUnavailableError,
  NoServerAvailableError,
  PoolClosedError,
  RequestTimeoutError,
  RetriesExhaustedError,
  RetryBudgetExhaustedError,
} from '../../src/core/errors.js';

type Expect = Pick<Classification, 'kind' | 'notSent' | 'connectionDead'> & { transient?: boolean; code?: string };

function sys(code: string, syscall?: string, message = `${syscall ?? 'x'} ${code}`): Error {
  return Object.assign(new Error(message), { code, ...(syscall === undefined ? {} : { syscall }) });
}

function grpcErr(code: number, name: string, details: string): Error {
  return Object.assign(new Error(`${code} ${name}: ${details}`), { code, details, metadata: {} });
}

const k = (kind: FailureKind, notSent: boolean, connectionDead: boolean, more: Partial<Expect> = {}): Expect => ({
  kind,
  notSent,
  connectionDead,
  ...more,
});

function check(err: unknown, want: Expect): void {
  const got = classify(err);
  expect({ kind: got.kind, notSent: got.notSent, connectionDead: got.connectionDead }).toEqual({
    kind: want.kind,
    notSent: want.notSent,
    connectionDead: want.connectionDead,
  });
  if (want.transient !== undefined) expect(got.transient, 'transient').toBe(want.transient);
  if (want.code !== undefined) expect(got.code, 'code').toBe(want.code);
}

const remoteEof = k('connection', false, false, { transient: true, code: 'EOF' });

describe('classify: EOF a remote server turned into a string (seed 004)', () => {
  it.each<[string, unknown]>([
    ['Nomad: 500 wrapping an EOF', new Error('Unexpected response code: 500 (rpc error: EOF)')],
    ['Nomad: 500 wrapping a forwarded EOF', new Error('Unexpected response code: 500 (rpc error: rpc error: EOF)')],
    ['net/rpc, nested', new Error('rpc error: rpc error: EOF')],
    ['any message ending in ": EOF"', new Error('failed to read response: EOF')],
    ['Go io.ErrUnexpectedEOF', new Error('decoding body: unexpected EOF')],
    ['a bare EOF', new Error('EOF')],
    ['yamux stream closed', new Error('rpc error: stream closed')],
    ['yamux session shutdown', new Error('session shutdown')],
    ['a string throwable', 'rpc error: EOF'],
    ['trailing whitespace', new Error('rpc error: EOF\n')],
    ['an HTTP status error whose body says EOF', Object.assign(new Error('rpc error: EOF'), { statusCode: 500 })],
    ['a remote ECONNRESET spelled by Go', new Error('read tcp 10.0.0.1:4647: read: connection reset by peer')],
    ["gRPC-Go's status relayed as text (an outside review: read as unknown, never retried)", new Error('rpc error: code = Unavailable desc = EOF')],
    ["gRPC-Go's status relayed in a 500's status line", new Error('Unexpected response code: 500 (rpc error: code = Unknown desc = EOF)')],
    ["gRPC-Go's closing transport relayed as text", new Error('rpc error: code = Unavailable desc = transport is closing')],
  ])('%s', (_name, err) => {
    check(err, _name.includes('ECONNRESET') ? { ...remoteEof, code: 'ECONNRESET' } : remoteEof);
  });

  it('does not see EOF inside words or mid-sentence', () => {
    for (const m of ['GEOFENCE rejected', 'EOFException handler missing', 'reached EOF marker in file upload', 'ErrEOF handling', 'rpc error: code = Internal desc = EOFError in parser']) {
      expect(classify(new Error(m)).kind, m).toBe('unknown');
    }
  });

  it('a 500 without an EOF is the server answering: not retryable by default', () => {
    check(new Error('Unexpected response code: 500 (No cluster leader)'), k('application', false, false, { transient: false, code: 'HTTP_500' }));
  });

  it('looks at the end of a huge message', () => {
    check(new Error(`${'x'.repeat(10_000_000)}: EOF`), remoteEof);
  });
});

describe('classify: patterns and hooks', () => {
  const noLeader = { match: 'No cluster leader', transient: true, notSent: true } as const;

  it('a pattern makes "No cluster leader" safe to retry, keeping what the error was', () => {
    const http = new Error('Unexpected response code: 500 (No cluster leader)');
    expect(classify(http, { patterns: [noLeader] })).toMatchObject({ kind: 'application', transient: true, notSent: true, code: 'HTTP_500' });
    const g = grpcErr(14, 'UNAVAILABLE', 'No cluster leader');
    expect(classify(g, { patterns: [noLeader] })).toMatchObject({ kind: 'application', transient: true, notSent: true, code: 'UNAVAILABLE' });
  });

  it('a RegExp pattern (flags g/y do not make it stateful) can set a kind and code', () => {
    const p = { match: /leader(ship)? lost/gy, kind: 'connection', code: 'LEADER_LOST', connectionDead: false } as const;
    for (let i = 0; i < 3; i++) {
      expect(classify(new Error('raft: leadership lost while committing'), { patterns: [p] })).toMatchObject({
        kind: 'connection',
        code: 'LEADER_LOST',
        transient: true,
      });
    }
  });

  it('registered patterns and hooks apply to every call until removed', () => {
    const off = registerClassifier({ patterns: [noLeader] });
    try {
      expect(classify(new Error('No cluster leader')).transient).toBe(true);
    } finally {
      off();
    }
    expect(classify(new Error('No cluster leader')).transient).toBe(false);
  });

  it('a hook has the last word, within the invariants', () => {
    const timeout = new RequestTimeoutError(100);
    const c = classify(timeout, { hook: () => ({ connectionDead: true, code: 'MINE' }) });
    expect(c).toMatchObject({ kind: 'timeout', connectionDead: false, code: 'MINE' }); // never dead unless 'connection'
    const r = classify(new Error('x'), { hook: () => ({ kind: 'refused', transient: true }) });
    expect(r).toMatchObject({ kind: 'refused', transient: false, notSent: true });
    const ignored = classify(new Error('x'), { hook: () => ({ kind: 'bogus' as FailureKind, transient: 'yes' as unknown as boolean }) });
    expect(ignored).toMatchObject({ kind: 'unknown', transient: false });
  });

  it('a hook that throws is ignored and reported once', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const hook = (): never => {
      throw new Error('hook bug');
    };
    for (let i = 0; i < 3; i++) expect(classify(sys('ECONNREFUSED', 'connect'), { hook }).kind).toBe('dial');
    expect(warn).toHaveBeenCalledTimes(1);
    warn.mockRestore();
  });

  it.each<[string, unknown, RegExp]>([
    ['patterns not an array', { patterns: 'EOF' }, /patterns must be an array, got "EOF"/],
    ['empty match', { patterns: [{ match: '' }] }, /patterns\[0\]\.match must not be empty/],
    ['bad match', { patterns: [{ match: 5 }] }, /patterns\[0\]\.match must be a string or RegExp, got 5/],
    ['bad kind', { patterns: [{ match: 'x', kind: 'fatal' }] }, /patterns\[0\]\.kind must be a FailureKind, got "fatal"/],
    ['bad hook', { hook: 'no' }, /hook must be a function/],
    ['bad signal', { signal: {} }, /signal must be an AbortSignal/],
  ])('rejects options: %s', (_name, options, message) => {
    expect(() => classify(new Error('x'), options as never)).toThrow(message);
  });
});

describe("classify: the caller's cancellation", () => {
  it('an AbortError, undici abort codes and a closed pool are cancelled, never transient', () => {
    for (const err of [
      new DOMException('aborted', 'AbortError'),
      Object.assign(new Error('Request aborted'), { name: 'AbortError', code: 'UND_ERR_ABORTED' }),
      Object.assign(new Error('x'), { code: 'ABORT_ERR' }),
      new PoolClosedError(),
    ]) {
      check(err, k('cancelled', false, false, { transient: false }));
    }
  });

  it("whatever the caller's signal aborted with is cancelled, even wrapped", () => {
    const c = new AbortController();
    const reason = { why: 'user navigated away' };
    c.abort(reason);
    expect(classify(reason, { signal: c.signal }).kind).toBe('cancelled');
    expect(classify(new Error('fetch failed', { cause: reason }), { signal: c.signal })).toMatchObject({ kind: 'cancelled', cause: reason });
    expect(classify(reason).kind).toBe('unknown'); // without the signal it is just an object
  });

  it('an AbortSignal.timeout() reason is a timeout', () => {
    check(new DOMException('signal timed out', 'TimeoutError'), k('timeout', false, false, { transient: true, code: 'TIMEOUT_ERR' }));
  });
});

describe('classify: dialguard errors by class', () => {
  it.each<[string, unknown, Expect]>([
    ['HostUnavailableError', new HostUnavailableError('a:1', 1_000, 'open'), k('refused', true, false, { transient: false })],
    ['NoServerAvailableError', new NoServerAvailableError(3, 500), k('refused', true, false, { transient: false })],
    ['ConnectTimeoutError', new ConnectTimeoutError('a:1', 100, 'tls'), k('dial', true, false, { transient: true })],
    ['ConnectionGoneError', new ConnectionGoneError('a:1', 7), k('connection', false, true, { transient: true })],
    ['KeepAliveTimeoutError (a silent peer)', new KeepAliveTimeoutError(10_000, 10_000), k('connection', false, true, { transient: true })],
    ['TransportClosedError (a connector saw its transport close)', new TransportClosedError('svc:1', 'HTTP/2 session'), k('connection', false, true, { transient: true })],
    ['TransportClosedError in its handshake (nothing sent on it): a dial that may pass', new TransportClosedError('svc:1', 'connection', { handshake: true }), k('dial', true, false, { transient: true })],
    ['another error with a `handshake: true` of its own is not thereby a dial', Object.assign(sys('ECONNRESET'), { handshake: true }), k('connection', false, true, { transient: true })],
    ['RequestTimeoutError (seed 003: never dead)', new RequestTimeoutError(100), k('timeout', false, false, { transient: true })],
    ['DeadlineExceededError (budget spent)', new DeadlineExceededError(100, 2, { cause: sys('ECONNRESET', 'read') }), k('timeout', false, false, { transient: false })],
    [
      'RetriesExhaustedError: the last attempt decides',
      new RetriesExhaustedError([sys('ECONNRESET', 'read'), sys('ECONNREFUSED', 'connect')], 'x'),
      k('dial', true, false, { code: 'ECONNREFUSED' }),
    ],
    ['RetryBudgetExhaustedError: its cause decides', new RetryBudgetExhaustedError({ cause: sys('ECONNRESET', 'read') }), k('connection', false, true)],
    ['RetryBudgetExhaustedError without a cause', new RetryBudgetExhaustedError(), k('unknown', false, false, { code: 'DIALGUARD_RETRY_BUDGET_EXHAUSTED' })],
  ])('%s', (_name, err, want) => check(err, want));
});

describe('classify: shapes read from the clients, for paths a loopback peer cannot provoke', () => {
  it.each<[string, unknown, Expect]>([
    ['ETIMEDOUT on an established socket: timeout, not dead (seed 003)', sys('ETIMEDOUT', 'read'), k('timeout', false, false, { transient: true })],
    ['ETIMEDOUT while connecting', sys('ETIMEDOUT', 'connect'), k('dial', true, false)],
    ['ECONNRESET while connecting', sys('ECONNRESET', 'connect'), k('dial', true, false)],
    ['EHOSTUNREACH', sys('EHOSTUNREACH', 'connect'), k('dial', true, false)],
    ['ENETUNREACH without a syscall', sys('ENETUNREACH'), k('dial', true, false)],
    ['EAI_AGAIN', sys('EAI_AGAIN', 'getaddrinfo'), k('dial', true, false, { code: 'EAI_AGAIN' })],
    ['ECONNABORTED', sys('ECONNABORTED', 'read'), k('connection', false, true)],
    ['a TLS record broken mid-connection is not a dial (maybe sent)', sys('ERR_SSL_DECRYPTION_FAILED_OR_BAD_RECORD_MAC'), k('connection', false, true)],
    ['a TLS alert that the two ends disagree (no common ALPN) is a dial no retry can fix', sys('ERR_SSL_TLSV1_ALERT_NO_APPLICATION_PROTOCOL'), k('dial', true, false, { transient: false })],
    ['a TLS version mismatch alert is a dial no retry can fix', sys('ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION'), k('dial', true, false, { transient: false })],
    ['an unrecognized_name alert (no site by the name sent) is a dial no retry can fix', sys('ERR_SSL_TLSV1_UNRECOGNIZED_NAME'), k('dial', true, false, { transient: false })],
    ['an unsupported_extension alert is a dial no retry can fix', sys('ERR_SSL_TLSV1_UNSUPPORTED_EXTENSION'), k('dial', true, false, { transient: false })],
    ['a peer’s internal_error alert is a dial that may pass', sys('ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR'), k('dial', true, false, { transient: true })],
    ['ERR_STREAM_PREMATURE_CLOSE', sys('ERR_STREAM_PREMATURE_CLOSE'), k('connection', false, true)],
    ['ERR_HTTP2_GOAWAY_SESSION: not sent, connection going away (retire, not dead)', sys('ERR_HTTP2_GOAWAY_SESSION'), k('connection', true, false, { transient: true })],
    ['ERR_HTTP2_STREAM_CANCEL with an opaque cause', Object.assign(new Error('The pending stream has been canceled (caused by: x)', { cause: new Error('x') }), { code: 'ERR_HTTP2_STREAM_CANCEL' }), k('connection', true, true)],
    ['ERR_HTTP2_STREAM_CANCEL caused by a read reset keeps "not sent"', Object.assign(new Error('pending stream canceled', { cause: sys('ECONNRESET', 'read') }), { code: 'ERR_HTTP2_STREAM_CANCEL' }), k('connection', true, true, { code: 'ECONNRESET' })],
    ['ERR_HTTP2_STREAM_ERROR with no code name', sys('ERR_HTTP2_STREAM_ERROR', undefined, 'Stream closed'), k('stream', false, false)],
    ['undici InformationalError "stream error" code 7', Object.assign(new Error('HTTP/2: "stream error" received - code 7'), { code: 'UND_ERR_INFO' }), k('stream', true, false, { code: 'REFUSED_STREAM' })],
    ['undici InformationalError socket idle timeout', Object.assign(new Error('socket idle timeout'), { code: 'UND_ERR_INFO' }), k('connection', false, true)],
    ['undici ClientClosedError', Object.assign(new Error('The client is closed'), { code: 'UND_ERR_CLOSED' }), k('cancelled', false, false)],
    ['undici RequestRetryError with a status', Object.assign(new Error('Request failed'), { code: 'UND_ERR_REQ_RETRY', statusCode: 503 }), k('application', false, false, { code: 'HTTP_503' })],
    ['undici HTTPParserError', Object.assign(new Error('Response does not match the HTTP/1.1 protocol'), { name: 'HTTPParserError', code: 'HPE_INVALID_CONSTANT' }), k('unknown', false, false)],
    ['grpc UNAVAILABLE: name resolution failed', grpcErr(14, 'UNAVAILABLE', 'Name resolution failed for target dns:nope:50051'), k('dial', false, false)],
    ['grpc-go style "failed to connect"', grpcErr(14, 'UNAVAILABLE', 'failed to connect to all addresses'), k('dial', false, false)],
    ['grpc UNAVAILABLE read ETIMEDOUT: a timeout', grpcErr(14, 'UNAVAILABLE', 'read ETIMEDOUT'), k('timeout', false, false, { code: 'ETIMEDOUT' })],
    ['grpc UNKNOWN carrying a reset (seed 003)', grpcErr(2, 'UNKNOWN', 'read ECONNRESET'), k('connection', false, true)],
    ['grpc CANCELLED carrying a transport error (seed 003)', grpcErr(1, 'CANCELLED', 'Connection dropped'), k('connection', false, true)],
    ['grpc CANCELLED sent without a transport cause', grpcErr(1, 'CANCELLED', 'context canceled'), k('cancelled', false, false, { transient: false })],
    ['grpc UNAVAILABLE: channel closed before the call started', grpcErr(14, 'UNAVAILABLE', 'Channel closed before call started'), k('cancelled', false, false)],
    ['grpc UNAVAILABLE: write failed', grpcErr(14, 'UNAVAILABLE', 'Write error: write EPIPE'), k('connection', false, true, { code: 'EPIPE' })],
    ['grpc DEADLINE_EXCEEDED during name resolution', grpcErr(4, 'DEADLINE_EXCEEDED', 'Deadline exceeded after 1.000s,waiting for name resolution'), k('timeout', false, false)],
    ['grpc UNAVAILABLE the server sent', grpcErr(14, 'UNAVAILABLE', 'server is draining'), k('application', false, false, { transient: false })],
    ['grpc OK (not an error)', grpcErr(0, 'OK', ''), k('unknown', false, false)],
    ['HTTP status error (got, ky)', Object.assign(new Error('Response code 503'), { statusCode: 503 }), k('application', false, false, { code: 'HTTP_503' })],
    ['HTTP status error (status)', Object.assign(new Error('Too Many Requests'), { status: 429 }), k('application', false, false, { code: 'HTTP_429' })],
    ['a programmer error', new TypeError('x is not a function'), k('unknown', false, false, { transient: false })],
  ])('%s', (_name, err, want) => check(err, want));
});

describe('classify: a grpc status dialguard made up defers to its cause', () => {
  const status = (code: number, details: string, cause?: unknown): object => ({ code, details, metadata: {}, ...(cause === undefined ? {} : { cause }) });
  it.each<[string, unknown, Expect]>([
    ['UNAVAILABLE carrying a refusal', status(14, 'dialguard: a:1 is unavailable', new HostUnavailableError('a:1', 100, 'open')), k('refused', true, false, { transient: false, code: 'DIALGUARD_HOST_UNAVAILABLE' })],
    ['UNAVAILABLE carrying a connect timeout', status(14, 'dialguard: connect timed out', new ConnectTimeoutError('a:1', 100, 'tcp')), k('dial', true, false, { transient: true })],
    ['UNAVAILABLE carrying a dead connection', status(14, 'dialguard: gone', new ConnectionGoneError('a:1', 3)), k('connection', false, true, { transient: true })],
    ['DEADLINE_EXCEEDED carrying a spent deadline', status(4, 'dialguard: deadline', new DeadlineExceededError(100, 1)), k('timeout', false, false, { transient: false })],
    ['the same details without a cause: nothing known', status(14, 'dialguard: gone'), k('unknown', false, false, { transient: false })],
    ['without the prefix the code speaks (a server sent it)', status(14, 'gone', new ConnectionGoneError('a:1', 3)), k('application', false, false)],
  ])('%s', (_name, err, want) => check(err, want));
});

describe('classify: an error heard on a live connection is never a dial\'s', () => {
  it('a dial code a live connection emitted is that connection dying, maybe sent; its code and transience stay', () => {
    const record = sys('ERR_SSL_BAD_RECORD_TYPE');
    const alert = sys('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
    const unreachable = sys('EHOSTUNREACH', 'read');
    for (const e of [record, alert, unreachable]) expect(classify(e)).toMatchObject({ kind: 'dial', notSent: true });
    for (const e of [record, alert, unreachable]) heardOnLiveConnection(e);
    check(record, k('connection', false, true, { transient: true, code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    check(alert, k('connection', false, true, { transient: false, code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' }));
    check(unreachable, k('connection', false, true, { transient: true, code: 'EHOSTUNREACH' }));
    // Deep in a wrapper's chain too; another error with the same code is not touched.
    check(new Error('request failed', { cause: record }), k('connection', false, true, { code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    // A wrapper that copies the code (axios's AxiosError, got's RequestError) is not a dial's either,
    // whoever made it; one that wraps an unheard error with the same code still is.
    const copied = (cause: Error): Error => Object.assign(new Error('decryption failed', { cause }), { code: 'ERR_SSL_BAD_RECORD_TYPE' });
    check(copied(record), k('connection', false, true, { code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    check(copied(sys('ERR_SSL_BAD_RECORD_TYPE')), k('dial', true, false));
    // Four errors deep at most, as far as heardOnLiveConnection records: the fifth is not reached.
    check(copied(copied(copied(record))), k('connection', false, true, { code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    check(copied(copied(copied(copied(record)))), k('dial', true, false));
    check(sys('ERR_SSL_BAD_RECORD_TYPE'), k('dial', true, false));
  });

  it('what a heard error wraps is heard too, four deep: an inner dial code no longer decides; a wrapper that knew the request unsent still says so', () => {
    const chain = (inner: Error, depth: number): Error => (depth === 0 ? inner : new Error(`wrap ${depth}`, { cause: chain(inner, depth - 1) }));
    const shallow = chain(sys('ERR_SSL_BAD_RECORD_TYPE'), 3);
    heardOnLiveConnection(shallow);
    check(shallow, k('connection', false, true, { code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    const deep = chain(sys('ERR_SSL_BAD_RECORD_TYPE'), 4); // the fifth error is not reached
    heardOnLiveConnection(deep);
    check(deep, k('dial', true, false, { code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    const canceled = Object.assign(new Error('The pending stream has been canceled (caused by: x)', { cause: sys('ERR_SSL_BAD_RECORD_TYPE') }), { code: 'ERR_HTTP2_STREAM_CANCEL' });
    heardOnLiveConnection(canceled);
    check(canceled, k('connection', true, true, { code: 'ERR_SSL_BAD_RECORD_TYPE' }));
    const hostile = { get cause(): never { throw new Error('no'); }, code: 'ECONNREFUSED', message: 'x' };
    expect(() => heardOnLiveConnection(hostile)).not.toThrow();
    expect(classify(hostile).kind).toBe('connection');
  });

  it('what is not a dial keeps its verdict; anything but an object is ignored', () => {
    const reset = sys('ECONNRESET', 'read');
    const refused = new HostUnavailableError('h:1', 100, 'open');
    const refusedStream = Object.assign(new Error('Stream closed with error code NGHTTP2_REFUSED_STREAM'), { code: 'ERR_HTTP2_STREAM_ERROR' });
    const before = [reset, refused, refusedStream].map((e) => classify(e));
    for (const e of [reset, refused, refusedStream]) heardOnLiveConnection(e);
    expect([reset, refused, refusedStream].map((e) => classify(e))).toEqual(before);
    for (const v of [undefined, null, 'ERR_SSL_BAD_RECORD_TYPE', 7, Symbol('s')]) expect(() => heardOnLiveConnection(v)).not.toThrow();
    // A function thrown as an error is read like an object, and recorded like one.
    const fn = Object.assign(() => {}, { code: 'ECONNREFUSED' });
    expect(classify(fn).kind).toBe('dial');
    heardOnLiveConnection(fn);
    expect(classify(fn).kind).toBe('connection');
  });
});

describe('classify: an error met after the server\'s answer began is never "not sent"', () => {
  const refused = (): Error => Object.assign(new Error('Stream closed with error code NGHTTP2_REFUSED_STREAM'), { code: 'ERR_HTTP2_STREAM_ERROR' });

  it('a REFUSED_STREAM marked so keeps its kind, code and transience, and loses notSent alone (was: notSent, a POST that ran sent 3 times)', () => {
    expect(classify(refused())).toMatchObject({ kind: 'stream', code: 'REFUSED_STREAM', notSent: true, transient: true });
    const marked = afterAnswerBegan(refused());
    expect(classify(marked)).toMatchObject({ kind: 'stream', code: 'REFUSED_STREAM', notSent: false, transient: true, connectionDead: false });
  });

  it('a refused dial marked so is not "not sent" either; a wrapper of a marked error is read by its own mark alone; primitives pass through', () => {
    const dial = afterAnswerBegan(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED', syscall: 'connect' }));
    expect(classify(dial)).toMatchObject({ kind: 'dial', notSent: false });
    expect(classify(new Error('wrapper', { cause: refused() })).notSent).toBe(true);
    expect(afterAnswerBegan('text')).toBe('text');
    expect(afterAnswerBegan(null)).toBe(null);
    expect(classify(afterAnswerBegan('x')).notSent).toBe(false);
  });
});

describe('classify: walking the chain', () => {
  it('the most specific error decides, and is the cause', () => {
    const root = sys('ECONNRESET', 'read');
    const err = new Error('loading user 42 failed', { cause: new Error('upstream', { cause: root }) });
    expect(classify(err)).toMatchObject({ kind: 'connection', connectionDead: true, code: 'ECONNRESET', cause: root });
  });

  it('an outer deadline decides over what it wraps', () => {
    expect(classify(new DeadlineExceededError(100, 1, { cause: sys('ECONNREFUSED', 'connect') })).kind).toBe('timeout');
  });

  it('an AggregateError whose members disagree: not sent only if none was sent', () => {
    const mixed = new AggregateError([sys('ECONNREFUSED', 'connect'), sys('ECONNRESET', 'read')]);
    expect(classify(mixed)).toMatchObject({ notSent: false, transient: true, connectionDead: false });
    const allDial = new AggregateError([sys('ECONNREFUSED', 'connect'), sys('ETIMEDOUT', 'connect')]);
    expect(classify(allDial)).toMatchObject({ kind: 'dial', notSent: true });
    expect(classify(new AggregateError([])).kind).toBe('unknown');
  });

  it('keeps the deepest code when nothing is recognised', () => {
    expect(classify(new Error('a', { cause: Object.assign(new Error('b'), { code: 'EWEIRD' }) }))).toMatchObject({ kind: 'unknown', code: 'EWEIRD' });
  });
});

describe('classify: hostile inputs never crash or hang', () => {
  afterEach(() => vi.restoreAllMocks());

  it('a revoked Proxy, or one whose every trap throws, is unknown: classify() never throws, nor reads it past what it can', () => {
    const { proxy, revoke } = Proxy.revocable(new Error('x'), {});
    revoke();
    const trap = (): never => {
      throw new Error('trap');
    };
    const trapped = new Proxy(new Error('y'), { get: trap, getPrototypeOf: trap, has: trap, ownKeys: trap, getOwnPropertyDescriptor: trap });
    for (const err of [proxy, trapped]) {
      const c = classify(err);
      expect(c).toMatchObject({ kind: 'unknown', notSent: false, connectionDead: false, transient: false });
      expect(Object.isFrozen(c)).toBe(true);
    }
  });

  // A hang fails by the test timeout; what each case bounds is counted, never timed.
  function survives(err: unknown): Classification {
    const c = classify(err);
    expect(Object.isFrozen(c)).toBe(true);
    return c;
  }

  it.each<[string, unknown]>([
    ['null', null],
    ['undefined', undefined],
    ['a number', 42],
    ['NaN', Number.NaN],
    ['a boolean', false],
    ['a symbol', Symbol('boom')],
    ['a bigint', 10n],
    ['an empty object', {}],
    ['an array', [1, 2, 3]],
    ['a function', () => {}],
    ['an object with odd field types', { code: { nested: true }, message: 42, name: null, cause: Symbol('x'), details: 7 }],
  ])('%s is unknown', (_name, err) => {
    expect(survives(err)).toMatchObject({ kind: 'unknown', notSent: false, connectionDead: false, transient: false, cause: err });
  });

  it('cyclic cause chains', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(survives(a).kind).toBe('unknown');
    const self = new Error('self');
    (self as { cause?: unknown }).cause = self;
    expect(survives(self).kind).toBe('unknown');
    const loopToReset = sys('ECONNRESET', 'read');
    (loopToReset as { cause?: unknown }).cause = new Error('wrapper', { cause: loopToReset });
    expect(survives(new Error('top', { cause: loopToReset })).kind).toBe('connection');
  });

  it('a 100 000-deep chain is cut off at a bounded depth', () => {
    let causesRead = 0;
    let err: object = sys('ECONNRESET', 'read');
    for (let i = 0; i < 100_000; i++) {
      const inner = err;
      err = {
        message: `wrap ${i}`,
        get cause() {
          causesRead++;
          return inner;
        },
      };
    }
    expect(survives(err).kind).toBe('unknown');
    expect(causesRead).toBeLessThanOrEqual(32);
    let shallow: Error = sys('ECONNRESET', 'read');
    for (let i = 0; i < 10; i++) shallow = new Error(`wrap ${i}`, { cause: shallow });
    expect(survives(shallow).kind).toBe('connection');
  });

  it('a cause getter that invents a new error every time is bounded too', () => {
    let invented = 0;
    const endless = (n: number): object => ({
      message: `level ${n}`,
      get cause() {
        invented++;
        return endless(n + 1);
      },
    });
    expect(survives(endless(0)).kind).toBe('unknown');
    expect(invented).toBeLessThanOrEqual(32);
  });

  it('getters that throw', () => {
    const err = new Error('x');
    for (const key of ['code', 'message', 'cause', 'name', 'syscall', 'details', 'errors', 'status', 'statusCode']) {
      Object.defineProperty(err, key, {
        get() {
          throw new Error(`getter ${key}`);
        },
      });
    }
    expect(survives(err).kind).toBe('unknown');
  });

  it('a Proxy whose every trap throws, and a revoked Proxy', () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('get');
        },
        getPrototypeOf() {
          throw new Error('proto');
        },
        has() {
          throw new Error('has');
        },
      },
    );
    expect(survives(hostile).kind).toBe('unknown');
    const { proxy, revoke } = Proxy.revocable(new Error('x'), {});
    revoke();
    expect(survives(proxy).kind).toBe('unknown');
    expect(survives(new Error('wrap', { cause: proxy })).kind).toBe('unknown');
  });

  it('an AggregateError with a million members reads a bounded few', () => {
    const read = new Set<PropertyKey>();
    // A million members that exist only when read.
    const members = new Proxy([], {
      get(target, key) {
        if (key === 'length') return 1_000_000;
        if (typeof key === 'string' && /^\d+$/.test(key)) {
          read.add(key);
          return { message: `m${key}`, code: 'ECONNREFUSED', syscall: 'connect' };
        }
        return Reflect.get(target, key);
      },
    });
    const many = Object.defineProperty(new AggregateError([]), 'errors', { value: members });
    expect(survives(many).kind).toBe('dial');
    expect(read.size).toBe(16);
    const badErrors = new AggregateError([]);
    Object.defineProperty(badErrors, 'errors', {
      get() {
        throw new Error('errors');
      },
    });
    expect(survives(badErrors).kind).toBe('unknown');
  });

  it('a user RegExp is never run against more than a bounded text', () => {
    const lengths: number[] = [];
    class Recording extends RegExp {
      override exec(text: string): RegExpExecArray | null {
        lengths.push(text.length);
        return super.exec(text);
      }
    }
    classify(new Error('a'.repeat(5_000_000)), { patterns: [{ match: new Recording('a+b'), transient: true }] });
    expect(lengths.length).toBeGreaterThan(0);
    for (const n of lengths) expect(n).toBeLessThanOrEqual(4096 + 2048 + 3);
  });
});

describe('leftHostRefusing: a dial failure marked as leaving its host refused', () => {
  it('reads the mark on the error and on its causes, three deep (undici\'s and grpc-js\'s wrappings), no deeper', () => {
    const marked = markLeftRefusing(new Error('connect ECONNREFUSED'));
    expect(leftHostRefusing(marked)).toBe(true);
    let wrapped: unknown = marked;
    const depths: boolean[] = [];
    for (let depth = 1; depth <= 4; depth++) {
      wrapped = new Error(`wrap ${depth}`, { cause: wrapped });
      depths.push(leftHostRefusing(wrapped));
    }
    expect(depths).toEqual([true, true, true, false]);
    expect(leftHostRefusing(new Error('unmarked', { cause: new Error('neither') }))).toBe(false);
  });

  it('a primitive is neither marked nor read as marked', () => {
    expect(markLeftRefusing('ECONNREFUSED')).toBe('ECONNREFUSED');
    expect(leftHostRefusing('ECONNREFUSED')).toBe(false);
    expect(leftHostRefusing(undefined)).toBe(false);
    expect(leftHostRefusing(null)).toBe(false);
  });
});

describe('failedEstablishing: a connection\'s establishment that failed', () => {
  it('an error no rule knows is a failed dial, not sent, transient; unmarked, it stays unknown', () => {
    const answered = new Error('handshake: ERROR Too many open connections');
    expect(classify(answered)).toMatchObject({ kind: 'unknown', notSent: false, transient: false });
    expect(failedEstablishing(answered)).toBe(answered);
    expect(classify(answered)).toMatchObject({ kind: 'dial', notSent: true, transient: true, connectionDead: false, cause: answered });
  });

  it('a known error keeps its own classification (a certificate the client rejects stays permanent)', () => {
    const cert = failedEstablishing(Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }));
    const before = classify(Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }));
    expect(classify(cert)).toMatchObject({ kind: before.kind, transient: before.transient, notSent: before.notSent });
    expect(failedEstablishing('text')).toBe('text');
  });
});
