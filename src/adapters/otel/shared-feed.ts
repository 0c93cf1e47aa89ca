/**
 * One feed per key (a meter, a tracer) however often a caller asks for it: each asker gets a stop
 * of its own, and the feed stops with the last. Two modules that each instrumented the global
 * provider counted every event twice, and two `traceSpans()` made every span twice.
 *
 * @internal
 * @module
 */
import { type Unsubscribe, unsubscriber } from '../../core/events.js';

/** The feeds started, per key, with how many askers hold each. */
export class SharedFeeds<K extends object> {
  readonly #fed = new WeakMap<K, { holders: number; stop: () => void }>();

  /** Holds `key`'s feed (started with `start` for its first holder); returns this holder's stop. */
  hold(key: K, start: (key: K) => () => void): Unsubscribe {
    let feed = this.#fed.get(key);
    if (feed === undefined) {
      feed = { holders: 0, stop: start(key) };
      this.#fed.set(key, feed);
    }
    const held = feed;
    held.holders++;
    let stopped = false;
    return unsubscriber(() => {
      if (stopped) return;
      stopped = true;
      if (--held.holders > 0) return;
      this.#fed.delete(key);
      held.stop();
    });
  }
}
