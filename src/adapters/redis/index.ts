/**
 * dialguard/redis: node-redis (v4/v5) and ioredis (v5) clients whose reconnects ask a
 * `HostBreaker` keyed by the node's address: a dead node costs at most one dial per breaker window
 * per process, however many clients point at it.
 *
 * ```ts
 * const guard = new RedisGuard();
 * const client = guard.nodeRedis(createClient, { url: 'redis://cache:6379' });
 * const redis = guard.ioredis(Redis, { host: 'cache', port: 6379 });
 * const cluster = new Cluster(nodes, guard.ioredisCluster(Redis, { redisOptions }));
 * const nodeCluster = guard.nodeRedisCluster(createCluster, { rootNodes });
 * ```
 *
 * Neither client is imported: pass its constructor.
 *
 * @module
 */
export { type EventClient, type IoredisArguments, type IoredisOptions, type NodeRedisOptions, RedisGuard, type RedisGuardOptions } from './guard.js';
