/**
 * grpc-js ServiceErrors (src/core/classify-grpc.ts): a status code plus the `details` grpc-js writes
 * when it makes a status up itself, read from @grpc/grpc-js 1.14 (subchannel-call, picker,
 * load-balancer-pick-first / round-robin, resolver-dns, resolving-call, load-balancing-call,
 * retrying-call, internal-channel). Any other details came from the server. Every row states all
 * five answers.
 */
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { CLIENT_MADE, SERVER_ANSWERED, answeredByServer } from '../../src/core/classify-grpc.js';
import { classify } from '../../src/core/classify.js';
import { type Row, type Want, expectClassified, grpcErr } from './classify-table.js';

// Of unknown origin (plain grpc-js, no CLIENT_MADE mark), details never prove a call unsent: a
// server may relay them after answering. See the CLIENT_MADE rows below for the guard's statuses.
const dial = (code: string): Want => ['dial', false, false, true, code];
const dialHere = (code: string): Want => ['dial', true, false, true, code];
const dead = (code: string): Want => ['connection', false, true, true, code];
const app = (code: string): Want => ['application', false, false, false, code];
const cancelled = (code: string, notSent = false): Want => ['cancelled', notSent, false, false, code];
const stream = (code: string | undefined, notSent: boolean, transient: boolean): Want => ['stream', notSent, false, transient, code];
const deadline = (notSent: boolean): Want => ['timeout', notSent, false, true, 'DEADLINE_EXCEEDED'];

describe('classify grpc: statuses grpc-js made up about the transport', () => {
  it.each<Row>([
    ['CANCELLED: the caller cancelled', grpcErr(1, 'Cancelled on client'), cancelled('CANCELLED')],
    ['CANCELLED by a parent call', grpcErr(1, 'Cancelled by parent call'), cancelled('CANCELLED')],
    ['CANCELLED: a hedged attempt that lost', grpcErr(1, 'Discarded in favor of other hedged attempt'), cancelled('CANCELLED')],
    ['UNAVAILABLE: the channel closed before the call started (never sent)', grpcErr(14, 'Channel closed before call started'), cancelled('UNAVAILABLE')],
    // grpc-js's own cancellation texts mean a cancellation whatever status carries them.
    ['UNKNOWN carrying "Cancelled on client"', grpcErr(2, 'Cancelled on client'), cancelled('UNKNOWN')],
    ['UNAVAILABLE carrying "Cancelled by parent call"', grpcErr(14, 'Cancelled by parent call'), cancelled('UNAVAILABLE')],
    ['UNAVAILABLE carrying "Discarded in favor of other hedged attempt"', grpcErr(14, 'Discarded in favor of other hedged attempt'), cancelled('UNAVAILABLE')],
    ['pick_first: no connection', grpcErr(14, 'No connection established'), dial('UNAVAILABLE')],
    [
      'pick_first: no connection, the last error quoted',
      grpcErr(14, 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: '),
      dial('ECONNREFUSED'),
    ],
    ['round_robin: no connection', grpcErr(14, 'round_robin: No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1'), dial('ECONNREFUSED')],
    ['weighted_round_robin: no connection', grpcErr(14, 'weighted_round_robin: No connection established. Last error: null'), dial('UNAVAILABLE')],
    ['a getaddrinfo code quoted', grpcErr(14, 'No connection established. Last error: getaddrinfo EAI_AGAIN nope'), dial('EAI_AGAIN')],
    ['name resolution failed', grpcErr(14, 'Name resolution failed for target dns:nope:50051'), dial('UNAVAILABLE')],
    ['an unparsable DNS target', grpcErr(14, 'Failed to parse DNS address dns:///[::1'), dial('UNAVAILABLE')],
    ['"failed to connect" in any case (grpc-go, C-core)', grpcErr(14, 'Failed to connect to all addresses'), dial('UNAVAILABLE')],
    ['REFUSED_STREAM: never sent', grpcErr(14, 'Stream refused by server'), stream('REFUSED_STREAM', false, true)],
    ['a socket timeout', grpcErr(14, 'read ETIMEDOUT'), ['timeout', false, false, true, 'ETIMEDOUT']],
    ['the connection dropped under the call', grpcErr(14, 'Connection dropped'), dead('UNAVAILABLE')],
    ['a CANCELLED that is really a dropped connection (seed 003)', grpcErr(1, 'Connection dropped'), dead('CANCELLED')],
    ['the session closed with an error', grpcErr(14, 'Session closed with error code 2'), dead('UNAVAILABLE')],
    ['a write error quoting an errno', grpcErr(14, 'Write error: write EPIPE'), dead('EPIPE')],
    ['a write error without one', grpcErr(14, 'Write error: Cannot call write after a stream was destroyed'), dead('UNAVAILABLE')],
    ['a failed write quoting an errno', grpcErr(14, 'Write failed with error read ECONNRESET'), dead('ECONNRESET')],
    ['a failed write without one', grpcErr(14, 'Write failed with error stream closed'), dead('UNAVAILABLE')],
    ['an errno anywhere in UNKNOWN details', grpcErr(2, 'upstream: read ECONNABORTED'), dead('ECONNABORTED')],
    ['EOF is not an errno', grpcErr(14, 'Connection dropped: EOF'), dead('UNAVAILABLE')],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

/** A status the guard marks as grpc-js's own, made with no response begun. */
const here = (code: number, details: string): Error => Object.assign(grpcErr(code, details), { [CLIENT_MADE]: true });

describe('classify grpc: a status marked CLIENT_MADE (the guard saw no response begin) is as its details say', () => {
  it.each<Row>([
    ['no connection', here(14, 'No connection established. Last error: connect ECONNREFUSED 127.0.0.1:1'), dialHere('ECONNREFUSED')],
    ['"failed to connect"', here(14, 'Failed to connect to all addresses'), dialHere('UNAVAILABLE')],
    ['name resolution failed', here(14, 'Name resolution failed for target dns:nope:50051'), dialHere('UNAVAILABLE')],
    ['a refused stream', here(14, 'Stream refused by server'), stream('REFUSED_STREAM', true, true)],
    ['the channel closed before the call started', here(14, 'Channel closed before call started'), cancelled('UNAVAILABLE', true)],
    ['a deadline while waiting for name resolution', here(4, 'Deadline exceeded after 1.001s,waiting for name resolution'), deadline(true)],
    // The mark lets details say what grpc-js's words say, and no more: a server's own words stay its answer.
    ['a server\'s words under the mark', here(14, 'upstream: No connection established'), app('UNAVAILABLE')],
    ['a dropped connection', here(14, 'Connection dropped'), dead('UNAVAILABLE')],
  ])('%s', (_name, err, want) => expectClassified(err, want));

  it('the same details relayed by a server after its headers (no mark) never say "not sent": a retry of a call the server ran would run it again', () => {
    for (const [code, details] of [
      [14, 'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1. Resolution note: '],
      [14, 'Stream refused by server'],
      [13, 'Received RST_STREAM with code 7'],
    ] as const) {
      expect(classify(grpcErr(code, details)).notSent).toBe(false);
      expect(classify(here(code, details)).notSent).toBe(true);
    }
  });
});

describe("classify grpc: grpc-js's fixed texts are prefixes, whatever follows them", () => {
  it.each<Row>([
    ['Cancelled on client', grpcErr(14, 'Cancelled on client (deadline propagation)'), cancelled('UNAVAILABLE')],
    ['Cancelled by parent call', grpcErr(2, 'Cancelled by parent call: parent done'), cancelled('UNKNOWN')],
    ['Discarded in favor of other hedged attempt', grpcErr(2, 'Discarded in favor of other hedged attempt #2'), cancelled('UNKNOWN')],
    ['Channel closed before call started', grpcErr(14, 'Channel closed before call started (shutdown)'), cancelled('UNAVAILABLE')],
    ['No connection established', grpcErr(14, 'No connection established yet'), dial('UNAVAILABLE')],
    ['Failed to parse DNS address', grpcErr(14, 'Failed to parse DNS address x: bad port'), dial('UNAVAILABLE')],
    ['Stream refused by server', grpcErr(14, 'Stream refused by server (code 7)'), stream('REFUSED_STREAM', false, true)],
    ['Connection dropped', grpcErr(14, 'Connection dropped by peer'), dead('UNAVAILABLE')],
    ['Protocol not secure enough', grpcErr(7, 'Protocol not secure enough (TLS 1.2 required)'), stream('INADEQUATE_SECURITY', false, false)],
    ['Bandwidth exhausted or memory limit exceeded', grpcErr(8, 'Bandwidth exhausted or memory limit exceeded (stream 3)'), stream('ENHANCE_YOUR_CALM', false, true)],
    ['Write error:', grpcErr(14, 'Write error: stream destroyed'), dead('UNAVAILABLE')],
    ['Write failed with error', grpcErr(14, 'Write failed with error stream destroyed'), dead('UNAVAILABLE')],
    ['...and only prefixes: text a server put before them is its own', grpcErr(14, 'backend says: Connection dropped'), app('UNAVAILABLE')],
    ['a server that says its write failed', grpcErr(14, 'the Write error: happened upstream'), app('UNAVAILABLE')],
    ['a server that quotes a refused stream', grpcErr(14, 'upstream: Stream refused by server'), app('UNAVAILABLE')],
    ['a server that quotes a DNS parse failure', grpcErr(14, 'upstream: Failed to parse DNS address x'), app('UNAVAILABLE')],
    ['a server that quotes no connection', grpcErr(14, 'upstream: No connection established'), app('UNAVAILABLE')],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

describe('classify grpc: statuses by code', () => {
  it.each<Row>([
    ['CANCELLED from a RST_STREAM(CANCEL): one stream', grpcErr(1, 'Call cancelled'), stream('CANCEL', false, true)],
    ['CANCELLED sent by a server', grpcErr(1, 'context canceled'), cancelled('CANCELLED')],
    ['UNKNOWN: the stream ended without a status', grpcErr(2, 'No status information received'), stream('UNKNOWN', false, false)],
    ['UNKNOWN sent by a server', grpcErr(2, 'boom'), app('UNKNOWN')],
    ['DEADLINE_EXCEEDED waiting for name resolution: never sent', grpcErr(4, 'Deadline exceeded after 1.001s,waiting for name resolution'), deadline(false)],
    ['DEADLINE_EXCEEDED waiting for an LB pick: never sent', grpcErr(4, 'Deadline exceeded after 1.001s,name resolution: 0.001s,Waiting for LB pick'), deadline(false)],
    [
      'DEADLINE_EXCEEDED on a stream with a remote address: maybe sent',
      grpcErr(4, 'Deadline exceeded after 1.001s,name resolution: 0.001s,LB pick: 0.000s,remote_addr=127.0.0.1:50051'),
      deadline(false),
    ],
    ['DEADLINE_EXCEEDED that says where it waited and where it went: maybe sent', grpcErr(4, 'Deadline exceeded after 1s,waiting for LB pick,remote_addr=10.0.0.1:1'), deadline(false)],
    ['DEADLINE_EXCEEDED with no detail: maybe sent', grpcErr(4, 'Deadline exceeded'), deadline(false)],
    ['PERMISSION_DENIED from RST_STREAM(INADEQUATE_SECURITY)', grpcErr(7, 'Protocol not secure enough'), stream('INADEQUATE_SECURITY', false, false)],
    ['PERMISSION_DENIED sent by a server', grpcErr(7, 'not allowed'), app('PERMISSION_DENIED')],
    ['RESOURCE_EXHAUSTED from RST_STREAM(ENHANCE_YOUR_CALM)', grpcErr(8, 'Bandwidth exhausted or memory limit exceeded'), stream('ENHANCE_YOUR_CALM', false, true)],
    ['RESOURCE_EXHAUSTED sent by a server', grpcErr(8, 'quota exceeded'), app('RESOURCE_EXHAUSTED')],
    // Only CANCELLED, UNKNOWN and UNAVAILABLE carry grpc-js's transport texts; any other status is the server's.
    ['RESOURCE_EXHAUSTED whose text a server wrote about connecting', grpcErr(8, 'failed to connect to backend'), app('RESOURCE_EXHAUSTED')],
    ['INTERNAL whose text a server wrote about a dropped connection', grpcErr(13, 'Connection dropped'), app('INTERNAL')],
    [
      'INTERNAL: a RST_STREAM our client sent for a transport error',
      grpcErr(13, 'Received RST_STREAM with code 2 triggered by internal client error: read ECONNRESET'),
      dead('ECONNRESET'),
    ],
    [
      'INTERNAL: a RST_STREAM our client sent for a session error',
      grpcErr(13, 'Received RST_STREAM with code 2 triggered by internal client error: Session closed with error code 2'),
      dead('INTERNAL'),
    ],
    [
      'INTERNAL: a RST_STREAM our client sent for a protocol error',
      grpcErr(13, 'Received RST_STREAM with code 2 triggered by internal client error: Protocol error'),
      stream('INTERNAL', false, false),
    ],
    ['INTERNAL: the server reset the stream', grpcErr(13, 'Received RST_STREAM with code 2 (Internal server error)'), stream('INTERNAL_ERROR', false, true)],
    ['INTERNAL: a two-digit reset code', grpcErr(13, 'Received RST_STREAM with code 11'), stream('ENHANCE_YOUR_CALM', false, true)],
    ['INTERNAL: a reset without a status', grpcErr(13, 'Received RST_STREAM with code 1 (Call ended without gRPC status)'), stream('PROTOCOL_ERROR', false, false)],
    ['INTERNAL: a reset code beyond the RFC', grpcErr(13, 'Received RST_STREAM with code 99'), stream(undefined, false, false)],
    ['INTERNAL: reset text a server quoted', grpcErr(13, 'upstream: Received RST_STREAM with code 2'), app('INTERNAL')],
    ['INTERNAL sent by a server', grpcErr(13, 'oops'), app('INTERNAL')],
    ['UNAUTHENTICATED, the last status', grpcErr(16, 'bad token'), app('UNAUTHENTICATED')],
    ['OK is no failure', grpcErr(0, ''), ['unknown', false, false, false, 'OK']],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

describe('classify grpc: only a grpc status is read as one', () => {
  const none: Want = ['unknown', false, false, false, undefined];
  it.each<Row>([
    ['code 17', grpcErr(17, 'Connection dropped'), none],
    ['code -1', grpcErr(-1, 'Connection dropped'), none],
    ['a fractional code', grpcErr(14.5, 'Connection dropped'), none],
    ['a numeric code without details', Object.assign(new Error('Connection dropped'), { code: 14 }), none],
    ['a status code as a string', Object.assign(new Error('x'), { code: '14', details: 'Connection dropped' }), ['unknown', false, false, false, '14']],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});

/** A ServiceError as grpc-js builds it from a trailers-only reply: the response headers in its metadata. */
function trailersOnly(code: number, details: string): Error {
  const metadata = new grpc.Metadata();
  metadata.set('content-type', 'application/grpc+proto');
  return Object.assign(grpcErr(code, details), { metadata });
}

/** A ServiceError from a guarded call that saw the server answer (the brand copied from its status). */
function branded(code: number, details: string): Error {
  return Object.assign(grpcErr(code, details), { [SERVER_ANSWERED]: true });
}

describe('classify grpc: a status the server sent is its answer, whatever its details say (issue 18 break 1)', () => {
  it.each<Row>([
    ['"Failed to connect to database", trailers-only', trailersOnly(14, 'Failed to connect to database'), app('UNAVAILABLE')],
    ['grpc-js\'s own "No connection established" forwarded', trailersOnly(14, 'No connection established. Last error: connect ECONNREFUSED 10.0.0.1:1'), app('UNAVAILABLE')],
    ['"read ECONNRESET"', trailersOnly(14, 'read ECONNRESET'), app('UNAVAILABLE')],
    ['"Connection dropped"', branded(14, 'Connection dropped'), app('UNAVAILABLE')],
    ['"Stream refused by server"', branded(14, 'Stream refused by server'), app('UNAVAILABLE')],
    ['"Channel closed before call started"', branded(14, 'Channel closed before call started'), app('UNAVAILABLE')],
    ['"Cancelled on client"', branded(1, 'Cancelled on client'), app('CANCELLED')],
    ['DEADLINE_EXCEEDED "waiting for LB pick"', branded(4, 'Deadline exceeded: waiting for LB pick'), app('DEADLINE_EXCEEDED')],
    ['INTERNAL quoting a client reset', branded(13, 'Received RST_STREAM with code 2 triggered by internal client error: read ECONNRESET'), app('INTERNAL')],
    ['"dialguard: " text a server forwarded', branded(14, 'dialguard: connection #1 to x is gone'), app('UNAVAILABLE')],
    ['OK from the server is no failure', branded(0, ''), ['unknown', false, false, false, 'OK']],
    ['an application status stays one', trailersOnly(5, 'no such key'), app('NOT_FOUND')],
    // Text a server relayed about its own upstream still reads as such (seed 004): maybe sent, alive.
    ['"rpc error: EOF"', trailersOnly(14, 'rpc error: EOF'), ['connection', false, false, true, 'EOF']],
    ['INTERNAL "rpc error: EOF" (a relay of unknown kind): still the upstream\'s EOF', trailersOnly(13, 'rpc error: EOF'), ['connection', false, false, true, 'EOF']],
    // gRPC-Go's own spelling of a status (an outside review: a relay of it was never retried).
    ['"rpc error: code = Unavailable desc = EOF"', trailersOnly(14, 'rpc error: code = Unavailable desc = EOF'), ['connection', false, false, true, 'EOF']],
    ['UNKNOWN "rpc error: code = Unavailable desc = transport is closing"', trailersOnly(2, 'rpc error: code = Unavailable desc = transport is closing'), ['connection', false, false, true, 'EOF']],
    // A request the server read and refused stays refused whatever its text (grpc's 4xx, as an
    // HTTP 4xx's text is never read): an idempotent call was run 3 times (an outside review).
    ['INVALID_ARGUMENT "error unmarshalling request: unexpected EOF"', trailersOnly(3, 'grpc: error unmarshalling request: unexpected EOF'), app('INVALID_ARGUMENT')],
    ['INVALID_ARGUMENT "invalid JSON body: EOF"', branded(3, 'invalid JSON body: EOF'), app('INVALID_ARGUMENT')],
    ['FAILED_PRECONDITION "rpc error: EOF"', trailersOnly(9, 'rpc error: EOF'), app('FAILED_PRECONDITION')],
    ['UNAUTHENTICATED "token read: unexpected EOF"', trailersOnly(16, 'token read: unexpected EOF'), app('UNAUTHENTICATED')],
  ])('%s', (_name, err, want) => expectClassified(err, want));

  it('answeredByServer: the brand, or a content-type in the metadata; never throws', () => {
    expect(answeredByServer(trailersOnly(14, 'x'))).toBe(true);
    expect(answeredByServer(branded(14, 'x'))).toBe(true);
    expect(answeredByServer(grpcErr(14, 'x'))).toBe(false);
    expect(answeredByServer({ code: 14, details: 'x', metadata: new grpc.Metadata() })).toBe(false);
    const hostile = {
      metadata: {
        get: () => {
          throw new Error('no');
        },
      },
    };
    expect(answeredByServer(hostile)).toBe(false);
    expect(answeredByServer({ metadata: { get: () => 'application/grpc' } })).toBe(false);
    expect(answeredByServer(null)).toBe(false);
  });
});
