/**
 * dialguard/grpc: makes any @grpc/grpc-js client (generated or generic) guarded in one line:
 *
 * ```ts
 * import { GrpcGuard } from 'dialguard/grpc';
 * const guard = new GrpcGuard();
 * const client = new EchoClient(target, grpc.credentials.createInsecure(), guard.clientOptions());
 * ```
 *
 * Each target gets one shared, pooled channel, established under a bounded connect timeout whose
 * outcome (and nothing else) feeds the target's HostBreaker. While the breaker refuses a host its
 * calls fail at once with UNAVAILABLE carrying the `HostUnavailableError`. A channel whose
 * connection dies is dropped with every call riding it; keep-alive is on; calls are retried inside
 * the caller's deadline. See {@link GrpcGuard}.
 *
 * @module
 */
export { GrpcGuard, MANY_GUARDS, type ChannelFactory } from './guard.js';
export type { GrpcGuardOptions, GrpcRetryOptions, StatusName } from './options.js';
export { GuardedChannel } from './guarded-channel.js';
export { GuardedCall } from './guarded-call.js';
export { ChannelConnectError } from './connect-error.js';
export { TransportClosedError } from '../../core/errors.js';
export { METADATA_CODE, METADATA_RETRY_AFTER, type GuardStatus } from './status.js';
export { grpcHostKey } from './target.js';
