/**
 * A guarded node-redis cluster against a dead node, as an outside review measured it (a master
 * SIGKILLed, 15 s): its node clients redialled about twice as often as a plain cluster's (1
 * cluster: 22 dials against 12; 5 clusters: 89 against 51), because the cluster's reconnect
 * strategy took the guard's jitter (from 0 ms) and a refusing node's 250 ms windows with no floor,
 * where a single guarded client waits at least node-redis's own pace. The factory is driven here
 * with a stand-in createCluster: the strategy node-redis is handed.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { RedisGuard } from '../../../src/adapters/redis/index.js';
import { HostBreaker } from '../../../src/guard/host-breaker.js';

interface Handed {
  defaults: { socket: { reconnectStrategy: (retries: number, cause: unknown) => number | false | Error } };
}

function guarded(breaker = new HostBreaker()): { handed: Handed } {
  // random 0: the guard's jitter at its shortest, where the floor alone decides.
  const guard = new RedisGuard({ breaker, random: () => 0 });
  let handed: Handed | undefined;
  guard.nodeRedisCluster(
    (options: unknown) => {
      handed = options as Handed;
      return new EventEmitter();
    },
    { rootNodes: [{ socket: { host: '127.0.0.1', port: 7001 } }] },
  );
  return { handed: handed! };
}

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:7001'), { code: 'ECONNREFUSED', address: '127.0.0.1', port: 7001 });

describe('RedisGuard.nodeRedisCluster: the redial pace', () => {
  it("no node client redials sooner than node-redis's own default (50 ms doubling to 2 s), whatever the jitter", () => {
    const { handed } = guarded();
    const strategy = handed.defaults.socket.reconnectStrategy;
    for (let retries = 0; retries < 10; retries++) {
      expect(strategy(retries, refused())).toBeGreaterThanOrEqual(Math.min(2 ** retries * 50, 2_000)); // was 0
    }
  });
});
