import type { INestApplication } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';

/**
 * Watches the EVALSHA calls of an app's connection (its default group, one Redis node): `see`
 * gets each call's script keys, arguments and script SHA just after it was sent. Returns the
 * undo.
 */
export function onEvalsha(
  app: INestApplication,
  see: (keys: string[], argv: unknown[], sha: string) => void,
): () => void {
  const node = (app.get(LockGroupRegistry).get('default') as RedisLockBackend).nodes[0] as Redis;
  const evalsha = node.evalsha.bind(node);
  const watching = (...args: Parameters<Redis['evalsha']>) => {
    const reply = evalsha(...args);
    // The runner passes its arguments as one array (ioredis flattens it).
    const [sha, numkeys, ...rest] = (args as unknown[]).flat() as [string, number, ...unknown[]];
    see(rest.slice(0, Number(numkeys)) as string[], rest.slice(Number(numkeys)), sha);
    return reply;
  };
  node.evalsha = watching as Redis['evalsha'];
  return () => {
    node.evalsha = evalsha;
  };
}
