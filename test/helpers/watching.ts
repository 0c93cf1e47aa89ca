/**
 * What a piece of user code that fails did to the process: the uncaught exceptions, unhandled
 * rejections and warnings seen while a test body ran (and a few turns after, when Node reports them).
 */

/** What {@link watching} saw. */
export interface Seen {
  uncaught: unknown[];
  unhandled: unknown[];
  warnings: string[];
}

/** Runs `body` and reports the uncaught exceptions, unhandled rejections and warnings it caused. */
export async function watching(body: () => Promise<void>): Promise<Seen> {
  const seen: Seen = { uncaught: [], unhandled: [], warnings: [] };
  const onUncaught = (err: unknown): void => void seen.uncaught.push(err);
  const onUnhandled = (err: unknown): void => void seen.unhandled.push(err);
  const onWarning = (w: Error): void => void seen.warnings.push(w.message);
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUnhandled);
  process.on('warning', onWarning);
  try {
    await body();
    // Node reports both (and warnings) on later turns: let them arrive.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUnhandled);
    process.off('warning', onWarning);
  }
  return seen;
}
