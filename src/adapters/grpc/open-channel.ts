/**
 * One grpc-js channel to one target (the client's, or one address of its name), asked to connect
 * and watched until READY inside a dial: the pool's for a target guarded by name, an address's own
 * for a name dialled per address. TRANSIENT_FAILURE fails the dial with grpc-js's own reason; the
 * dial's timeout or abandonment closes the channel and destroys what sockets it has (see
 * tracked-credentials).
 *
 * @module
 */
import * as grpc from '@grpc/grpc-js';
import net from 'node:net';
import type { Clock } from '../../core/clock.js';
import { ClientCertificateRejectedError } from '../../core/errors.js';
import type { DialContext } from '../../guard/dial.js';
import { ChannelConnectError, lastError, markClientVerdict, markNotHttp2, quotedCause } from './connect-error.js';
import type { ChannelSpec } from './target.js';
import { ConnectTracker, trackCredentials } from './tracked-credentials.js';

const { READY, IDLE, CONNECTING, TRANSIENT_FAILURE, SHUTDOWN } = grpc.connectivityState;

/** One pooled grpc-js channel. */
export interface PooledChannel {
  readonly channel: grpc.Channel;
  /** The pool key (channel spec) it serves. */
  readonly key: string;
  readonly tracker: ConnectTracker;
  /** Set once `channel.close()` has been called. */
  closed: boolean;
  /**
   * Retires the channel now if it is not READY (set while watched): for a call that finds it so
   * before the watcher has told the pool. Retires only, never marks it gone: that would release
   * the very call asking, which was never sent.
   */
  retireIfNotReady: (() => void) | undefined;
}

/**
 * One channel to `target`, asked to connect and watched until READY inside the dial `ctx`
 * belongs to (the pool's, or one address's). On failure it is closed and its sockets destroyed.
 */
export function openChannel(spec: ChannelSpec, target: string, options: grpc.ChannelOptions, ctx: DialContext, clock: Clock): Promise<PooledChannel> {
  const tracker = new ConnectTracker(isIpTarget(target) ? 'tcp' : 'lookup');
  ctx.phase = tracker.phase;
  tracker.onPhase = (phase) => {
    ctx.phase = phase;
  };
  let channel: grpc.Channel;
  try {
    channel = new grpc.Channel(target, trackCredentials(spec.credentials, tracker), options);
  } catch (err) {
    return Promise.reject(err);
  }
  const pooled: PooledChannel = { channel, key: spec.key, tracker, closed: false, retireIfNotReady: undefined };

  return new Promise<PooledChannel>((resolve, reject) => {
    let done = false;
    let started = false;
    let probing = false;
    const settle = (err: unknown): void => {
      done = true;
      ctx.signal.removeEventListener('abort', onAbort);
      tracker.onPhase = undefined;
      if (err === undefined) {
        resolve(pooled);
        return;
      }
      // The peer sent HTTP/2-layer bytes: a protocol answer (say an HTTP/1.1 server's reply to
      // the preface) from a live host, never a failed dial against it (DESIGN rule 1). So is a
      // certificate the client's own identity check refused (or threw on).
      if (tracker.answered || tracker.certificatePresented) ctx.answered = true;
      tracker.abort();
      closeChannel(pooled);
      reject(err);
    };
    const onAbort = (): void => {
      if (!done && !probing) settle(ctx.signal.reason);
    };
    const check = (): void => {
      if (done || probing) return;
      const state = channel.getConnectivityState(false);
      switch (state) {
        case READY:
          settle(undefined);
          return;
        case TRANSIENT_FAILURE:
          // Failed. Ask grpc-js why (a millisecond or two), then close.
          probing = true;
          // A TLS handshake that failed is given as the cause itself, with its code: a
          // certificate, hostname or ALPN verdict proves the host alive (dialFailureOutcome).
          void lastError(channel, clock).then((status) => settle(ctx.signal.aborted ? ctx.signal.reason : connectError(spec.target, status, tracker)));
          return;
        case SHUTDOWN:
          settle(new Error(`channel to ${spec.target} shut down while connecting`));
          return;
        case IDLE:
          // Before the first attempt the channel is IDLE; after it, IDLE means the connection
          // closed during establishment (grpc-js would only try again for a queued call).
          if (started) {
            const details = 'No connection established. Last error: Connection closed before the HTTP/2 handshake completed';
            settle(connectError(spec.target, { code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() }, tracker));
            return;
          }
          break;
        case CONNECTING:
          started = true;
          break;
      }
      channel.watchConnectivityState(state, Infinity, check);
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    channel.getConnectivityState(true);
    check();
  });
}

/**
 * The error of a failed connect, with its cause (see {@link causeOf}); a client certificate the
 * server asked for and then hung up on (see `client-certificate.ts`) is named as such.
 */
function connectError(target: string, status: grpc.StatusObject, tracker: ConnectTracker): ChannelConnectError {
  if (tracker.handshakeError === undefined && tracker.certificateRejected) {
    // grpc-js says only that the connection closed: the details say what it most likely was.
    const rejected = new ClientCertificateRejectedError(target, { cause: quotedCause(status.details) ?? new Error(status.details) });
    return new ChannelConnectError(target, { ...status, details: `${status.details} (${rejected.message})` }, rejected);
  }
  return new ChannelConnectError(target, status, causeOf(tracker, status.details));
}

/**
 * The cause of a failed connect: the TLS handshake's own error when it failed; else the failure
 * grpc-js quoted in `details`, marked {@link markNotHttp2} when the peer had sent HTTP/2-layer
 * bytes (after TLS, if any), since a connect that failed after the peer answered failed on what
 * it said (an HTTP/1.1 reply to the preface): the port is not HTTP/2, and a raw grpc-js call
 * fails there at once, never after retries.
 */
function causeOf(tracker: ConnectTracker, details: string): unknown {
  // The client's own identity check refused the certificate: that verdict is the client's own,
  // the same on every connect (see markClientVerdict).
  if (tracker.handshakeError !== undefined) return tracker.identityRefused === undefined ? tracker.handshakeError : markClientVerdict(tracker.handshakeError);
  const quoted = quotedCause(details);
  return tracker.answered ? markNotHttp2(quoted ?? new Error(details)) : quoted;
}

/** A channel to an address that became READY after another won: its sockets destroyed, closed. */
export function disposeLate(pooled: PooledChannel): void {
  pooled.tracker.abort();
  closeChannel(pooled);
}

/** Closes the channel, once. */
/**
 * Reads, when called, the longest keep-alive interval grpc-js holds for `channel`'s connections,
 * ms (undefined: none reads as one). grpc-js doubles a subchannel's interval at each GOAWAY
 * `too_many_pings` (gRFC A8), right after it has told the channel the connection left READY: call
 * the reader after that (a microtask later). No public accessor exists, so this reads grpc-js's
 * internals (the channel's subchannel wrappers, each real subchannel's `keepaliveTime`, as in
 * grpc-js 1.14); any other shape reads as undefined, and the configured interval stays.
 */
export function keepAliveReader(channel: grpc.Channel): () => number | undefined {
  type Real = { keepaliveTime?: unknown };
  const wrappers = (channel as unknown as { internalChannel?: { wrappedSubchannels?: unknown } }).internalChannel?.wrappedSubchannels;
  if (!(wrappers instanceof Set)) return () => undefined;
  const subchannels: Real[] = [];
  for (const w of wrappers as Set<{ getRealSubchannel?: () => Real }>) {
    const real = typeof w?.getRealSubchannel === 'function' ? w.getRealSubchannel() : undefined;
    if (typeof real === 'object' && real !== null) subchannels.push(real);
  }
  return () => {
    let longest: number | undefined;
    for (const s of subchannels) {
      const ms = s.keepaliveTime;
      if (typeof ms === 'number' && Number.isFinite(ms) && ms > 0 && (longest === undefined || ms > longest)) longest = ms;
    }
    return longest;
  };
}

export function closeChannel(pooled: PooledChannel): void {
  if (pooled.closed) return;
  pooled.closed = true;
  try {
    pooled.channel.close();
  } catch {
    /* already closed by grpc-js itself */
  }
}

/** Whether `target` names IP addresses (no name to resolve). */
function isIpTarget(target: string): boolean {
  if (/^ipv[46]:/i.test(target)) return true;
  const address = target.replace(/^dns:(\/\/[^/]*\/)?/i, '');
  const host = address.startsWith('[') ? address.slice(1, address.indexOf(']')) : address.split(':').length > 2 ? address : address.split(':')[0]!;
  return net.isIP(host) !== 0;
}
