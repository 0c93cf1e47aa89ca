/**
 * Shared by the per-address tests (connect, the undici connector, Http2Client): dials counted per
 * breaker key from the public diagnostics channel, and a lookup that answers a name with a list.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type net from 'node:net';
import { afterEach, beforeEach } from 'vitest';

/**
 * Dials settled per breaker key (`dialguard:dial:settled`), emptied before each test of the file
 * that calls this (once, at its top level).
 */
export function dialsPerKey(): Map<string, number> {
  const dials = new Map<string, number>();
  const onSettled = (payload: unknown): void => {
    const { host } = payload as { host: string };
    dials.set(host, (dials.get(host) ?? 0) + 1);
  };
  beforeEach(() => {
    dials.clear();
    diagnosticsChannel.subscribe('dialguard:dial:settled', onSettled);
  });
  afterEach(() => {
    diagnosticsChannel.unsubscribe('dialguard:dial:settled', onSettled);
  });
  return dials;
}

/** A lookup answering any name with `addresses` (all: true), counting its calls. */
export function lookupTo(addresses: string[]): { lookup: net.LookupFunction; calls: () => number } {
  let calls = 0;
  const lookup = ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    calls++;
    const list = addresses.map((address) => ({ address, family: 4 }));
    queueMicrotask(() => (options.all ? callback(null, list) : callback(null, list[0]!.address, 4)));
  }) as unknown as net.LookupFunction;
  return { lookup, calls: () => calls };
}
