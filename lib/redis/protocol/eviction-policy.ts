import type { Redis } from 'ioredis';

/**
 * The eviction policy of a server that may evict keys under memory pressure (a `maxmemory` with
 * a policy other than `noeviction`), or undefined when it never evicts, or refuses `CONFIG` (a
 * managed service), or is not reachable. A lock on such a server could vanish and be taken by
 * another caller.
 * @internal
 */
export async function evictionPolicy(server: Redis): Promise<string | undefined> {
  try {
    // One round trip: maxmemory, maxmemory-policy (and the other maxmemory-* settings).
    const pairs = (await server.config('GET', 'maxmemory*')) as string[];
    const setting = (name: string) => {
      const i = pairs.indexOf(name);
      return i < 0 ? undefined : pairs[i + 1];
    };
    const maxmemory = setting('maxmemory');
    const policy = setting('maxmemory-policy');
    const evicts = maxmemory !== undefined && maxmemory !== '0' && policy !== 'noeviction';
    return evicts ? policy : undefined;
  } catch {
    return undefined;
  }
}
