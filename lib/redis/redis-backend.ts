import type { LockBackendDefinition } from '../core/lock-backend-definition';
import type { RedlockClientEntry } from '../interfaces/redlock-module-options.interface';
import { policiesFromEnv } from './engine-policies';
import { RedisConnections } from './protocol/redis-connections';
import { RedisLockBackend } from './redis-lock-backend';

/** A Redis group as the options give it. @internal */
export interface RedisBackendOptions {
  /** Its nodes: one is a single-node lock, N >= 2 a Redlock quorum (majority). */
  readonly nodes: readonly RedlockClientEntry[];
  /** The module's `localHandoffs`. */
  readonly localHandoffs: number;
  /** The module's `ttl`: where the longest lease in use starts (Redlock's restart rule). */
  readonly ttl: number;
}

/**
 * A Redis group's backend: what a group's `clients` (and the top-level `clients`, the
 * documented shorthand) turn into. Its connections are opened from strings and options when
 * the group is built (ioredis is loaded then, and only then), at `start` they connect.
 * @internal
 */
export function redisBackend(options: RedisBackendOptions): LockBackendDefinition {
  return {
    kind: 'redis',
    supports: { read: true, permits: true },
    create: ({ group, keyPrefix, driftFactor, commandTimeout, logger }) => {
      const connections = new RedisConnections(group, options.nodes, logger);
      return new RedisLockBackend(
        group,
        connections.nodes,
        {
          keyPrefix,
          driftFactor,
          localHandoffs: options.localHandoffs,
          commandTimeout,
          ttl: options.ttl,
          policies: policiesFromEnv(),
          connectionError: (node) => connections.connectionError(node),
          connections,
        },
        (err) => logger.debug?.(`lock notifications (${group}): ${err.message}`),
      );
    },
  };
}
