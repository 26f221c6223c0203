import { LockConfigError } from '../../errors';
import { loadOptionalPeer } from '../../optional-peer';
import { REDIS_PEER_MISSING } from './redis.messages';

/** What the library uses of ioredis at run time: the connection class and its URL parser. */
interface RedisDriver {
  readonly Redis: typeof import('ioredis').Redis;
  readonly parseURL: (url: string) => Record<string, unknown>;
}

let driver: RedisDriver | undefined;

/**
 * ioredis, loaded only when a group is Redis (an app on another backend installs none).
 * `field`: the option that made the group Redis, for the error.
 * @throws LockConfigError when ioredis is not installed
 * @internal
 */
export function loadRedisDriver(field: string): RedisDriver {
  if (driver) return driver;
  const ioredis = loadOptionalPeer<typeof import('ioredis')>('ioredis');
  if (!ioredis) throw new LockConfigError(REDIS_PEER_MISSING(field), field);
  // A static import would load ioredis for everyone: required lazily, on purpose.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { parseURL } = require('ioredis/built/utils') as RedisDriver;
  driver = { Redis: ioredis.Redis, parseURL };
  return driver;
}
