/**
 * One dial at a time to a host that has not proven itself (rule 3: count per dial round, not per
 * caller).
 *
 * undici's Pool opens a connection per concurrent request: 64 requests to a fresh origin start 64
 * dials at once, and against a dead host that is 64 SYN streams each waiting out the connect
 * timeout. A {@link DialScout} lets the first of them go (the scout) and holds the others until
 * it settles: if it fails, they all fail with its error without dialling; if it connects, the host
 * is proven and they dial at once, in parallel, as undici intended. A proven host is never held
 * (a healthy pool opens its connections at full speed); its first failed dial makes it unproven
 * again.
 *
 * A scout that failed for a reason that says nothing of the host (a certificate the host presented,
 * its own TLS options, which requests to one host:port need not share) holds nobody: they dial.
 *
 * The breaker sees one outcome per round: the scout's. The held dials never ask it, so they
 * neither spend a half-open probe nor count as failures of their own.
 *
 * @module
 */
import { dialFailureOutcome } from '../../guard/dial-outcome.js';

/** Most hosts remembered as proven; past it the oldest is forgotten (it just gets scouted again). */
const PROVEN_CAPACITY = 4096;

/** Lets one dial scout an unproven host while the others wait for its outcome. */
export class DialScout {
  /** Hosts whose last dial succeeded, oldest first. */
  readonly #proven = new Set<string>();
  /** The scout in flight per host: resolves once it connected, rejects with its error. */
  readonly #scouting = new Map<string, Promise<void>>();

  /** Whether `key`'s last dial succeeded (its dials are not held). */
  proven(key: string): boolean {
    return this.#proven.has(key);
  }

  /**
   * Runs `dial` for `key`: at once if the host is proven or no scout is out (then it is the
   * scout), else after the scout connected. Rejects with the scout's error, without calling
   * `dial`, when the scout failed, unless `shares` (default: yes) says that failure is not this
   * dial's to take (the scout's own TLS options failed it): then it dials. A held dial also goes
   * once `early` resolves, if the scout has not settled by then (a dial with other TLS options,
   * once the scout's TCP connect proved the host reachable: the scout's handshake says nothing of
   * its own).
   */
  run<T>(key: string, dial: () => Promise<T>, shares?: (err: unknown) => boolean, early?: Promise<unknown>): Promise<T> {
    if (this.#proven.has(key)) return this.#watch(key, dial());
    const scout = this.#scouting.get(key);
    if (scout !== undefined) {
      // Only the host's own failure is shared. A certificate it presented proves it alive, and a
      // failure of the scout's own (its TLS options, which may not be this dial's) says nothing
      // of it: this dial goes on its own.
      const shared = (err: unknown): boolean => dialFailureOutcome(err) === 'failed' && shares?.(err) !== false;
      if (early === undefined) {
        return scout.then(
          () => this.#watch(key, dial()),
          (err: unknown) => {
            if (shared(err)) throw err;
            return this.#watch(key, dial());
          },
        );
      }
      return new Promise<T>((resolve, reject) => {
        let went = false;
        const go = (): void => {
          if (went) return;
          went = true;
          try {
            this.#watch(key, dial()).then(resolve, reject);
          } catch (err) {
            reject(err);
          }
        };
        early.then(go, () => {});
        scout.then(go, (err: unknown) => {
          if (went) return;
          if (!shared(err)) return go();
          went = true;
          reject(err);
        });
      });
    }
    const settled = this.#watch(key, dial());
    // The scout leaves before its own caller hears how it ended (that reaction is registered
    // first): a caller that dials again at once (a node:http agent dialling for the request queued
    // behind) starts a dial of its own, as without a scout, instead of joining this finished one
    // and failing with its error, undialled.
    const done = (): void => {
      if (this.#scouting.get(key) === outcome) this.#scouting.delete(key);
    };
    const attempt = settled.finally(done);
    const outcome = settled.then(() => undefined);
    outcome.catch(() => {}); // the waiters handle it; the scout's own caller gets `attempt`
    this.#scouting.set(key, outcome);
    return attempt;
  }

  /** Records `dial`'s outcome for `key`: success proves the host, failure unproves it. */
  #watch<T>(key: string, dial: Promise<T>): Promise<T> {
    return dial.then(
      (value) => {
        if (!this.#proven.has(key)) {
          if (this.#proven.size >= PROVEN_CAPACITY) this.#proven.delete(this.#proven.values().next().value!);
          this.#proven.add(key);
        }
        return value;
      },
      (err: unknown) => {
        this.#proven.delete(key);
        throw err;
      },
    );
  }
}
