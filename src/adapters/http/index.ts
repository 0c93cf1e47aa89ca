/**
 * dialguard/http: Node's own `http.Agent` and `https.Agent`, with every dial bounded and guarded
 * by a `HostBreaker`. For every client that takes an agent: axios (`httpAgent`/`httpsAgent`),
 * got (`agent: { http, https }`), node-fetch, superagent, the AWS SDK.
 *
 * - {@link GuardedHttpAgent}, {@link GuardedHttpsAgent}: the agents.
 *
 * No dependencies: the agents are built on `node:http` and `node:https`.
 *
 * @module
 */
export { GuardedHttpAgent, type GuardedHttpAgentOptions, GuardedHttpsAgent, type GuardedHttpsAgentOptions } from './agent.js';
export { type AgentGuardOptions } from './options.js';
export { PendingDial } from './pending-dial.js';
