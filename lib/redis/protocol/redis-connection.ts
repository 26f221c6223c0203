import { isCluster, type RedisNode } from './redis-node';

/**
 * QUIT, then wait (briefly) until the socket is really closed, so shutdown leaves no handle.
 * A Sentinel connection that follows failovers (`failoverDetector`) also has subscriptions to
 * the sentinels, which QUIT leaves open (ioredis #1362): `disconnect()` closes them.
 * @internal
 */
export async function closeConnection(redis: RedisNode): Promise<void> {
  if (redis.status === 'end') return closeDetector(redis);
  const ended = new Promise<void>((resolve) => {
    redis.once('end', () => resolve());
    setTimeout(resolve, 1_000).unref();
  });
  await redis.quit().catch(() => redis.disconnect());
  await ended;
  closeDetector(redis);
}

function closeDetector(redis: RedisNode): void {
  if ('failoverDetector' in redis.options && redis.options.failoverDetector) redis.disconnect();
}

/** How long after ioredis ended a connection it is connected again. */
const REVIVE_MS = 500;

/**
 * Connects `redis` again whenever ioredis ends it for good (status 'end') while `closed()` is
 * false: ioredis does so when a Sentinel switch (`failoverDetector`) lands while it is still
 * asking the sentinels for the primary, and when its reconnecting stops. Without this, a group
 * stays without locks (or without grant messages) until the app restarts.
 * @internal
 */
export function reviveWhenEnded(redis: RedisNode, closed: () => boolean): void {
  if (isCluster(redis)) return;
  redis.on('end', () => {
    if (closed()) return;
    setTimeout(() => {
      if (!closed() && redis.status === 'end') redis.connect().catch(() => undefined);
    }, REVIVE_MS).unref();
  });
}
