/**
 * Helpers for the table-driven classify tests: every row states all five answers (kind, notSent,
 * connectionDead, transient, code), so a rule that changes any one of them fails a row.
 */
import { expect } from 'vitest';
import { type ClassifyOptions, type FailureKind, classify } from '../../src/core/classify.js';

/** kind, notSent, connectionDead, transient, code. */
export type Want = readonly [kind: FailureKind, notSent: boolean, connectionDead: boolean, transient: boolean, code: string | undefined];

/** A table row: a name, the thrown value, what classify must say. */
export type Row = readonly [name: string, err: unknown, want: Want];

export function expectClassified(err: unknown, want: Want, options?: ClassifyOptions): void {
  const c = classify(err, options);
  const [kind, notSent, connectionDead, transient, code] = want;
  expect({ kind: c.kind, notSent: c.notSent, connectionDead: c.connectionDead, transient: c.transient, code: c.code }).toEqual({
    kind,
    notSent,
    connectionDead,
    transient,
    code,
  });
}

/** A Node system error: `code`, optional `syscall`, and a message in Node's style. */
export function sys(code: string, syscall?: string, message = `${syscall ?? 'x'} ${code}`): Error {
  return Object.assign(new Error(message), { code, ...(syscall === undefined ? {} : { syscall }) });
}

/** An error with a string `code` and any other fields (undici's, node:http2's, dialguard's shapes). */
export function coded(code: string, message: string = code, more: object = {}): Error {
  return Object.assign(new Error(message), { code, ...more });
}

/** A grpc-js ServiceError: numeric `code`, `details`, metadata, and grpc-js's message. */
export function grpcErr(code: number, details: string, message = `${code} STATUS: ${details}`): Error {
  return Object.assign(new Error(message), { code, details, metadata: {} });
}
