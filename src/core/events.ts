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
import { type OptionNames, optionNames } from './option-names.js';
import { checkFunction, show } from './validate.js';

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
 * Who would hear one event of one {@link EventHub}: its direct listeners and its diagnostics
 * channel. A hot path holds it (see {@link EventHub.audience}) and asks {@link Audience.heard}
 * before building a payload: two fields read, no lookup.
 */
export class Audience {
  /** The event's direct listeners. @internal */
  readonly listeners = new Set<Listener<never>>();
  /** @param channel - the event's diagnostics channel, `dialguard:<component>:<event>`. */
  constructor(readonly channel: diagnosticsChannel.Channel) {}

  /** Whether anyone would hear the event now: a listener, or a subscriber of its channel. */
  get heard(): boolean {
    return this.listeners.size > 0 || this.channel.hasSubscribers;
  }
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
  /** The events it emits: `on()` refuses any other name (a typo heard nothing, silently). */
  readonly #names: ReadonlySet<string>;
  /**
   * Each event's audience, made the first time the event is named: its channel is looked up
   * once (building the channel's name to look it up again cost more than everything else
   * `active()` does, ~0.7 µs, measured), and its listeners and channel sit in one record.
   */
  readonly #audiences = new Map<keyof Events, Audience>();

  /**
   * @param component - names the diagnostics channels: `dialguard:<component>:<event>`.
   * @param names - every event it emits (the compiler holds the keys to exactly `Events`'s).
   */
  constructor(component: string, names: OptionNames<Events>) {
    this.#prefix = `dialguard:${component}:`;
    this.#names = optionNames(names);
  }

  /**
   * Calls `listener` with every `event`; returns the function that stops it.
   *
   * @throws TypeError for an event it never emits, or a listener that is not a function (taken
   * silently, it threw inside the next event: every later refusal or retry() failed with
   * "Invalid value used in weak set"; an outside review).
   */
  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): Unsubscribe {
    if (!this.#names.has(event as string)) {
      throw new TypeError(`unknown event ${show(event)} (the events are ${[...this.#names].map(show).join(', ')})`);
    }
    checkFunction('listener', listener);
    const set = this.audience(event).listeners;
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
    return this.audience(event).heard;
  }

  /**
   * The record of who hears `event`, the same object for the hub's life: a path that asks per
   * call holds it and reads {@link Audience.heard}, which sees a listener or a subscriber added
   * at any time, without the map lookup `active()` makes.
   */
  audience<K extends keyof Events>(event: K): Audience {
    let audience = this.#audiences.get(event);
    if (audience === undefined) {
      audience = new Audience(channelFor(this.#prefix + String(event)));
      this.#audiences.set(event, audience);
    }
    return audience;
  }

  /** Delivers `payload` to the listeners of `event` and its diagnostics channel, if any. */
  emit<K extends keyof Events>(event: K, payload: Events[K]): void {
    const { listeners, channel } = this.audience(event);
    if (listeners.size > 0) {
      for (const listener of listeners) {
        try {
          const answer: unknown = (listener as Listener<Events[K]>)(payload);
          // An async listener (TypeScript takes one for `=> void`) whose promise rejects: the same warning.
          if (answer !== undefined) containAnswer(`a listener of '${String(event)}' threw (reported once)`, listener, answer);
        } catch (err) {
          warnOnce(`a listener of '${String(event)}' threw (reported once)`, listener, err);
        }
      }
    }
    if (channel.hasSubscribers) channel.publish(payload);
  }
}
