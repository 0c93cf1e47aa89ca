/**
 * The chaos run's live view: on a terminal, one status line redrawn in place (progress, calls/s
 * and p99 per lane, open breakers) under the scenario's own log lines; elsewhere (CI, a pipe),
 * the same status as a plain line every few seconds.
 *
 * @module
 */
import { fmt } from '../cli/table.js';
import type { LiveSource } from './scenario.js';

/** Where the view writes, and whether it may redraw. */
export interface LiveViewOptions {
  write: (text: string) => void;
  /** Redraw in place (a TTY). When false, plain lines every `plainEvery` ms. */
  tty: boolean;
  /** Default 250 (TTY) / 3 000 (plain). */
  interval?: number;
}

/** Renders one status line for `source`. */
export function statusLine(name: string, source: LiveSource, width = 24): string {
  const elapsed = source.elapsed();
  const done = Math.min(1, elapsed / source.total);
  const bar = `${'#'.repeat(Math.round(done * width))}${'.'.repeat(width - Math.round(done * width))}`;
  const lane = (label: string, l: LiveSource['lanes']['guarded']): string => {
    const s = l.live();
    return `${label} ${fmt(s.callsPerS)}/s p99 ${Number.isFinite(s.p99) ? `${fmt(s.p99)}ms` : '-'}`;
  };
  return (
    `[${name}] [${bar}] ${elapsed.toFixed(1)}/${source.total}s ${source.phase()} | ` +
    `${lane('unguarded', source.lanes.unguarded)} | ${lane('guarded', source.lanes.guarded)} | open breakers ${source.openBreakers()}`
  );
}

/** Shows one scenario at a time; `log` lines go above the status line. */
export class LiveView {
  readonly #options: LiveViewOptions;
  #timer: ReturnType<typeof setInterval> | undefined;
  #current: { name: string; source: LiveSource } | undefined;
  #drawn = false;

  constructor(options: LiveViewOptions) {
    this.#options = options;
  }

  /** Starts showing `source` (replacing whatever was shown). */
  show(name: string, source: LiveSource): void {
    this.stop();
    this.#current = { name, source };
    const every = this.#options.interval ?? (this.#options.tty ? 250 : 3_000);
    this.#timer = setInterval(() => this.#draw(), every);
    this.#timer.unref();
  }

  /** Prints a line above the status line. */
  log(line: string): void {
    this.#clear();
    this.#options.write(`${line}\n`);
    if (this.#options.tty && this.#current !== undefined) this.#draw();
  }

  /** Stops the status line (and clears it on a terminal). */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#clear();
    this.#current = undefined;
  }

  #draw(): void {
    if (this.#current === undefined) return;
    const line = statusLine(this.#current.name, this.#current.source);
    if (this.#options.tty) {
      const columns = process.stdout.columns ?? 160;
      this.#options.write(`\r\x1b[2K${line.slice(0, columns - 1)}`);
      this.#drawn = true;
    } else {
      this.#options.write(`${line}\n`);
    }
  }

  #clear(): void {
    if (this.#options.tty && this.#drawn) this.#options.write('\r\x1b[2K');
    this.#drawn = false;
  }
}
