import { Redis } from 'ioredis';
import { startRedisServer } from '../../test/support/redis-server';
import type { BenchTarget } from './bench-target';

/** Compare-and-delete: the release of the raw floor (the same as redlock's). */
const RELEASE =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/** Redis, one node: the reference column of the backends table. */
export const target: BenchTarget = {
  name: 'redis',
  floor: 'SET NX PX + EVALSHA compare-and-delete, one connection',
  async start() {
    const server = await startRedisServer();
    return {
      definition() {
        throw new Error('a Redis group is configured with clients, not a backend definition');
      },
      moduleOptions: () => ({ clients: [server.url] }),
      async rawCycle() {
        const redis = new Redis(server.url);
        const sha = (await redis.script('LOAD', RELEASE)) as string;
        let n = 0;
        return {
          async cycle(key: string) {
            const token = String(++n);
            if ((await redis.set(key, token, 'PX', 30_000, 'NX')) !== 'OK')
              throw new Error(`raw floor: ${key} was busy`);
            await redis.evalsha(sha, 1, key, token);
          },
          close: async () => void (await redis.quit()),
        };
      },
      stop: () => server.stop(),
    };
  },
};
