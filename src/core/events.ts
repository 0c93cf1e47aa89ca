/**
 * State-change events. Each component owns an {@link EventHub}; an event reaches its direct
 * listeners and the `node:diagnostics_channel` named `dialguard:<component>:<event>`. Either
 * costs nothing when nobody listens. Events are for state changes only (a breaker opening, a
 * connection closing), never one per request or per refusal, so a dead host cannot flood a log.
 *
 * @module
 */
import { containAnswer, warnOnce } from './warn-once.js';
import diagnosticsChannel from 'node:diagnostics_channel';

/** Receives one event's payload. */
export type Listener<T> = (payload: T) => void;

/**
 * Stops a listener; calling it twice is harmless. Also a `Disposable`, so `using` ends it with
 * its scope: `using stop = breaker.on('opened', log);`.
 */
export type Unsubscribe = (() => void) & Disposable;

/** Makes `stop` an {@link Unsubscribe}: callable, and disposable with `using`. */
export function unsubscriber(stop: () => void): Unsubscribe {
  return Object.assign(stop, { [Symbol.dispose]: stop });
}

const channels = new Map<string, diagnosticsChannel.Channel>();

/** The diagnostics channel for `dialguard:<component>:<event>`, created once. */
export function channelFor(name: string): diagnosticsChannel.Channel {
  let ch = channels.get(name);
  if (ch === undefined) {
    ch = diagnosticsChannel.channel(name);
    channels.set(name, ch);
  }
  return ch;
}

/**
 * Typed events for one component. A listener that throws, or returns a promise that rejects (an
 * `async` one), is isolated: its first error becomes a process
 * warning (once per listener, so a per-call event cannot flood the log) and never unwinds the state machine that emitted. (A subscriber added with
 * `node:diagnostics_channel` directly is outside our reach: Node rethrows its error as an uncaught
 * exception. `subscribe()` in observe/channels isolates it like a listener here.)
 */
export class EventHub<Events extends { [K in keyof Events]: object }> {
  readonly #prefix: string;
  readonly #listeners = new Map<keyof Events, Set<Listener<never>>>();
  /**
   * Each event's channel, looked up once: `active()` runs per call, and building the channel's
   * name to look it up again cost more than everything else it does (~0.7 µs, measured).
   */
  readonly #channels = new Map<keyof Events, diagnosticsChannel.Channel>();

  /** @param component - names the diagnostics channels: `dialguard:<component>:<event>`. */
  constructor(component: string) {
    this.#prefix = `dialguard:${component}:`;
  }

  /** Calls `listener` with every `event`; returns the function that stops it. */
  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): Unsubscribe {
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener as Listener<never>);
    return unsubscriber(() => {
      set.delete(listener as Listener<never>);
    });
  }

  /**
   * Whether anyone would hear `event` (a listener or a channel subscriber). Check it before
   * building the payload of an event that fires per call, so nobody listening costs nothing.
   */
  active<K extends keyof Events>(event: K): boolean {
    const set = this.#listeners.get(event);
    return (set !== undefined && set.size > 0) || this.#channel(event).hasSubscribers;
  }

  #channel(event: keyof Events): diagnosticsChannel.Channel {
    let ch = this.#channels.get(event);
    if (ch === undefined) {
      ch = channelFor(this.#prefix + String(event));
      this.#channels.set(event, ch);
    }
    return ch;
  }

  /** Delivers `payload` to the listeners of `event` and its diagnostics channel, if any. */
  emit<K extends keyof Events>(event: K, payload: Events[K]): void {
    const set = this.#listeners.get(event);
    if (set !== undefined && set.size > 0) {
      for (const listener of set) {
        try {
          const answer: unknown = (listener as Listener<Events[K]>)(payload);
          // An async listener (TypeScript takes one for `=> void`) whose promise rejects: the same warning.
          if (answer !== undefined) containAnswer(`a listener of '${String(event)}' threw (reported once)`, listener, answer);
        } catch (err) {
          warnOnce(`a listener of '${String(event)}' threw (reported once)`, listener, err);
        }
      }
    }
    const ch = this.#channel(event);
    if (ch.hasSubscribers) ch.publish(payload);
  }
}
