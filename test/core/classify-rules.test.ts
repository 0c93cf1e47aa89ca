/**
 * The per-error rules of classify (src/core/classify-rules.ts), one row per shape: Node's system
 * and TLS errors, undici's and node:http2's codes, dialguard's own codes, names and HTTP statuses,
 * the remote-EOF text patterns, and what is read of an error at all. Every row states all five
 * answers. Shapes come from the clients' sources (undici lib/dispatcher/client-h1.js and
 * client-h2.js, node:http2's errors, Node's net/tls/dns errors); live captures are in
 * classify-real.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { classify } from '../../src/core/classify.js';
import { factsOf, timeoutReasonOf } from '../../src/core/classify-rules.js';
import { HostUnavailableError, RetriesExhaustedError, RetryBudgetExhaustedError } from '../../src/core/errors.js';
import { type Row, type Want, coded, expectClassified, sys } from './classify-table.js';

const dial = (code: string | undefined, transient = true): Want => ['dial', true, false, transient, code];
const dead = (code: string | undefined): Want => ['connection', false, true, true, code];
const timeout = (code: string | undefined): Want => ['timeout', false, false, true, code];
const cancelled = (code: string | undefined): Want => ['cancelled', false, false, false, code];
const app = (code: string | undefined): Want => ['application', false, false, false, code];
const unknown = (code: string | undefined): Want => ['unknown', false, false, false, code];
const remote = (code: string): Want => ['connection', false, false, true, code];
const stream = (code: string | undefined, notSent: boolean, transient: boolean): Want => ['stream', notSent, false, transient, code];

describe('classify rules: Node system and TLS errors', () => {
  it.each<Row>([
    ['a self-signed certificate: a dial that retrying cannot fix', coded('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'), dial('DEPTH_ZERO_SELF_SIGNED_CERT', false)],
    ['an expired certificate, even from a connect', sys('CERT_HAS_EXPIRED', 'connect'), dial('CERT_HAS_EXPIRED', false)],
    ['a name the certificate does not cover', coded('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames"), dial('ERR_TLS_CERT_ALTNAME_INVALID', false)],
    ['a peer that does not speak TLS (https: to a plain port): the same answer every time', coded('ERR_SSL_WRONG_VERSION_NUMBER'), dial('ERR_SSL_WRONG_VERSION_NUMBER', false)],
    ['another SSL error during the handshake may pass', coded('ERR_SSL_UNEXPECTED_EOF_WHILE_READING'), dial('ERR_SSL_UNEXPECTED_EOF_WHILE_READING')],
    ['a bad record MAC mid-connection', coded('ERR_SSL_SSLV3_ALERT_BAD_RECORD_MAC'), dead('ERR_SSL_SSLV3_ALERT_BAD_RECORD_MAC')],
    ['a record that failed to decrypt', coded('ERR_SSL_DECRYPTION_FAILED'), dead('ERR_SSL_DECRYPTION_FAILED')],
    ['a record overflow', coded('ERR_SSL_TLSV1_ALERT_RECORD_OVERFLOW'), dead('ERR_SSL_TLSV1_ALERT_RECORD_OVERFLOW')],
    ['a TLS handshake timeout', coded('ERR_TLS_HANDSHAKE_TIMEOUT', 'TLS handshake timeout'), dial('ERR_TLS_HANDSHAKE_TIMEOUT')],
    [
      'a peer that hung up before the TLS handshake finished',
      coded('ECONNRESET', 'Client network socket disconnected before secure TLS connection was established'),
      dial('ECONNRESET'),
    ],
    ['that wording reclassifies only ECONNRESET', coded('EPIPE', 'Client network socket disconnected before secure TLS connection was established'), dead('EPIPE')],
    ['a c-ares failure (query* syscall) whatever its code', sys('ESERVFAIL', 'queryA'), dial('ESERVFAIL')],
    ['a c-ares timeout', sys('ETIMEOUT', 'queryAaaa'), dial('ETIMEOUT')],
    ['a getaddrinfo failure whatever its code', sys('EAI_BADFLAGS', 'getaddrinfo'), dial('EAI_BADFLAGS')],
    ['a getnameinfo failure', sys('EAI_OVERFLOW', 'getnameinfo'), dial('EAI_OVERFLOW')],
    ['a query* prefix only, not a suffix', sys('EWEIRD', 'resquery'), unknown('EWEIRD')],
    ['ECONNREFUSED without a syscall', coded('ECONNREFUSED'), dial('ECONNREFUSED')],
    ['EADDRNOTAVAIL', coded('EADDRNOTAVAIL'), dial('EADDRNOTAVAIL')],
    ['EADDRNOTAVAIL from connect (no ephemeral port free just now) may pass', sys('EADDRNOTAVAIL', 'connect'), dial('EADDRNOTAVAIL')],
    // The socket could not bind as its own options asked: the same options fail the same way again (r134: retried 3 times, ~1.5 s).
    ['a localAddress not on this machine (bind)', sys('EADDRNOTAVAIL', 'bind'), dial('EADDRNOTAVAIL', false)],
    ['a pinned localPort in use (bind)', sys('EADDRINUSE', 'bind'), dial('EADDRINUSE', false)],
    ['a localAddress of the other family (bind)', sys('EINVAL', 'bind'), dial('EINVAL', false)],
    ["net's connection timeout", coded('ERR_SOCKET_CONNECTION_TIMEOUT'), dial('ERR_SOCKET_CONNECTION_TIMEOUT')],
    ['ENOTFOUND without a syscall', coded('ENOTFOUND'), dial('ENOTFOUND')],
    ['ECONNRESET on a read', sys('ECONNRESET', 'read'), dead('ECONNRESET')],
    ['EPIPE on a write', sys('EPIPE', 'write'), dead('EPIPE')],
    ['ENOTCONN', coded('ENOTCONN'), dead('ENOTCONN')],
    ['ERR_SOCKET_CLOSED', coded('ERR_SOCKET_CLOSED'), dead('ERR_SOCKET_CLOSED')],
    ['ETIMEDOUT on an established socket (seed 003)', sys('ETIMEDOUT', 'read'), timeout('ETIMEDOUT')],
    ['an errno nobody knows', coded('EWEIRD'), unknown('EWEIRD')],
    ['an errno nobody knows, on an HTTP status error: the status speaks', coded('EWEIRD', 'bad gateway', { statusCode: 502 }), app('HTTP_502')],
    ['a code beats remote text in its own message', sys('EPIPE', 'write', 'write EPIPE: broken pipe'), dead('EPIPE')],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

describe('classify rules: undici', () => {
  const und = (code: string, message = code, more: object = {}): Error => coded(code, message, more);
  it.each<Row>([
    ['ConnectTimeoutError', und('UND_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error'), dial('UND_ERR_CONNECT_TIMEOUT')],
    ['SecureProxyConnectionError', und('UND_ERR_PRX_TLS'), dial('UND_ERR_PRX_TLS')],
    ['HeadersTimeoutError', und('UND_ERR_HEADERS_TIMEOUT'), timeout('UND_ERR_HEADERS_TIMEOUT')],
    ['BodyTimeoutError', und('UND_ERR_BODY_TIMEOUT'), timeout('UND_ERR_BODY_TIMEOUT')],
    ['SocketError', und('UND_ERR_SOCKET', 'other side closed'), dead('UND_ERR_SOCKET')],
    ['RequestAbortedError without its name', und('UND_ERR_ABORTED'), cancelled('UND_ERR_ABORTED')],
    ['UND_ERR_ABORT', und('UND_ERR_ABORT'), cancelled('UND_ERR_ABORT')],
    ['ClientDestroyedError', und('UND_ERR_DESTROYED'), cancelled('UND_ERR_DESTROYED')],
    ['ResponseError with a status', und('UND_ERR_RESPONSE', 'Response Error', { statusCode: 502 }), app('HTTP_502')],
    ['ResponseError without a status or cause', und('UND_ERR_RESPONSE'), unknown('UND_ERR_RESPONSE')],
    ['ResponseError without a status: its cause speaks', und('UND_ERR_RESPONSE', 'x', { cause: sys('ECONNRESET', 'read') }), dead('ECONNRESET')],
    ['RequestRetryError without a status: its cause speaks', und('UND_ERR_REQ_RETRY', 'x', { cause: sys('ECONNREFUSED', 'connect') }), dial('ECONNREFUSED')],
    ['the DNS interceptor found nothing', und('UND_ERR_INFO', 'No DNS entries found'), dial('UND_ERR_INFO')],
    ['HTTP/2 RST_STREAM(ENHANCE_YOUR_CALM), a two-digit code', und('UND_ERR_INFO', 'HTTP/2: "stream error" received - code 11'), stream('ENHANCE_YOUR_CALM', false, true)],
    ['HTTP/2 RST_STREAM(PROTOCOL_ERROR)', und('UND_ERR_INFO', 'HTTP/2: "stream error" received - code 1'), stream('PROTOCOL_ERROR', false, false)],
    ['HTTP/2 stream closed before the response', und('UND_ERR_INFO', 'HTTP/2: stream closed before the response was complete'), stream('CANCEL', false, true)],
    ['HTTP/2 stream half-closed', und('UND_ERR_INFO', 'HTTP/2: stream half-closed (remote)'), stream('CANCEL', false, true)],
    ['HTTP/2 frame error', und('UND_ERR_INFO', 'HTTP/2: "frameError" received - type 1, code 1'), stream('PROTOCOL_ERROR', false, false)],
    ['HTTP/1.1 socket reset', und('UND_ERR_INFO', 'reset'), dead('UND_ERR_INFO')],
    ['an undici code nobody knows: unknown, and final', und('UND_ERR_NEW', 'new', { cause: sys('ECONNRESET', 'read') }), unknown('UND_ERR_NEW')],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

describe('classify rules: node:http2', () => {
  const h2 = (code: string, message: string = code, more: object = {}): Error => coded(code, message, more);
  it.each<Row>([
    ['RST_STREAM(REFUSED_STREAM): never sent', h2('ERR_HTTP2_STREAM_ERROR', 'Stream closed with error code NGHTTP2_REFUSED_STREAM'), stream('REFUSED_STREAM', true, true)],
    ['RST_STREAM(ENHANCE_YOUR_CALM)', h2('ERR_HTTP2_STREAM_ERROR', 'Stream closed with error code NGHTTP2_ENHANCE_YOUR_CALM'), stream('ENHANCE_YOUR_CALM', false, true)],
    ['RST_STREAM(PROTOCOL_ERROR)', h2('ERR_HTTP2_STREAM_ERROR', 'Stream closed with error code NGHTTP2_PROTOCOL_ERROR'), stream('PROTOCOL_ERROR', false, false)],
    ['a stream error without a code name', h2('ERR_HTTP2_STREAM_ERROR', 'Stream closed'), stream('ERR_HTTP2_STREAM_ERROR', false, false)],
    ['a session error with a code', h2('ERR_HTTP2_SESSION_ERROR', 'Session closed with error code 2'), dead('INTERNAL_ERROR')],
    ['a session error with a two-digit code', h2('ERR_HTTP2_SESSION_ERROR', 'Session closed with error code 11'), dead('ENHANCE_YOUR_CALM')],
    ['a session error with an unknown code', h2('ERR_HTTP2_SESSION_ERROR', 'Session closed with error code 99'), dead('ERR_HTTP2_SESSION_ERROR')],
    ['a session error without a code', h2('ERR_HTTP2_SESSION_ERROR', 'Session closed'), dead('ERR_HTTP2_SESSION_ERROR')],
    ['out of stream ids: not sent, going away', h2('ERR_HTTP2_OUT_OF_STREAMS'), ['connection', true, false, true, 'ERR_HTTP2_OUT_OF_STREAMS']],
    ['a destroyed session: not sent, dead, and final', h2('ERR_HTTP2_INVALID_SESSION', 'x', { cause: sys('ECONNRESET', 'read') }), ['connection', true, true, true, 'ERR_HTTP2_INVALID_SESSION']],
    ['a pending stream cancelled with no cause', h2('ERR_HTTP2_STREAM_CANCEL'), ['connection', true, true, true, 'ERR_HTTP2_STREAM_CANCEL']],
    ['a PING cancelled by a dying session', h2('ERR_HTTP2_PING_CANCEL'), dead('ERR_HTTP2_PING_CANCEL')],
    ['a session whose socket is gone', h2('ERR_HTTP2_SOCKET_UNBOUND'), dead('ERR_HTTP2_SOCKET_UNBOUND')],
    ['a stream that was already closed', h2('ERR_HTTP2_INVALID_STREAM'), stream('ERR_HTTP2_INVALID_STREAM', false, false)],
    ['an http2 code nobody knows: unknown, and final', h2('ERR_HTTP2_HEADERS_SENT', 'x', { cause: sys('ECONNRESET', 'read') }), unknown('ERR_HTTP2_HEADERS_SENT')],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

describe('classify rules: dialguard codes, names and HTTP statuses', () => {
  const abort = new DOMException('This operation was aborted', 'AbortError');
  it.each<Row>([
    ["a DOMException AbortError (its numeric code is not ours)", abort, cancelled('ABORT_ERR')],
    ["undici's RequestAbortedError keeps its code", coded('UND_ERR_ABORTED', 'Request aborted', { name: 'AbortError' }), cancelled('UND_ERR_ABORTED')],
    ['a TimeoutError without a code', Object.assign(new Error('timed out'), { name: 'TimeoutError' }), timeout('TIMEOUT_ERR')],
    ['a TimeoutError keeps its code', coded('ETIMEDOUT', 'timed out', { name: 'TimeoutError' }), timeout('ETIMEDOUT')],
    ['a dialguard code from a newer version: its status speaks', coded('DIALGUARD_SOMETHING_NEW', 'x', { statusCode: 503 }), app('HTTP_503')],
    ['a dialguard code from a newer version alone', coded('DIALGUARD_SOMETHING_NEW'), unknown('DIALGUARD_SOMETHING_NEW')],
    [
      'a retry wrapper around an unrecognised error speaks for it',
      new RetryBudgetExhaustedError({ cause: coded('EWEIRD') }),
      unknown('DIALGUARD_RETRY_BUDGET_EXHAUSTED'),
    ],
    ['a retry wrapper whose reason reads like a remote EOF still defers', new RetriesExhaustedError([coded('EWEIRD')], 'last error: EOF'), unknown('DIALGUARD_RETRIES_EXHAUSTED')],
    ['an HTTP parser error is final, whatever it wraps', coded('HPE_INVALID_CONSTANT', 'Expected HTTP/', { cause: sys('ECONNRESET', 'read') }), unknown('HPE_INVALID_CONSTANT')],
    ['status 100 is read (on an error, a failure after a status line that was fine: not an answer)', { message: 'x', statusCode: 100 }, unknown('HTTP_100')],
    ['status 599 is read', { message: 'x', status: 599 }, app('HTTP_599')],
    // What the HTTP clients' own errors say (shapes as axios 1.x and got 14 build them).
    ['axios: the body cut after a 200 ("stream has been aborted")', Object.assign(coded('ERR_BAD_RESPONSE', 'stream has been aborted'), { name: 'AxiosError', status: 200 }), dead('ERR_BAD_RESPONSE')],
    ['a 2xx error whose cause says more: the cause speaks', Object.assign(coded('ERR_X', 'cut'), { status: 200, cause: sys('ECONNRESET', 'read') }), dead('ECONNRESET')],
    ['a 3xx on an error stays the answer (a redirect policy refusing it)', { message: 'too many redirects', statusCode: 302 }, app('HTTP_302')],
    ["axios's validateStatus refusing a 200: no answer to retry, no dead connection", Object.assign(coded('ERR_BAD_RESPONSE', 'Request failed with status code 200'), { name: 'AxiosError', status: 200 }), unknown('HTTP_200')],
    ['a 200 whose body failed to decode (zlib) is not the connection', Object.assign(coded('Z_DATA_ERROR', 'incorrect header check'), { name: 'AxiosError', status: 200 }), unknown('HTTP_200')],
    ["axios's own timeout: ECONNABORTED with no syscall", Object.assign(coded('ECONNABORTED', 'timeout of 150ms exceeded'), { name: 'AxiosError' }), timeout('ECONNABORTED')],
    ['a socket ECONNABORTED is still a dead connection', sys('ECONNABORTED', 'read'), dead('ECONNABORTED')],
    ["axios's cancellation", Object.assign(coded('ERR_CANCELED', 'canceled'), { name: 'CanceledError' }), cancelled('ERR_CANCELED')],
    ["got's HTTPError: the status on its response", Object.assign(coded('ERR_NON_2XX_3XX_RESPONSE', 'Response code 503 (Service Unavailable)'), { name: 'HTTPError', response: { statusCode: 503 } }), app('HTTP_503')],
    [
      "Node's AbortError wrapping an AbortSignal.timeout reason: a timeout, as fetch says",
      Object.assign(coded('ABORT_ERR', 'The operation was aborted'), { name: 'AbortError', cause: new DOMException('The operation was aborted due to timeout', 'TimeoutError') }),
      timeout('TIMEOUT_ERR'),
    ],
    ["Node's AbortError wrapping a caller's own reason stays a cancellation", Object.assign(coded('ABORT_ERR', 'The operation was aborted'), { name: 'AbortError', cause: new Error('user left') }), cancelled('ABORT_ERR')],
    [
      "Node's AbortError wrapping a sibling's ECONNREFUSED (the app's abort reason) stays a cancellation, never 'not sent'",
      Object.assign(coded('ABORT_ERR', 'The operation was aborted'), { name: 'AbortError', cause: sys('ECONNREFUSED', 'connect') }),
      cancelled('ABORT_ERR'),
    ],
    ['status 99 is not a status', { message: 'x', statusCode: 99 }, unknown(undefined)],
    ['status 600 is not a status', { message: 'x', statusCode: 600 }, unknown(undefined)],
    ['a fractional status is not a status', { message: 'x', statusCode: 503.5 }, unknown(undefined)],
    ['a status as a string is not a status', { message: 'x', statusCode: '503' }, unknown(undefined)],
    ['`status` is read when `statusCode` is not one', { message: 'x', statusCode: 'nope', status: 404 }, app('HTTP_404')],
  ])('%s', (_name, err, want) => expectClassified(err, want));

  it('a refusal is never sent, even beside a dial in an AggregateError', () => {
    expectClassified(new AggregateError([new HostUnavailableError('a:1', 100, 'open'), sys('ECONNREFUSED', 'connect')]), dial('ECONNREFUSED'));
  });
});

describe('classify rules: what is read of an error', () => {
  const anyText = { patterns: [{ match: /^$/, kind: 'connection' as const }] };

  it.each<Row>([
    ['a thrown function is read like an object', Object.assign(() => {}, { code: 'ECONNRESET', syscall: 'read' }), dead('ECONNRESET')],
    ['a thrown function with a cause is walked', Object.assign(() => {}, { cause: sys('ECONNREFUSED', 'connect') }), dial('ECONNREFUSED')],
    ['a code of another type is no code', { message: 'x', code: { errno: 'ECONNRESET' } }, unknown(undefined)],
  ])('%s', (_name, err, want) => expectClassified(err, want));

  it('an error without a message has empty text; a number, null or a boolean has no text at all', () => {
    expectClassified({}, ['connection', false, true, true, undefined], anyText);
    expectClassified({ message: 7 }, ['connection', false, true, true, undefined], anyText);
    for (const v of [42, null, true, Symbol('s'), undefined]) expectClassified(v, unknown(undefined), anyText);
  });

  it('reads all of a text up to 6 KiB, else its first 4 KiB and its last 2 KiB', () => {
    // A marker across offset 4096 is seen only while the text is short enough to be read whole.
    const marker = 'No cluster leader';
    const withMarker = (length: number): Error => {
      const at = 4096 - 5;
      return new Error(`${'a'.repeat(at)}${marker}${'b'.repeat(length - at - marker.length)}`);
    };
    const pattern = { patterns: [{ match: marker, transient: true }] };
    expect(withMarker(6144).message).toHaveLength(6144);
    expect(classify(withMarker(6144), pattern).transient).toBe(true);
    expect(classify(withMarker(6145), pattern).transient).toBe(false);
    // The head and the tail of a long text are both read.
    expect(classify(new Error(`Unexpected response code: 503 ${'x'.repeat(100_000)}`)).code).toBe('HTTP_503');
    expect(classify(new Error(`${'x'.repeat(100_000)} ${marker} ${'y'.repeat(100)}`), pattern).transient).toBe(true);
  });
});

describe('classify rules: remote transport failures told in text (seed 004)', () => {
  it.each<Row>([
    ['an EOF suffix followed by whitespace', new Error('failed to read response: EOF \n'), remote('EOF')],
    // What closes it may follow (an outside review: each was unknown, never retried).
    ['an EOF suffix and a full stop', new Error('upstream: EOF.'), remote('EOF')],
    ['an EOF suffix in quotes', new Error('"upstream: EOF"'), remote('EOF')],
    ['an EOF suffix and a parenthetical', new Error('upstream error: EOF (after 3 attempts)'), remote('EOF')],
    ['an EOF suffix closing a JSON text', new Error('{"error":"read tcp 10.0.0.1:443: EOF"}'), remote('EOF')],
    ['a quoted EOF', new Error('read failed: "EOF"'), remote('EOF')],
    ['an unexpected EOF in brackets', new Error('[read: unexpected EOF]'), remote('EOF')],
    ['two parentheticals are not one', new Error('failed: EOF (a) (b)'), unknown(undefined)],
    ['a parenthetical with one inside is not one', new Error('failed: EOF (a (b))'), unknown(undefined)],
    ['a parenthetical of 81 characters is too long', new Error(`failed: EOF (${'x'.repeat(81)})`), unknown(undefined)],
    ['a parenthetical of 80 characters is read', new Error(`failed: EOF (${'x'.repeat(80)})`), remote('EOF')],
    ['EOF inside a word is no EOF', new Error('failed: EOFS.'), unknown(undefined)],
    ['an EOF after a word, no colon', new Error('got EOF.'), unknown(undefined)],
    ['a 500 whose JSON body axios parsed tells the EOF', { status: 500, message: 'Request failed with status code 500', response: { data: { error: 'read tcp 10.0.0.1:443: EOF' } } }, remote('EOF')],
    ['a 502 whose JSON text carries it mid-object', { statusCode: 502, message: 'Response code 502 (Bad Gateway)', response: { body: '{"message":"Post \\"http://b/v1\\": EOF","code":14}' } }, remote('EOF')],
    ['a grpc details field read as text', { code: 2, details: 'rpc error: EOF', message: 'upstream failed' }, remote('EOF')],
    ['a remote EPIPE spelled by Go', new Error('write tcp 10.0.0.1:4647: write: broken pipe'), remote('EPIPE')],
    // r148: a bare "EOF" was retried, Node's spellings of a reset were not.
    ['a reset spelled by Node, its code lost (new Error(err.message))', new Error('read ECONNRESET'), remote('ECONNRESET')],
    ['a reset relayed as JSON text by a Node server', { status: 502, message: 'Request failed with status code 502', response: { data: { error: 'read ECONNRESET' } } }, remote('ECONNRESET')],
    ["Node's http client's words for a reset", new Error('socket hang up'), remote('ECONNRESET')],
    ['a write to a closed socket, spelled by Node', new Error('write EPIPE'), remote('EPIPE')],
    ['ECONNRESET inside a word is none', new Error('XECONNRESETS'), unknown(undefined)],
    ['EPIPE inside a word is none', new Error('write EPIPES'), unknown(undefined)],
    ['socket hang up inside words is none', new Error('websocket hang ups'), unknown(undefined)],
    ["Node's text on a wrapper gives way to an errno underneath", new Error('socket hang up', { cause: sys('ECONNRESET', 'read') }), dead('ECONNRESET')],
    ['remote text on a wrapper gives way to an errno underneath', new Error('rpc error: EOF', { cause: sys('ECONNRESET', 'read') }), dead('ECONNRESET')],
    ['a status line gives way to an errno underneath', new Error('Unexpected response code: 500 (x)', { cause: sys('ECONNRESET', 'read') }), dead('ECONNRESET')],
    [
      'remote text on an HTTP status error decides, whatever it wraps',
      Object.assign(new Error('rpc error: EOF', { cause: sys('ECONNREFUSED', 'connect') }), { statusCode: 500 }),
      remote('EOF'),
    ],
    ['a status line over an unrecognised cause', new Error('Unexpected response code: 502 (bad gateway)', { cause: coded('HPE_INVALID_CONSTANT') }), app('HTTP_502')],
    ['remote text over an unrecognised cause', new Error('rpc error: EOF', { cause: coded('HPE_INVALID_CONSTANT') }), remote('EOF')],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

describe("factsOf: a 5xx error's text body (axios's response.data, got's response.body)", () => {
  it.each<[string, unknown, string[] | undefined]>([
    ['axios shape, 500', { status: 500, response: { data: 'rpc error: EOF' } }, ['rpc error: EOF']],
    ['got shape, 502', { statusCode: 502, response: { body: 'upstream: EOF' } }, ['upstream: EOF']],
    ['499: not read', { status: 499, response: { data: 'rpc error: EOF' } }, undefined],
    ['no status: not read', { response: { data: 'rpc error: EOF' } }, undefined],
    // Bytes are decoded (were not read: an outside review, axios arraybuffer / got buffer).
    ['a Buffer: decoded', { status: 500, response: { body: Buffer.from('rpc error: EOF') } }, ['rpc error: EOF']],
    ['no response', { status: 500 }, undefined],
    ['a null response', { status: 500, response: null }, undefined],
    ['a string response', { status: 500, response: 'rpc error: EOF' }, undefined],
    // JSON: the text, then each string in it (was: an object not read at all, JSON text only whole).
    ['a JSON text: its strings too', { status: 500, response: { data: ' {"error":"read tcp 10.0.0.1:443: EOF","code":14}' } }, [' {"error":"read tcp 10.0.0.1:443: EOF","code":14}', 'read tcp 10.0.0.1:443: EOF']],
    ['a JSON string literal', { status: 500, response: { body: '"upstream: EOF"' } }, ['"upstream: EOF"', 'upstream: EOF']],
    ['a JSON array, nested', { status: 500, response: { body: '[{"message":["a",{"detail":"b"}]}]' } }, ['[{"message":["a",{"detail":"b"}]}]', 'a']],
    ['text that is not JSON after all', { status: 500, response: { body: '{ not json: EOF' } }, ['{ not json: EOF']],
    ['an object axios parsed', { status: 500, response: { data: { error: 'rpc error: EOF', code: 14, details: { message: 'x' } } } }, ['rpc error: EOF', 'x']],
    ['axios data null: got body read', { status: 500, response: { data: null, body: 'upstream: EOF' } }, ['upstream: EOF']],
    ['an object with no strings', { status: 500, response: { data: { code: 14 } } }, undefined],
    ['a field not among the error fields is not read', { status: 500, response: { data: { trace: 'x: EOF', error: 'no' } } }, ['no']],
    ['every error field, in order', { status: 500, response: { data: Object.fromEntries(['title', 'errors', 'cause', 'reason', 'error_description', 'description', 'details', 'detail', 'msg', 'message', 'error'].map((f) => [f, f])) } }, ['error', 'message', 'msg', 'detail', 'details', 'description', 'error_description', 'reason', 'title', 'cause', 'errors']],
    ['a class instance is not walked', { status: 500, response: { data: Object.assign(new URL('http://x/'), { error: 'EOF' }) } }, undefined],
    ['an object with no prototype', { status: 500, response: { data: Object.assign(Object.create(null) as object, { error: 'EOF' }) } }, ['EOF']],
    ['three levels of objects deep, no further', { status: 500, response: { data: { error: { error: { error: 'three', message: { error: 'four' } } }, message: 'two' } } }, ['three', 'two']],
    ['an array-like length is not trusted past 16', { status: 500, response: { data: { errors: Object.assign(['a', 'b'], { length: 2 }) } } }, ['a', 'b']],
  ])('%s', (_name, err, body) => {
    expect(factsOf(err)?.body).toEqual(body);
  });

  it('reads at most 16 strings of a body, and a JSON text only when whole (6 KiB)', () => {
    const many = Array.from({ length: 40 }, (_, i) => `v${i}`);
    expect(factsOf({ status: 500, response: { data: many } })?.body).toEqual(many.slice(0, 16));
    // Fields in their order (errors last), elements in theirs, 16 in all.
    expect(factsOf({ status: 500, response: { data: { errors: many, message: 'z' } } })?.body).toEqual(['z', ...many.slice(0, 15)]);
    expect(factsOf({ status: 500, response: { data: { errors: many.slice(0, 10), message: 'z', detail: many.slice(20, 30) } } })?.body).toEqual(['z', ...many.slice(20, 30), ...many.slice(0, 5)]);
    const long = JSON.stringify({ error: 'x: EOF', pad: 'p'.repeat(6_200) });
    expect(factsOf({ status: 500, response: { data: long } })?.body).toHaveLength(1);
    const fits = JSON.stringify({ error: 'x: EOF', pad: 'p'.repeat(6_000) });
    expect(fits.length).toBeLessThanOrEqual(6_144);
    expect(factsOf({ status: 500, response: { data: fits } })?.body).toEqual([fits, 'x: EOF']);
  });

  it('16 strings in all, whatever holds them: a field after them is not read, nor an element', () => {
    const fifteen = Array.from({ length: 15 }, (_, i) => `m${i}`);
    expect(factsOf({ status: 500, response: { data: { error: 'a', message: fifteen, detail: 'late' } } })?.body).toEqual(['a', ...fifteen]);
    expect(factsOf({ status: 500, response: { data: { error: 'a', message: [...fifteen, 'late'] } } })?.body).toEqual(['a', ...fifteen]);
    expect(factsOf({ status: 500, response: { data: [['x', 'y'], ...fifteen] } })?.body).toEqual(['x', 'y', ...fifteen.slice(0, 14)]);
  });

  it('a JSON text of exactly 6 KiB is parsed; one character more is not', () => {
    const of = (length: number): string => {
      const head = '{"error":"x: EOF","pad":"';
      return `${head}${'p'.repeat(length - head.length - 2)}"}`;
    };
    expect(of(6_144)).toHaveLength(6_144);
    expect(factsOf({ status: 500, response: { data: of(6_144) } })?.body).toEqual([of(6_144), 'x: EOF']);
    expect(factsOf({ status: 500, response: { data: of(6_145) } })?.body).toHaveLength(1);
  });

  it('an array is read by index, at most 16 of them, however long and whatever it holds', () => {
    let reads = 0;
    const numbers = new Proxy(Array.from({ length: 1_000 }, (_, i) => i), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    expect(factsOf({ status: 500, response: { data: numbers } })?.body).toBeUndefined();
    expect(reads).toBe(16);
    reads = 0;
    const short = new Proxy([1, 2, 3], {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    expect(factsOf({ status: 500, response: { data: short } })?.body).toBeUndefined();
    expect(reads).toBe(3);
  });

  it('a body of a million elements or keys costs what a small one does: its first elements and its error fields are read, never every key', () => {
    const array = Array.from({ length: 1_000_000 }, (_, i) => `s${i}`);
    let keysRead = 0;
    const object = new Proxy(Object.fromEntries(Array.from({ length: 1_000 }, (_, i) => [`k${i}`, 'v'])), {
      ownKeys(target) {
        keysRead++;
        return Reflect.ownKeys(target);
      },
    });
    expect(factsOf({ status: 500, response: { data: array } })?.body).toHaveLength(16);
    expect(factsOf({ status: 500, response: { data: object } })?.body).toBeUndefined();
    expect(keysRead).toBe(0);
  });

  it('a hostile body (a throwing getter, a revoked Proxy) reads as absent where it throws', () => {
    const getter = { error: 'first', get message(): string {
      throw new Error('no');
    }, detail: 'after' };
    expect(factsOf({ status: 500, response: { data: getter } })?.body).toEqual(['first', 'after']);
    const { proxy, revoke } = Proxy.revocable({ error: 'EOF' }, {});
    revoke();
    expect(factsOf({ status: 500, response: { data: proxy } })?.body).toBeUndefined();
    const { proxy: list, revoke: revokeList } = Proxy.revocable(['EOF'], {});
    revokeList();
    expect(factsOf({ status: 500, response: { data: { errors: list, error: 'x' } } })?.body).toEqual(['x']);
  });

  it('a string thrown has no body', () => {
    expect(factsOf('rpc error: EOF')?.body).toBeUndefined();
  });
});

describe('timeoutReasonOf: the AbortSignal reason behind a timeout error', () => {
  const reason = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
  const other = new DOMException('This operation was aborted', 'AbortError');

  it('finds it in fetch\'s, node:http\'s and axios\'s errors', () => {
    expect(timeoutReasonOf(reason)).toBe(reason);
    expect(timeoutReasonOf(Object.assign(new Error('aborted'), { name: 'AbortError', cause: reason }))).toBe(reason);
    expect(timeoutReasonOf(Object.assign(new Error('aborted'), { code: 'ABORT_ERR', cause: reason }))).toBe(reason);
    expect(timeoutReasonOf(Object.assign(new Error('canceled'), { name: 'CanceledError', code: 'ERR_CANCELED', config: { signal: { reason } } }))).toBe(reason);
  });

  it('finds none where the reason is no timeout, or there is none to read', () => {
    for (const err of [
      undefined,
      null,
      'TimeoutError',
      42,
      new Error('plain'),
      Object.assign(new Error('aborted'), { name: 'AbortError', cause: other }),
      Object.assign(new Error('aborted'), { name: 'AbortError' }),
      Object.assign(new Error('aborted'), { code: 'ABORT_ERR', cause: 'TimeoutError' }),
      Object.assign(new Error('canceled'), { code: 'ERR_CANCELED' }),
      Object.assign(new Error('canceled'), { code: 'ERR_CANCELED', config: { signal: { reason: other } } }),
      Object.assign(new Error('canceled'), { code: 'ERR_CANCELED', config: { signal: null } }),
      Object.assign(new Error('other'), { name: 'Error', code: 'ECONNRESET', cause: reason }),
      Object.assign(new Error('other'), { code: 'ERR_OTHER', config: { signal: { reason } } }),
    ]) {
      expect(timeoutReasonOf(err)).toBeUndefined();
    }
  });

  it('never throws on a hostile getter', () => {
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error('boom');
        },
      },
    );
    expect(timeoutReasonOf(hostile)).toBeUndefined();
    expect(timeoutReasonOf(Object.assign(new Error('canceled'), { code: 'ERR_CANCELED', config: hostile }))).toBeUndefined();
  });
});

describe('factsOf: causeName and body are read only where a rule asks', () => {
  const reason = new DOMException('The operation was aborted due to timeout', 'TimeoutError');

  it("axios's CanceledError: the name of its config's signal's reason; no other error reads it", () => {
    expect(factsOf(Object.assign(new Error('canceled'), { name: 'CanceledError', code: 'ERR_CANCELED', config: { signal: { reason } } }))?.causeName).toBe('TimeoutError');
    expect(factsOf(Object.assign(new Error('x'), { code: 'ERR_OTHER', config: { signal: { reason } } }))?.causeName).toBeUndefined();
    expect(factsOf(Object.assign(new Error('reset'), { code: 'ECONNRESET', cause: reason }))?.causeName).toBeUndefined();
    expect(factsOf(Object.assign(new Error('aborted'), { name: 'AbortError', cause: reason }))?.causeName).toBe('TimeoutError');
  });

  it('a response body is read for a 5xx only', () => {
    const withBody = (status: number): unknown => Object.assign(new Error(`Request failed with status code ${status}`), { status, response: { status, data: 'read tcp: EOF' } });
    expect(factsOf(withBody(502))?.body).toBeDefined();
    expect(factsOf(withBody(404))?.body).toBeUndefined();
    expect(factsOf(withBody(499))?.body).toBeUndefined();
  });
});

