import type { RedisNode } from './redis-node';

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
