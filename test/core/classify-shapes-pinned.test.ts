/**
 * The exact shapes the client-error rules read (axios's, got's, Node's AbortError, grpc-js's
 * statuses under the guard's CLIENT_MADE mark), each next to the near miss it must not take.
 */
import { describe, it } from 'vitest';
import { CLIENT_MADE } from '../../src/core/classify-grpc.js';
import { type Row, type Want, coded, expectClassified, grpcErr, sys } from './classify-table.js';

const dead = (code: string | undefined): Want => ['connection', false, true, true, code];
const timeout = (code: string | undefined): Want => ['timeout', false, false, true, code];
const cancelled = (code: string | undefined, notSent = false): Want => ['cancelled', notSent, false, false, code];
const app = (code: string | undefined): Want => ['application', false, false, false, code];
const unknown = (code: string | undefined): Want => ['unknown', false, false, false, code];
const named = (name: string, code: string, message: string, more: object = {}): Error => Object.assign(coded(code, message), { name }, more);
const here = (code: number, details: string): Error => Object.assign(grpcErr(code, details), { [CLIENT_MADE]: true });
const timeoutReason = (): Error => new DOMException('The operation was aborted due to timeout', 'TimeoutError');

describe('classify: client error shapes, and their near misses', () => {
  it.each<Row>([
    // got's HTTPError: its response's status, for its code only, and a status of its own wins.
    ["got's HTTPError", named('HTTPError', 'ERR_NON_2XX_3XX_RESPONSE', 'Response code 503', { response: { statusCode: 503 } }), app('HTTP_503')],
    ['another error with a response: its response is not read', named('Error', 'ERR_OTHER', 'x', { response: { statusCode: 503 } }), unknown('ERR_OTHER')],
    ['a status of its own wins over its response', named('HTTPError', 'ERR_NON_2XX_3XX_RESPONSE', 'x', { statusCode: 429, response: { statusCode: 503 } }), app('HTTP_429')],
    ['a response status out of range is none', named('HTTPError', 'ERR_NON_2XX_3XX_RESPONSE', 'x', { response: { statusCode: 700 } }), unknown('ERR_NON_2XX_3XX_RESPONSE')],
    // Node's AbortError: a TimeoutError reason makes it a timeout, by name or by code.
    ['AbortError by name, a TimeoutError reason', named('AbortError', 'X', 'aborted', { cause: timeoutReason() }), timeout('TIMEOUT_ERR')],
    ['ABORT_ERR by code, a TimeoutError reason', named('Error', 'ABORT_ERR', 'aborted', { cause: timeoutReason() }), timeout('TIMEOUT_ERR')],
    ['a TimeoutError cause under another error is that error\'s business', named('Error', 'EOTHER', 'x', { cause: timeoutReason() }), timeout('TIMEOUT_ERR')],
    // axios's own timeout: ECONNABORTED from axios with no syscall; a socket's stays a dead connection.
    ["axios's timeout", named('AxiosError', 'ECONNABORTED', 'timeout of 150ms exceeded'), timeout('ECONNABORTED')],
    ['ECONNABORTED from axios with a syscall', named('AxiosError', 'ECONNABORTED', 'read ECONNABORTED', { syscall: 'read' }), dead('ECONNABORTED')],
    ['ECONNABORTED from elsewhere, no syscall', named('Error', 'ECONNABORTED', 'aborted'), dead('ECONNABORTED')],
    // axios's cancellation: its code and its name.
    ["axios's CanceledError", named('CanceledError', 'ERR_CANCELED', 'canceled'), cancelled('ERR_CANCELED')],
    ['ERR_CANCELED under another name', named('Error', 'ERR_CANCELED', 'canceled'), unknown('ERR_CANCELED')],
    ['a CanceledError with another code', named('CanceledError', 'ERR_OTHER', 'canceled'), unknown('ERR_OTHER')],
    // axios's body cut after a 200: its code, its name and its message.
    ['axios: stream has been aborted after a 200', named('AxiosError', 'ERR_BAD_RESPONSE', 'stream has been aborted', { status: 200 }), dead('ERR_BAD_RESPONSE')],
    ['the same words from another error', named('Error', 'ERR_BAD_RESPONSE', 'stream has been aborted', { status: 200 }), unknown('HTTP_200')],
    ['the same words under another code', named('AxiosError', 'ERR_OTHER', 'stream has been aborted', { status: 200 }), unknown('HTTP_200')],
    ['a 300 on an error is the answer', { message: 'x', statusCode: 300 }, app('HTTP_300')],
    ['a 299 on an error is not', { message: 'x', statusCode: 299 }, unknown('HTTP_299')],
    // undici's UND_ERR_SOCKET: a cause that says more speaks (a TLS alert: the handshake refused).
    ['UND_ERR_SOCKET caused by a TLS alert', coded('UND_ERR_SOCKET', 'other side closed', { cause: sys('ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE') }), ['dial', true, false, false, 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE']],
    // grpc statuses the guard marked as grpc-js's own.
    ['CLIENT_MADE: cancelled on the client is not "not sent"', here(1, 'Cancelled on client'), cancelled('CANCELLED')],
    ['CLIENT_MADE: a deadline waiting for an LB pick never left', here(4, 'Deadline exceeded after 1.001s,name resolution: 0.001s,Waiting for LB pick'), ['timeout', true, false, true, 'DEADLINE_EXCEEDED']],
    ['CLIENT_MADE: a deadline with a remote address had left', here(4, 'Deadline exceeded after 1.001s,Waiting for LB pick,remote_addr=127.0.0.1:1'), ['timeout', false, false, true, 'DEADLINE_EXCEEDED']],
    ['CLIENT_MADE: a deadline elsewhere had left', here(4, 'Deadline exceeded after 1.001s,remote_addr=127.0.0.1:1'), ['timeout', false, false, true, 'DEADLINE_EXCEEDED']],
  ])('%s', (_name, err, want) => expectClassified(err, want));
});
