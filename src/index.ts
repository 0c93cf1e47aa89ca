/**
 * dialguard: make a dead host cheap and a shared connection safe.
 *
 * - {@link HostBreaker}: a per-host circuit breaker fed only by dial outcomes.
 * - {@link dial} / {@link connect}: one dial bounded end to end and guarded by a breaker.
 * - {@link ConnectionPool}: one shared connection per target, single-flight connect, identity,
 *   retired vs gone.
 *
 * The HTTP/2 client is `dialguard/http2`.
 * Fault peers for tests live in `dialguard/testing`.
 *
 * @module
 */
export { type Clock, type TimerHandle, systemClock, sleep, unrefTimer } from './core/clock.js';
export {
  ConnectTimeoutError,
  ConnectionGoneError,
  DeadlineExceededError,
  DialguardError,
  type AnyDialguardError,
  type ErrorCode,
  ErrorCodes,
  HostUnavailableError,
  NoServerAvailableError,
  PoolClosedError,
  type ConnectPhase,
  type RefusalDetails,
  type RefusedState,
  RequestTimeoutError,
  RetriesExhaustedError,
  RetryBudgetExhaustedError,
  KeepAliveTimeoutError,
  TransportClosedError,
  ClientCertificateRejectedError,
  findError,
  isDialguardError,
  isPermanent,
} from './core/errors.js';
export { type Listener, type Unsubscribe } from './core/events.js';
export {
  type ExponentialOptions,
  type ProportionalJitterOptions,
  type Schedule,
  constant,
  decorrelatedJitter,
  exponential,
  fullJitter,
  proportionalJitter,
} from './core/backoff.js';
export { ADAPTER_CONNECT_TIMEOUT, restartSpanningBackoff } from './core/restart-backoff.js';
export {
  type BreakerState,
  adaptiveOpenWindow,
  type DialPermit,
  HostBreaker,
  type HostBreakerEvents,
  type HostBreakerOptions,
  type HostBreakerStats,
  type HostSnapshot,
  type Transport,
  tlsTransport,
} from './guard/host-breaker.js';
export { hostKey } from './guard/host-key.js';
export { type DialFailureOutcome, dialFailureOutcome } from './guard/dial-outcome.js';
export { DEFAULT_CONNECT_TIMEOUT, type DialContext, type DialEvents, type DialOptions, type LookupEvents, dial, sharedBreaker } from './guard/dial.js';
export { type ConnectOptions, type ConnectTarget, connect } from './guard/connect.js';
export { ADDRESS_RECHECK, DEFAULT_ATTEMPT_DELAY, type ResolvedAddress } from './guard/addresses.js';
export {
  type ConnectionPoolEvents,
  type ConnectionPoolOptions,
  type ConnectionWatch,
  type Connector,
  ConnectionPool,
  type PoolClassification,
  type PoolStats,
  SETTLE_TIMEOUT,
  type UseOptions,
} from './pool/connection-pool.js';
export { type Lease, type RetireReason } from './pool/pooled-connection.js';

// --- observability: diagnostics channels and a state-change logger ---
export { CHANNELS, type DialguardChannels, subscribe } from './observe/channels.js';
export { type LogStateChangesOptions, type StateLogger, logStateChanges } from './observe/log-state-changes.js';

// --- retry: classification, deadlines, backoff, budget, failover (issue 4) ---
export {
  type Classification,
  type ClassificationOverride,
  type ClassifyHook,
  type ClassifyOptions,
  type ClassifyPattern,
  type FailureKind,
  classify,
  registerClassifier,
} from './core/classify.js';
export {
  type RetryAttempt,
  type RetryEvents,
  type RetryInfo,
  type RetryOptions,
  type RetryPredicate,
  type RetryResult,
  onRetryEvent,
  retry,
} from './retry/retry.js';
export { RetryBudget, type RetryBudgetOptions, type RetryBudgetStats, sharedRetryBudget } from './retry/budget.js';
export { type ServerAttempt, ServerSet, type ServerSetOptions } from './retry/server-set.js';
