/**
 * {@link RedialRounds}: the clients of one Redis node in a process redial it as one.
 *
 * Every node-redis or ioredis client runs its own reconnect loop. Ten clients of a node that just
 * died are ten loops, and while the breaker is still closed (it opens only once failed rounds span
 * its `minOutage`, so that a blip never opens a node) each loop redials on its own backoff: ten
 * clients made ~60 dials in the first 1.5 s of an outage. That is seed 002's storm again, one
 * process at a time.
 *
 * So once a node has failed a dial or lost a connection, its redials go in rounds shared by the
 * process: one client leads each round and dials; the clients that come to dial while it is out
 * wait for its outcome (a success lets them dial at once, a failure fails them with its error,
 * no I/O); a client that comes between rounds fails at once with the last round's error. Rounds
 * are spaced by a jittered backoff (equal jitter, so the spacing has a floor: 25-50 ms, then
 * 50-100, 75-150..., growing by 50 ms a round to `maxBackoff`). The first success forgets the
 * node. The breaker still sees every dial and decides when the node opens; this only stops the
 * loops from multiplying its dials.
 *
 * A round's lead is bounded: a leader never reported (its client was destroyed mid-dial) is let
 * go after the connect timeout, and its waiters dial.
 *
 * Rounds belong to the breaker a guard reports to (one `RedialRounds` per `HostBreaker`, see
 * `RedisGuard`), as the breaker is per process: two guards on the shared breaker redial a node
 * as one. Each call carries the caller's own {@link RoundPolicy} (its guard's backoff cap and
 * connect timeout), so guards with different options can share the rounds.
 *
 * @module
 */
import { type Clock, type TimerHandle, systemClock, unrefTimer } from '../../core/clock.js';
import { isError } from '../../core/validate.js';

/** The first round's spacing cap, ms (jittered to 25-50 ms), growing by as much per failed round up to `maxBackoff`. */
export const FIRST_ROUND_CAP = 50;

/** The outcome a waiting client is given: undefined to dial, else the error to fail with. */
export type RoundOutcome = Error | undefined;

/** The spacing and bounds a guard asks of the rounds it joins (its own options). */
export interface RoundPolicy {
  /** Longest spacing between rounds, ms. */
  readonly maxBackoff: number;
  /** How long a round's leader may stay unreported, ms (the connect timeout and a margin). */
  readonly leadFor: number;
  /** Uniform [0, 1) source for the jitter. */
  readonly random: () => number;
}

/** What one node's rounds remember. */
interface Node {
  /** Consecutive failed rounds (0 after a lost connection, before any redial failed). */
  failures: number;
  /** When the next round may start (clock ms). */
  nextAt: number;
  /** When the last failed round was counted: a dial that began before it was part of it. */
  countedAt: number;
  /** The last round's error, given to clients that come between rounds. */
  lastError: Error;
  /** The client dialling for the round in flight, its waiters and the bound on its lead. */
  leader: object | undefined;
  waiters: Array<(outcome: RoundOutcome) => void>;
  leadTimer: TimerHandle | undefined;
}

/**
 * Shared redial rounds per node and way of dialling it (the guard's round key: the breaker key,
 * marked for TLS clients, so a plain client's failures against a TLS-only port are never handed
 * to TLS clients). See the module docs.
 */
export class RedialRounds {
  readonly #nodes = new Map<string, Node>();
  readonly #policy: RoundPolicy;
  readonly #clock: Clock;

  /**
   * @param maxBackoff - longest spacing between rounds, ms, for calls that give no {@link RoundPolicy}.
   * @param leadFor - how long a round's leader may stay unreported, ms (the connect timeout and a
   *   margin), likewise.
   * @param random - uniform [0, 1) source for the jitter, likewise.
   * @param clock - time source for the spacing and the lead's bound (its timer is unref'd).
   */
  constructor(maxBackoff: number, leadFor: number, random: () => number, clock: Clock = systemClock) {
    this.#policy = { maxBackoff, leadFor, random };
    this.#clock = clock;
  }

  /**
   * At dial time, for `client`: undefined to dial now (a node not known to be failing, or this
   * client leads the next round), an error to fail with at once (between rounds), or a promise of
   * either (a round is in flight: its outcome). `policy.leadFor` bounds this client's lead.
   */
  turn(key: string, client: object, policy: RoundPolicy = this.#policy): RoundOutcome | Promise<RoundOutcome> {
    const node = this.#nodes.get(key);
    if (node === undefined) return undefined;
    if (node.leader !== undefined && node.leader !== client) return new Promise((resolve) => node.waiters.push(resolve));
    if (node.leader === undefined && this.#clock.now() < node.nextAt) return node.lastError;
    this.#lead(key, node, client, policy.leadFor);
    return undefined;
  }

  /** A client lost its connection to `key` (no dial failed): the node's redials go in rounds from now. */
  lost(key: string, cause: unknown): void {
    if (this.#nodes.has(key)) return;
    this.#nodes.set(key, fresh(this.#clock.now(), cause));
  }

  /**
   * A dial to `key` by `client`, begun at `startedAt` (clock ms; default now), failed: its round
   * failed. Dials outside any round start them; those that overlapped a failure already counted
   * (the first dials of several clients) are that one round. `policy` spaces the next round.
   */
  failed(key: string, client: object, cause: unknown, startedAt = this.#clock.now(), policy: RoundPolicy = this.#policy): void {
    let node = this.#nodes.get(key);
    if (node === undefined) {
      node = fresh(0, cause);
      this.#nodes.set(key, node);
    } else if (node.leader !== undefined && node.leader !== client) {
      return; // a dial from before the round began: the round's own outcome decides
    } else if (node.leader === undefined && startedAt <= node.countedAt) {
      return; // overlapped the round already counted
    }
    node.countedAt = this.#clock.now();
    node.failures++;
    node.lastError = asError(cause);
    // Growing by FIRST_ROUND_CAP a round, as ioredis's own strategy (50 ms a retry), not doubling:
    // doubled, the spacing was 400-800 ms one second into an outage and 1-2 s after five, so a
    // node back from a 1 s restart was used again 135-465 ms later, from a 5 s one up to 1.6 s
    // (plain ioredis: 32 and 245 ms; an outside review). A process still makes one series of
    // dials for all its clients: at most 10 rounds in the breaker's 1.5 s minimum outage.
    const cap = Math.min(policy.maxBackoff, FIRST_ROUND_CAP * node.failures);
    node.nextAt = this.#clock.now() + cap / 2 + (cap / 2) * policy.random();
    this.#end(node, node.lastError);
  }

  /** `client`'s turn ended without a dial (the breaker refused it): its waiters fail alike. */
  refused(key: string, client: object, refusal: Error): void {
    const node = this.#nodes.get(key);
    if (node?.leader === client) this.#end(node, refusal);
  }

  /** `client` gave its dial up (closed): its round ends with no outcome, and its waiters dial. */
  released(key: string, client: object): void {
    const node = this.#nodes.get(key);
    if (node?.leader === client) this.#end(node, undefined);
  }

  /** A dial to `key` succeeded: the node is forgotten and the clients waiting for it dial. */
  succeeded(key: string): void {
    const node = this.#nodes.get(key);
    if (node === undefined) return;
    this.#nodes.delete(key);
    this.#end(node, undefined);
  }

  /** The clock's now, ms: when a dial begins, for {@link failed}. */
  now(): number {
    return this.#clock.now();
  }

  /**
   * Whether `key`'s rounds have failed a dial (not only lost a connection): they pace its redials
   * then, one a round for the process.
   */
  failing(key: string): boolean {
    return (this.#nodes.get(key)?.failures ?? 0) > 0;
  }

  /** ms until `key`'s next round may start, or undefined for a node not known to be failing. */
  delay(key: string): number | undefined {
    const node = this.#nodes.get(key);
    return node === undefined ? undefined : Math.max(0, node.nextAt - this.#clock.now());
  }

  #lead(key: string, node: Node, client: object, leadFor: number): void {
    if (node.leadTimer !== undefined) this.#clock.clearTimeout(node.leadTimer);
    node.leader = client;
    node.leadTimer = unrefTimer(
      this.#clock.setTimeout(() => {
        // Never reported (its client went away mid-dial): let the waiters dial themselves.
        node.leadTimer = undefined;
        if (this.#nodes.get(key) === node && node.leader === client) this.#end(node, undefined);
      }, leadFor),
    );
  }

  /** The round in flight (if any) ends with `outcome`, given to its waiters. */
  #end(node: Node, outcome: RoundOutcome): void {
    node.leader = undefined;
    if (node.leadTimer !== undefined) this.#clock.clearTimeout(node.leadTimer);
    node.leadTimer = undefined;
    const waiters = node.waiters.splice(0);
    for (const resolve of waiters) resolve(outcome);
  }
}

function fresh(nextAt: number, cause: unknown): Node {
  return { failures: 0, nextAt, countedAt: Number.NEGATIVE_INFINITY, lastError: asError(cause), leader: undefined, waiters: [], leadTimer: undefined };
}

function asError(cause: unknown): Error {
  return isError(cause) ? cause : new Error(`redis connection lost: ${String(cause)}`);
}
