/**
 * DialWaiters follows an attempt from its dispatch: one undici hands a connection inside its
 * dispatch (an idle keep-alive connection, the healthy path) never becomes a waiter and costs
 * no context capture; registered and captured before every dispatch, a no-op tracer on
 * `dialguard:dial` cost a healthy GuardedAgent request +11-13 µs of CPU (measured, 16 callers).
 * A dial undici starts inside an attempt's dispatch still runs in that attempt's context (its
 * own dial), and later dials for the queue still go to the oldest waiter no other dial runs for.
 * The flows are driven here as undici drives them; the agent-level cases are in
 * dial-context.test.ts and dial-context-concurrent.test.ts.
 */
import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { DialWaiters } from '../../../src/adapters/undici/dial-waiters.js';
import { dialTrace } from '../../../src/observe/tracing.js';
import { whileTraced } from '../../helpers/tracing.js';

const ORIGIN = 'http://127.0.0.1:8080';
const als = new AsyncLocalStorage<string>();

/** Who a dial started now runs for (the async context's name), and its `ended` callback. */
function dialNow(w: DialWaiters): { ranIn: string | undefined; ended: (() => void) | undefined } {
  let ranIn: string | undefined;
  let ended: (() => void) | undefined;
  w.dial('http:', '127.0.0.1', 8080, (e) => {
    ranIn = als.getStore();
    ended = e;
  });
  return { ranIn, ended };
}

/** AsyncResources made for captured contexts while `body` runs. */
function captures(body: () => void): number {
  let n = 0;
  const hook = createHook({ init: (_id, type) => void (type === 'dialguard.caller' && n++) }).enable();
  try {
    body();
  } finally {
    hook.disable();
  }
  return n;
}

describe('DialWaiters: attempts followed from their dispatch', () => {
  it('an attempt connected inside its dispatch is never a waiter and captures nothing', async () => {
    const w = new DialWaiters();
    await whileTraced(dialTrace, {}, async () => {
      const made = captures(() => {
        for (let i = 0; i < 10; i++) {
          const a = {};
          als.run(`r${i}`, () => {
            expect(w.dispatching(a)).toBe(true);
            w.over(a); // undici's onConnect, inside the dispatch
            w.dispatched(a, ORIGIN);
          });
        }
      });
      expect(made).toBe(0);
      // A later dial finds nobody waiting: it runs where it is started.
      expect(als.run('socket', () => dialNow(w)).ranIn).toBe('socket');
    });
  });

  it('an attempt still waiting when its dispatch returns is a waiter: a dial for the queue runs in its context', async () => {
    const w = new DialWaiters();
    await whileTraced(dialTrace, {}, async () => {
      const a = {};
      const made = captures(() => als.run('a', () => (w.dispatching(a), w.dispatched(a, ORIGIN))));
      expect(made).toBe(1);
      expect(als.run('socket', () => dialNow(w)).ranIn).toBe('a');
      w.over(a);
      expect(als.run('socket', () => dialNow(w)).ranIn).toBe('socket');
    });
  });

  it('dials started inside concurrent dispatches each run for their own attempt (not the oldest waiter\'s)', async () => {
    const w = new DialWaiters();
    await whileTraced(dialTrace, {}, async () => {
      const ran: Array<string | undefined> = [];
      for (const name of ['a', 'b', 'c']) {
        const attempt = {};
        als.run(name, () => {
          w.dispatching(attempt);
          ran.push(dialNow(w).ranIn); // undici dials for it at once (a connection per request)
          w.dispatched(attempt, ORIGIN);
        });
      }
      expect(ran).toEqual(['a', 'b', 'c']);
      // All three have a dial out: one more (a failed dial redone) goes to the oldest.
      expect(als.run('socket', () => dialNow(w)).ranIn).toBe('a');
    });
  });

  it('a dial that ended inside the dispatch leaves its attempt free for the next dial', async () => {
    const w = new DialWaiters();
    await whileTraced(dialTrace, {}, async () => {
      const a = {};
      const b = {};
      als.run('a', () => {
        w.dispatching(a);
        dialNow(w).ended?.(); // failed at once; undici will dial again for its queue
        w.dispatched(a, ORIGIN);
      });
      als.run('b', () => {
        w.dispatching(b);
        const { ranIn, ended } = dialNow(w); // the oldest waiter with no dial out is a
        expect(ranIn).toBe('a');
        w.dispatched(b, ORIGIN);
        ended?.();
      });
      expect(als.run('socket', () => dialNow(w)).ranIn).toBe('a');
    });
  });

  it('nothing is followed while nobody traces dials', () => {
    const w = new DialWaiters();
    const a = {};
    expect(w.dispatching(a)).toBe(false);
    expect(als.run('socket', () => dialNow(w)).ranIn).toBe('socket');
  });
});
