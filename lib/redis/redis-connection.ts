import type { RedisNode } from './redis-node';

/**
 * QUIT, then wait (briefly) until the socket is really closed, so shutdown leaves no handle.
 * @internal
 */
export async function closeConnection(redis: RedisNode): Promise<void> {
  if (redis.status === 'end') return;
  const ended = new Promise<void>((resolve) => {
    redis.once('end', () => resolve());
    setTimeout(resolve, 1_000).unref();
  });
  await redis.quit().catch(() => redis.disconnect());
  await ended;
}
