/**
 * Logs what the guard does, and only when something changes: a host opened or closed, a probe
 * lost, a connection found dead, the retry budget running dry. Never one line per refusal or per
 * request, so a dead host cannot turn into a log flood (seed 000).
 *
 * @module
 */
import { type Unsubscribe, unsubscriber } from '../core/events.js';
import { containAnswer } from '../core/warn-once.js';
import { MAX_DURATION, checkDuration, checkFunction, opt, thrownText } from '../core/validate.js';
import { subscribe } from './channels.js';

/** A pino-compatible logger: `(fields, message)`. */
export interface StateLogger {
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
}

/** Options of {@link logStateChanges}. */
export interface LogStateChangesOptions {
  /**
   * The retry budget running dry is reported at most once per this many ms, with the number of
   * refused retries since the last line. Default 60 000: an outage gets a line a minute, not one
   * per refused retry.
   */
  budgetInterval?: number;
  /**
   * A host that stays down reopens after every failed probe (each window, from ~1 s): its
   * `reopened` lines are written at most once per this many ms per host, with the number of
   * reopens since its last line (`reopens`). Default 60 000: one refusing host wrote a line every
   * ~300 ms, ~100 in its first 30 s (an outside review). Its first `opened` and its `closed` are
   * always written.
   */
  reopenInterval?: number;
  /** Clock for the budget and reopen intervals, ms. Default `performance.now`. */
  now?: () => number;
}

/** Hosts whose reopen lines are throttled, at most; past it the table starts over (a line more each). */
const MAX_THROTTLED_HOSTS = 4_096;

/**
 * Sends every dialguard state change in this process to `logger`; returns the function that stops.
 *
 * - warn `host unreachable: no longer dialling it` { host, failures, openForMs, reopened, reopens? }
 *   (a reopen at most once per `reopenInterval` per host, `reopens` counting those since its last line)
 * - info `host accepting connections again: dialling resumed` { host, openedForMs }
 * - warn `probe dial went unreported: allowing another` { host, probeTimeoutMs }
 * - warn `connection dead: released the requests riding it` { target, connectionId, released }
 * - warn `retry budget exhausted: retries refused` { refused, sinceMs } (at most once per interval;
 *   refusals held back are written when the interval ends, and when it stops)
 */
export function logStateChanges(logger: StateLogger, options: LogStateChangesOptions = {}): Unsubscribe {
  checkFunction('logger.warn', logger?.warn);
  checkFunction('logger.info', logger?.info);
  const interval = checkDuration('budgetInterval', opt(options.budgetInterval, 60_000));
  const reopenInterval = checkDuration('reopenInterval', opt(options.reopenInterval, 60_000));
  const now = checkFunction<() => number>('now', opt(options.now, () => performance.now()));
  // A logger's answer is watched too: an async one that rejects is a warning, as a throw is.
  const safe = (fn: () => unknown): void => {
    try {
      containAnswer('the logger (or its clock) threw', logger, fn());
    } catch (err) {
      process.emitWarning(`dialguard: the logger (or its clock) threw: ${thrownText(err)}`);
    }
  };
  let refused = 0;
  let lastBudgetLine = Number.NEGATIVE_INFINITY;
  // Per host still down: when its last `opened` line was written, and the reopens held back since.
  const reopens = new Map<string, { at: number; held: number }>();
  const stops = [
    subscribe('dialguard:breaker:opened', (e) =>
      safe(() => {
        const fields: Record<string, unknown> = { host: e.host, failures: e.failures, openForMs: Math.round(e.openFor), reopened: e.reopened };
        const t = now();
        const seen = reopens.get(e.host);
        if (e.reopened && seen !== undefined) {
          if (t - seen.at < reopenInterval) {
            seen.held++;
            return;
          }
          fields.reopens = seen.held + 1;
        }
        if (seen === undefined && reopens.size >= MAX_THROTTLED_HOSTS) reopens.clear();
        reopens.set(e.host, { at: t, held: 0 });
        return logger.warn(fields, 'dialguard: host unreachable: no longer dialling it');
      }),
    ),
    subscribe('dialguard:breaker:closed', (e) =>
      safe(() => {
        reopens.delete(e.host);
        return logger.info({ host: e.host, openedForMs: Math.round(e.openedFor) }, 'dialguard: host accepting connections again: dialling resumed');
      }),
    ),
    subscribe('dialguard:breaker:probe-expired', (e) =>
      safe(() => logger.warn({ host: e.host, probeTimeoutMs: e.probeTimeout }, 'dialguard: probe dial went unreported: allowing another')),
    ),
    subscribe('dialguard:pool:gone', (e) =>
      safe(() =>
        logger.warn({ target: e.target, connectionId: e.id, released: e.leases }, 'dialguard: connection dead: released the requests riding it'),
      ),
    ),
    subscribe('dialguard:retry:budget-exhausted', () =>
      safe(() => {
        const t = now(); // the caller's clock: guarded like the logger (a refusal it cannot time is not counted)
        refused++;
        if (t - lastBudgetLine >= interval) return budgetLine(t);
        // Held back: written when the interval is over, if no refusal comes to write it first
        // (the count of a burst's tail was never written, or only with the next burst's; an
        // outside review: 60 refusals, one line saying 1).
        if (trailing === undefined) {
          trailing = setTimeout(() => {
            trailing = undefined;
            if (refused > 0) safe(() => budgetLine(now()));
          }, Math.min(MAX_DURATION, Math.max(0, lastBudgetLine + interval - t)));
          trailing.unref();
        }
        return undefined;
      }),
    ),
  ];
  let trailing: ReturnType<typeof setTimeout> | undefined;
  const budgetLine = (t: number): unknown => {
    const sinceMs = Number.isFinite(lastBudgetLine) ? Math.round(t - lastBudgetLine) : 0;
    lastBudgetLine = t;
    const count = refused;
    refused = 0;
    return logger.warn({ refused: count, sinceMs }, 'dialguard: retry budget exhausted: retries refused');
  };
  return unsubscriber(() => {
    for (const stop of stops) stop();
    if (trailing !== undefined) clearTimeout(trailing);
    trailing = undefined;
    if (refused > 0) safe(() => budgetLine(now())); // what was held back is not lost with the logger
  });
}
