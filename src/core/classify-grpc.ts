/**
 * What a grpc-js `ServiceError` means. A status code alone cannot say: UNAVAILABLE is a refused
 * connect, a dropped connection, a refused stream, or a status the server chose to send. grpc-js
 * writes fixed `details` when it makes a status up itself (read from @grpc/grpc-js 1.14's
 * `subchannel-call`, `picker`, `resolving-call` and `call` modules, and captured from real
 * failures); any other details came from the server, which proves the server alive.
 *
 * @module
 */
import { type Verdict, h2Name, safeGet, streamReset, verdict } from './classify-rules.js';

/** grpc status names by code (grpc's `status.proto`). */
const STATUS = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

/** The grpc status name of `code` (0-16). */
export function grpcStatusName(code: number): string {
  return STATUS[code] ?? String(code);
}

/**
 * A system error code quoted in the details (`read ECONNRESET`, `connect ECONNREFUSED ...`):
 * E and three or more capitals (never `EOF`), or a getaddrinfo `EAI_*` code.
 */
function errnoIn(details: string): string | undefined {
  return /\b(E[A-Z]{3,}|EAI_[A-Z]+)\b/.exec(details)?.[1];
}

/** The transport under the call failed: the connection, not the call, is what died. */
function transportDied(details: string): boolean {
  return (
    details.startsWith('Connection dropped') ||
    details.includes('Session closed with error code') ||
    details.startsWith('Write error:') ||
    details.startsWith('Write failed with error') ||
    /\b(ECONNRESET|EPIPE|ECONNABORTED|ENOTCONN)\b/.test(details)
  );
}

/** No connection was ever made for this call: the picker failed or names did not resolve. */
function neverConnected(details: string): boolean {
  return (
    // pick_first says it plainly; round_robin and weighted_round_robin put their name first.
    /^(?:(?:weighted_)?round_robin: )?No connection established/.test(details) ||
    /failed to connect/i.test(details) ||
    details.startsWith('Name resolution failed') ||
    details.startsWith('Failed to parse DNS address')
  );
}

/** The caller (or grpc-js on the caller's behalf) cancelled the call. */
function cancelledHere(details: string): boolean {
  return (
    details.startsWith('Cancelled on client') ||
    details.startsWith('Cancelled by parent call') ||
    details.startsWith('Discarded in favor of other hedged attempt') ||
    details.startsWith('Channel closed before call started')
  );
}

/**
 * How `details` begin when dialguard ended a grpc call itself (the breaker refused the host, a
 * connect timed out, the connection was found dead). Such a status is only the messenger: its
 * `cause`, a dialguard error, says what happened. Read by its code alone, an UNAVAILABLE with
 * unfamiliar details would pass for a status the server sent.
 */
export const DIALGUARD_DETAILS_PREFIX = 'dialguard: ';

/**
 * grpc statuses by which a server says it read the request and refused it (grpc's 4xx):
 * INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION,
 * OUT_OF_RANGE, UNIMPLEMENTED, UNAUTHENTICATED. Their details never make them transient, as an
 * HTTP 4xx's text does not: `INVALID_ARGUMENT "error unmarshalling request: unexpected EOF"` was
 * read as a relayed EOF and an idempotent call run three times (an outside review).
 */
export const GRPC_REQUEST_REFUSED: ReadonlySet<number> = new Set([3, 5, 6, 7, 9, 11, 12, 16]);

/**
 * Set (true) on a grpc status that provably came from the server: a guarded call sets it on every
 * status that followed the server's headers, or that arrived as a trailers-only response. grpc-js
 * copies a status's own enumerable keys, symbols included, onto the `ServiceError` it hands the
 * caller, so the error carries it too.
 */
export const SERVER_ANSWERED: unique symbol = Symbol.for('dialguard.grpc.serverAnswered');

/**
 * Set (true) on a grpc status that provably did not come from the server: a guarded call sets it
 * on a status grpc-js made while no byte of the server's response had arrived (no headers, no
 * message), and on its own failed connects. Only then may the status's details say that the call
 * was never sent: a server relays its upstream's details verbatim (a gateway passing on "No
 * connection established" after it had sent its headers or a message), and without this mark
 * grpc-js's words and a relay of them cannot be told apart.
 */
export const CLIENT_MADE: unique symbol = Symbol.for('dialguard.grpc.clientMade');

/** Whether the grpc status (or `ServiceError`) `node` carries {@link CLIENT_MADE}. Never throws. */
export function madeByClient(node: unknown): boolean {
  return safeGet(node, CLIENT_MADE) === true;
}

/**
 * Whether the grpc status (or `ServiceError`) `node` provably came from the server: it carries
 * {@link SERVER_ANSWERED}, or its metadata holds a `content-type`. Only an HTTP response carries
 * one (a trailers-only reply's headers); grpc-js makes every status of its own with empty
 * metadata. Never throws.
 */
export function answeredByServer(node: unknown): boolean {
  if (safeGet(node, SERVER_ANSWERED) === true) return true;
  try {
    const values: unknown = (safeGet(node, 'metadata') as { get(key: string): unknown }).get('content-type');
    return Array.isArray(values) && values.length > 0;
  } catch {
    return false; // no metadata, or a hostile or foreign one: it says nothing
  }
}

/**
 * The verdict for a grpc status `code` with `details`. `answered`: the status came from the
 * server (see {@link answeredByServer}); it is then the server's answer whatever its details say:
 * never "not sent", never a dead connection, never a failed dial. (Text a server relayed about
 * its own upstream, `rpc error: EOF`, may still make it transient: see `patternVerdict`.)
 * `clientMade`: grpc-js made it with no response begun (see {@link CLIENT_MADE}); only then do
 * details that say the call never left (no connection, a refused stream) make it "not sent".
 */
export function grpcVerdict(code: number, details: string, answered: boolean, clientMade: boolean): Verdict {
  const name = grpcStatusName(code);
  if (answered) return verdict(code === 0 ? 'unknown' : 'application', name);
  const base = detailsVerdict(code, details, name);
  // Of unknown origin (plain grpc-js), details alone never prove a call unsent: the server may
  // have relayed them after answering (see CLIENT_MADE). The kind, and with it a retry of an
  // idempotent method, stands.
  return base.notSent && !clientMade ? { ...base, notSent: false } : base;
}

/** {@link grpcVerdict} from the details alone, as if grpc-js made the status. */
function detailsVerdict(code: number, details: string, name: string): Verdict {
  // Not final: the cause decides (and without one, nothing is known).
  if (details.startsWith(DIALGUARD_DETAILS_PREFIX)) return verdict('unknown', name, { final: false });
  if (code === 1 || code === 2 || code === 14) {
    // CANCELLED / UNKNOWN / UNAVAILABLE may carry a transport cause (seed 003).
    if (cancelledHere(details)) return verdict('cancelled', name, { notSent: details.startsWith('Channel closed') });
    if (neverConnected(details)) return verdict('dial', errnoIn(details) ?? name);
    if (details.startsWith('Stream refused by server')) return streamReset('REFUSED_STREAM');
    if (/\bETIMEDOUT\b/.test(details)) return verdict('timeout', 'ETIMEDOUT');
    if (transportDied(details)) return verdict('connection', errnoIn(details) ?? name);
  }
  switch (code) {
    case 0:
      return verdict('unknown', name);
    case 1:
      // A RST_STREAM(CANCEL) from the server ends this stream only; any other CANCELLED without
      // a transport cause is a cancellation, never anyone's failure.
      return details === 'Call cancelled' ? streamReset('CANCEL') : verdict('cancelled', name);
    case 2:
      // The stream ended without a status (a stream verdict is not transient).
      if (details === 'No status information received') return verdict('stream', name);
      return verdict('application', name);
    case 4:
      // grpc-js lists where the call was when its deadline passed; without a remote address it
      // never left this process.
      return verdict('timeout', name, {
        notSent: /waiting for (LB pick|name resolution)/i.test(details) && !details.includes('remote_addr='),
      });
    case 7:
      return details.startsWith('Protocol not secure enough') ? streamReset('INADEQUATE_SECURITY') : verdict('application', name);
    case 8:
      // grpc-js's reading of RST_STREAM(ENHANCE_YOUR_CALM): one stream, not the connection.
      return details.startsWith('Bandwidth exhausted or memory limit exceeded') ? streamReset('ENHANCE_YOUR_CALM') : verdict('application', name);
    case 13: {
      const cause = /triggered by internal client error: (.*)/s.exec(details)?.[1];
      if (cause !== undefined) {
        return transportDied(cause) ? verdict('connection', errnoIn(cause) ?? name) : verdict('stream', name);
      }
      const rst = /^Received RST_STREAM with code (\d+)/.exec(details);
      if (rst !== null) return streamReset(h2Name(Number(rst[1])));
      return verdict('application', name);
    }
    default:
      // UNAVAILABLE from an HTTP status (a proxy answered) and every status a server sent.
      return verdict('application', name);
  }
}
