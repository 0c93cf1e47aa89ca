/**
 * A GrpcGuard made per request (an outside review, r130): each guard's channels are its own, so
 * 4 workers making a guard, a client and one call each held 2 792 server connections after 9 s
 * where plain grpc-js clients shared 1, and made 2.7x fewer calls. The guard cannot share what
 * the user made separate; it says so, once, when 100 guards are open at once
 * (`DialguardWarning`, code `DIALGUARD_MANY_GRPC_GUARDS`). Closed guards are not counted.
 */
import { describe, expect, it } from 'vitest';
import { GrpcGuard, MANY_GUARDS } from '../../../src/adapters/grpc/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';

/** Warnings emitted with `code` while `body` runs (and its process.nextTick after). */
async function warningsDuring(code: string, body: () => Promise<void>): Promise<Error[]> {
  const seen: Error[] = [];
  const listen = (w: Error): void => {
    if ((w as Error & { code?: string }).code === code) seen.push(w);
  };
  process.on('warning', listen);
  try {
    await body();
    await new Promise((resolve) => setImmediate(resolve)); // emitWarning delivers on the next tick
  } finally {
    process.off('warning', listen);
  }
  return seen;
}

describe('GrpcGuard: many guards open at once', () => {
  it('150 guards made and closed one after another: no warning', async () => {
    const breaker = new HostBreaker();
    const seen = await warningsDuring(MANY_GUARDS, async () => {
      for (let i = 0; i < 150; i++) await new GrpcGuard({ breaker }).close();
    });
    expect(seen).toEqual([]);
  });

  it('100 open at once: one DialguardWarning naming the fix, once per process', async () => {
    const breaker = new HostBreaker();
    const guards: GrpcGuard[] = [];
    const first = await warningsDuring(MANY_GUARDS, async () => {
      for (let i = 0; i < 99; i++) guards.push(new GrpcGuard({ breaker }));
    });
    expect(first).toEqual([]);
    const seen = await warningsDuring(MANY_GUARDS, async () => {
      for (let i = 0; i < 60; i++) guards.push(new GrpcGuard({ breaker }));
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.name).toBe('DialguardWarning');
    expect(seen[0]!.message).toContain('100 GrpcGuards are open');
    expect(seen[0]!.message).toContain('make one GrpcGuard and share it');
    await Promise.all(guards.map((g) => g.close()));
  });
});
