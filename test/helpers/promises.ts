/**
 * Counting the promises a call makes, independent of the machine's speed: a promise hook
 * (`async_hooks`) installed only while the counted code runs.
 */
import { createHook } from 'node:async_hooks';

/** Promises created while `fn` runs synchronously (a call's own, before anything settles). */
export function promisesMadeBy(fn: () => void): number {
  let made = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') made++;
    },
  }).enable();
  try {
    fn();
  } finally {
    hook.disable();
  }
  return made;
}

/** Promises created from `fn`'s start until the promise it returns settles, by anyone. */
export async function promisesMadeUntilSettled(fn: () => Promise<unknown>): Promise<number> {
  let made = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE') made++;
    },
  }).enable();
  try {
    await fn();
  } finally {
    hook.disable();
  }
  return made;
}
