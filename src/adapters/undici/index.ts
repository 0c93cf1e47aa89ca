/**
 * dialguard/undici: guarded dials and safe retries for undici, and so for Node's `fetch`.
 *
 * - {@link GuardedAgent}: the one-liner, `fetch(url, { dispatcher: new GuardedAgent() })`.
 * - {@link guardedConnector}: the connector alone, for any undici Agent, Pool or Client.
 * - {@link guardedRetry}: the retrying layer alone, an interceptor for `dispatcher.compose()`.
 * - {@link forFetch}: the agent typed for Node's global `fetch`, no cast needed.
 *
 * undici is an optional peer dependency, imported only by this subpath.
 *
 * @module
 */
export { GuardedAgent, type GuardedAgentOptions, type UndiciAgentOptions } from './agent.js';
export { retriesOf } from '../../retry/story.js';
export { type GuardedConnectorOptions, type GuardedSocketOptions, type GuardedTlsOptions, type UndiciConnector, guardedConnector } from './connector.js';
export { type GuardedRetryOptions } from './options.js';
export { guardedRetry } from './retry-interceptor.js';
export { type FetchDispatcher, forFetch } from './for-fetch.js';
