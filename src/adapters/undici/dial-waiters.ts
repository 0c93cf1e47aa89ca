/**
 * Whose dial a GuardedAgent's connection is, when someone traces dials. undici opens a
 * connection for its queue: the first request's dispatch dials in that request's async context,
 * but a connection for requests already queued (behind `connections: 1`, after a server's
 * `Connection: close`) is dialled from the events of whatever socket freed the queue, in the
 * context of the request that socket served. Its `dialguard.dial` span went into that request's
 * trace, often under its span already ended, and the requests that waited for it showed no dial
 * (an outside review: 3 GETs on one connection, 2 of 3 dial spans under the first's ended span).
 *
 * An agent's attempts dispatched while dials are traced say here which origin they wait for,
 * until their connection comes (undici's `onConnect`) or they end; the connector runs each dial
 * in the async context of the oldest attempt still waiting for its origin (undici serves its
 * queue in order), so its span is that request's (a retry's: its attempt's). An attempt undici
 * hands a connection inside its dispatch (an idle keep-alive connection: the healthy path) never
 * waits, and costs nothing more: registered and captured for every request, a no-op tracer on
 * `dialguard:dial` read +11-13 µs of CPU a healthy request in one run (16 callers), much of it
 * the collector's. Nothing is kept, and nothing is run differently, when nobody traces dials.
 *
 * @module
 */
import { captureContext, dialTrace, traced } from '../../observe/tracing.js';

/** Runs a function in the async context captured when the waiter was made. */
type InContext = (run: () => void) => void;

/** An origin as a connector's `protocol`, `hostname` and `port` spell it, or a URL does. */
export function originKey(protocol: string, hostname: string, port: string | number): string {
  const host = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  const p = port === '' || port === undefined ? (protocol === 'https:' ? 443 : 80) : Number(port);
  return `${protocol}//${host.toLowerCase()}:${p}`;
}

/** The origin key of a request's `origin` option (a string or a URL); undefined for one that is neither. */
function keyOfOrigin(origin: unknown): string | undefined {
  if (typeof origin === 'string') {
    const known = originKeys.get(origin);
    if (known !== undefined) return known;
  }
  let key: string;
  try {
    const url = origin instanceof URL ? origin : new URL(String(origin));
    key = originKey(url.protocol, url.hostname, url.port);
  } catch {
    return undefined; // undici will refuse it
  }
  if (typeof origin === 'string') {
    if (originKeys.size >= MAX_ORIGIN_KEYS) originKeys.clear();
    originKeys.set(origin, key);
  }
  return key;
}

/**
 * The keys of origins as requests name them: a request traced for its dials parsed its origin as
 * a URL each time (~2 µs). Bounded: past it the memory starts over.
 */
const originKeys = new Map<string, string>();
const MAX_ORIGIN_KEYS = 256;

/** One agent's attempts waiting for a connection, per origin, oldest first. */
export class DialWaiters {
  readonly #byOrigin = new Map<string, Map<object, InContext>>();
  /** The origin each waiting attempt waits for. */
  readonly #of = new Map<object, string>();
  /** The waiting attempts a dial runs for now (see {@link dial}). */
  readonly #dialing = new Set<object>();
  /** The attempt undici is dispatching now (traced dials only), not yet a waiter. */
  #dispatching: object | undefined;
  /** It got its connection, or ended, inside its dispatch: it never waits. */
  #dispatchingDone = false;
  /** A dial ran for it inside its dispatch, not yet ended. */
  #dispatchingDialled = false;

  /**
   * `attempt` is about to be dispatched (undici may hand it a connection, or start a dial for it,
   * inside the dispatch). Returns whether dials are traced: then {@link dispatched} must follow.
   */
  dispatching(attempt: object): boolean {
    if (!traced(dialTrace)) return false;
    this.#dispatching = attempt;
    this.#dispatchingDone = false;
    this.#dispatchingDialled = false;
    return true;
  }

  /**
   * `attempt`'s dispatch returned: unless it got its connection meanwhile, it waits for `origin`
   * from now on, in the async context current now (its own, or its retry's attempt span's).
   * `current`: that context, when the caller captured it already (a call's first attempt,
   * dispatched from its start: one capture a request, not two).
   */
  dispatched(attempt: object, origin: unknown, current?: InContext): void {
    if (this.#dispatching !== attempt) return; // another dispatch ran inside this one: not followed
    this.#dispatching = undefined;
    if (this.#dispatchingDone) return;
    const key = keyOfOrigin(origin);
    if (key === undefined || this.#of.has(attempt)) return;
    let waiting = this.#byOrigin.get(key);
    if (waiting === undefined) this.#byOrigin.set(key, (waiting = new Map()));
    waiting.set(attempt, current ?? captureContext());
    this.#of.set(attempt, key);
    if (this.#dispatchingDialled) this.#dialing.add(attempt);
  }

  /** `attempt` has its connection, or ended, or was left: it waits no more. */
  over(attempt: object): void {
    if (attempt === this.#dispatching) this.#dispatchingDone = true;
    if (this.#of.size === 0) return; // nobody waits: the healthy path's only cost
    const key = this.#of.get(attempt);
    if (key === undefined) return;
    this.#of.delete(attempt);
    this.#dialing.delete(attempt);
    const waiting = this.#byOrigin.get(key)!;
    waiting.delete(attempt);
    if (waiting.size === 0) this.#byOrigin.delete(key);
  }

  /**
   * Runs `dial` (undici's connect to this origin) in the context of the oldest attempt waiting for
   * it that no other dial runs for (all have one: the oldest); as it is when none waits. `dial`
   * is handed a function to call as the dial ends, when it ran for an attempt, which may then be
   * dialled for again (a dial failed, undici dials once more for its queue). Was: always the
   * oldest, still waiting for its own dial, so with undici's connection per request 10 requests'
   * dials all ran in the first one's context, their spans in its trace (an outside review).
   */
  dial(protocol: string, hostname: string, port: string | number, dial: (ended?: () => void) => void): void {
    // An origin's map is never empty: over() deletes it with its last attempt.
    const waiting = this.#of.size === 0 ? undefined : this.#byOrigin.get(originKey(protocol, hostname, port));
    if (waiting !== undefined) {
      for (const [attempt, inContext] of waiting) {
        if (this.#dialing.has(attempt)) continue;
        this.#dialing.add(attempt);
        inContext(() => dial(() => this.#dialing.delete(attempt)));
        return;
      }
    }
    // The attempt being dispatched is the newest waiter, in the context current now (its own).
    const dispatching = this.#dispatching;
    if (dispatching !== undefined && !this.#dispatchingDone && !this.#dispatchingDialled) {
      this.#dispatchingDialled = true;
      return dial(() => {
        if (this.#dispatching === dispatching) this.#dispatchingDialled = false;
        else this.#dialing.delete(dispatching);
      });
    }
    if (waiting === undefined) return dial();
    waiting.values().next().value!(() => dial()); // every waiter has a dial out: the oldest's context
  }
}
