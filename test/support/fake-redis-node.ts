import type { RedisNode } from '../../lib/redis/protocol/redis-node';
import { RELEASE, TRY } from '../../lib/redis/protocol/scripts';

/** Lets every pending promise callback and tick run. */
export const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A node whose socket records what happens to it, for unit tests of the script runner: the
 * writes of ioredis are not simulated, only the corking around them and the EVALSHA calls
 * (answered with `reply`).
 */
export function fakeNode(status = 'ready', reply: unknown = 1) {
  const log: string[] = [];
  const stream = {
    cork: () => log.push('cork'),
    uncork: () => log.push('uncork'),
  };
  const node = {
    status,
    stream,
    evalsha: (...args: unknown[]) => {
      const sha = args.flat()[0] as string;
      log.push(sha === TRY.sha ? 'TRY' : sha === RELEASE.sha ? 'RELEASE' : sha);
      return Promise.resolve(reply);
    },
  } as unknown as RedisNode;
  return { node, log };
}
