import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockBackendError, LockService } from 'nest-locked';
import { createLockApp, lockRedisKey, sleep, timed, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';

jest.setTimeout(30_000);

describe('a blip shorter than the remaining wait', () => {
  let server: RedisServerHandle;
  let app: INestApplication;
  let raw: Redis;
  const keyPrefix = uniquePrefix('blip');
  const COMMAND_TIMEOUT = 300;

  beforeAll(async () => {
    server = await startRedisServer();
    raw = new Redis(server.url);
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix, commandTimeout: COMMAND_TIMEOUT },
    });
  });

  afterAll(async () => {
    server?.kill('SIGCONT');
    await app?.close();
    raw?.disconnect();
    await server?.stop();
  });

  it('a caller already waiting keeps waiting through a 1 s stall and gets the lock; a new caller fails fast', async () => {
    const locks = app.get(LockService);
    const key = 'blip:a';
    // Held by another tool for 600 ms: the waiter polls when that lease runs out, mid-stall.
    await raw.set(lockRedisKey(keyPrefix, key), 'foreign', 'PX', 600);
    const waiting = timed(locks.acquire(key, { waitTimeout: 5_000 }));
    await sleep(300);
    server.kill('SIGSTOP');
    try {
      await sleep(200);
      // A new caller during the outage: a fast LockBackendError (503), not a wait.
      const fresh = await timed(locks.acquire('blip:other', { waitTimeout: 5_000 }));
      expect(fresh.ok).toBe(false);
      expect(fresh.ok ? undefined : fresh.error).toBeInstanceOf(LockBackendError);
      expect(fresh.ms).toBeLessThan(COMMAND_TIMEOUT + 1_000);
      await sleep(500);
    } finally {
      server.kill('SIGCONT');
    }
    const r = await waiting;
    expect(r.ok ? 'acquired' : String(r.error)).toBe('acquired');
    if (r.ok) await r.value.release();
  });
});
