import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockNotAcquiredError, LockService } from 'nest-locked';
import { createLockApp, lockRedisKey, uniquePrefix, until } from '../support/lock-app';
import { type RedisServerHandle, startRedisServers } from '../support/redis-server';

jest.setTimeout(60_000);

describe('quorum repair: renewals put the lock back on nodes that restarted empty', () => {
  let servers: RedisServerHandle[];
  let holderApp: INestApplication;
  let otherApp: INestApplication;
  const keyPrefix = uniquePrefix('repair');

  beforeAll(async () => {
    servers = await startRedisServers(3);
    // ttl 900 ms: a renewal every 300 ms, several between two restarts; and the longest lease
    // in use, that restarted nodes wait out before they vote for a new lock.
    const options = {
      clients: servers.map((s) => s.url),
      keyPrefix,
      commandTimeout: 500,
      ttl: 900,
    };
    holderApp = await createLockApp({ options });
    otherApp = await createLockApp({ options });
  });

  afterAll(async () => {
    await holderApp?.close();
    await otherApp?.close();
    await Promise.all((servers ?? []).map((s) => s.stop()));
  });

  it('three nodes restarted one at a time while a lock is held: never lost, never taken by another app', async () => {
    const key = 'rolling:a';
    const handle = await holderApp.get(LockService).acquire(key);
    const other = otherApp.get(LockService);
    try {
      for (const server of servers) {
        await server.restart();
        // Its next renewal puts the token back on the empty node: then the next one restarts.
        const restarted = new Redis(server.url);
        try {
          await until(
            async () => (await restarted.get(lockRedisKey(keyPrefix, key))) !== null,
            'the token back on the restarted node',
          );
        } finally {
          restarted.disconnect();
        }
        await expect(other.acquire(key, { waitTimeout: 0 })).rejects.toBeInstanceOf(
          LockNotAcquiredError,
        );
        expect(handle.signal.aborted).toBe(false);
      }
      // Every node has the holder's token back.
      const owners = await Promise.all(
        servers.map(async (s) => {
          const r = new Redis(s.url);
          try {
            return await r.get(lockRedisKey(keyPrefix, key));
          } finally {
            r.disconnect();
          }
        }),
      );
      expect(new Set(owners).size).toBe(1);
      expect(owners[0]).not.toBeNull();
    } finally {
      await handle.release();
    }
    // Released everywhere: the other app takes it once the restarted nodes may vote again (a
    // lease after their start: Redlock's restart rule), waiting for that.
    const next = await other.acquire(key, { waitTimeout: 5_000 });
    await next.release();
  });
});
