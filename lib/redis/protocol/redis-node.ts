import type { Cluster, Redis } from 'ioredis';

/**
 * One server (or one Cluster) a lock group talks to. Lives in a file of its own, importing
 * nothing of the library, so every layer can name it without importing the engine.
 * @internal
 */
export type RedisNode = Redis | Cluster;

/**
 * Whether `value` is an ioredis `Redis` or `Cluster` instance: the commands the engine calls are
 * checked, not `instanceof`, which misses an instance built by another copy of ioredis (the
 * application's own, when versions differ) and would load ioredis for an app without Redis.
 * @internal
 */
export function isRedisInstance(value: unknown): value is RedisNode {
  if (value === null || typeof value !== 'object') return false;
  const node = value as Partial<Record<'evalsha' | 'duplicate', unknown>>;
  return typeof node.evalsha === 'function' && typeof node.duplicate === 'function';
}

/** Whether a node is a Redis Cluster (keys spread over slots). @internal */
export function isCluster(node: RedisNode): node is Cluster {
  return (node as Partial<Cluster>).isCluster === true;
}

/** How a node is named in reports: where it is, never its password. @internal */
export function nodeName(node: RedisNode): string {
  if (isCluster(node)) return 'cluster';
  const { sentinels, name, path, host, port } = node.options;
  if (sentinels?.length) return `sentinel:${name ?? ''}`;
  if (path) return path;
  return `${host}:${port}`;
}
