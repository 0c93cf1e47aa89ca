/** Socket helpers the guard and fault-peer tests share. */
import net from 'node:net';
import { HostBreaker } from '../../src/guard/host-breaker.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

/** What a raw connect saw. */
export type Outcome = { connected: boolean; error?: string; data?: string; closed?: boolean };

/** Raw net.connect, bounded by `ms`, reporting what happened (no dialguard involved). */
export function probe(host: string, port: number, ms: number, send?: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const out: Outcome = { connected: false };
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(out);
    };
    const timer = setTimeout(done, ms);
    socket.on('connect', () => {
      out.connected = true;
      if (send !== undefined) socket.write(send);
    });
    socket.on('data', (d) => {
      out.data = (out.data ?? '') + String(d);
      if (out.data === send) done();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      out.error = e.code;
      done();
    });
    socket.on('end', () => {
      out.closed = true;
    });
  });
}

/** How long a connect took to settle, and its error if it failed (a socket it got is destroyed). */
export async function elapsed(p: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const t0 = performance.now();
  const error = await p.then(
    (s) => {
      (s as net.Socket).destroy();
      return undefined;
    },
    (e: unknown) => e,
  );
  return { ms: performance.now() - t0, error };
}

/** A breaker on a manual clock: its windows move only when the test says so. */
export function breakerOnManualClock(threshold = 3, openDuration = 30_000): { clock: ManualClock; breaker: HostBreaker } {
  const clock = new ManualClock();
  // minOutage 0: the count alone trips, so a test's few quick dials can open a host.
  return { clock, breaker: new HostBreaker({ clock, failureThreshold: threshold, minOutage: 0, openDuration }) };
}
