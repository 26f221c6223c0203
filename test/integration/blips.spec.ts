import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockBackendError, LockService } from 'nest-locked';
import {
  createLockApp,
  lockRedisKey,
  queuedInRedis,
  sleep,
  timed,
  uniquePrefix,
} from '../support/lock-app';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';

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
    await queuedInRedis(raw, keyPrefix, key, 1);
    server.kill('SIGSTOP');
    try {
      await sleep(200); // into the stall: the scenario
      // A new caller during the outage: a fast LockBackendError (503), not a wait.
      const fresh = await timed(locks.acquire('blip:other', { waitTimeout: 5_000 }));
      expect(fresh.ok).toBe(false);
      expect(fresh.ok ? undefined : fresh.error).toBeInstanceOf(LockBackendError);
      expect(fresh.ms).toBeLessThan(COMMAND_TIMEOUT + 1_000);
      await sleep(500); // the rest of the stall (about 1 s in all): the scenario
    } finally {
      server.kill('SIGCONT');
    }
    const r = await waiting;
    expect(r.ok ? 'acquired' : String(r.error)).toBe('acquired');
    if (r.ok) await r.value.release();
  });
});

describe('a connection ioredis gave up on (status "end")', () => {
  // ioredis ends a Sentinel connection for good when a `+switch-master` (failoverDetector) lands
  // while it is still asking the sentinels for the primary ("Connection is closed."), and any
  // connection whose reconnecting stops. An app must not stay without locks until a restart.
  let server: RedisServerHandle;
  let app: INestApplication;
  const keyPrefix = uniquePrefix('ended');

  beforeAll(async () => {
    server = await startRedisServer();
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix, commandTimeout: 300 },
    });
  });

  afterAll(async () => {
    await app?.close();
    await server?.stop();
  });

  it('the lock connection and the subscriber are connected again: locks work and grants are heard within seconds', async () => {
    const locks = app.get(LockService);
    await locks.using('ended:warm', () => undefined);
    const registry = app.get(LockGroupRegistry);
    const client = registry.get('default') as RedisLockBackend;
    await client.notifier.ready();
    // Opened from the URL the module was given: a connection the group owns.
    const node = client.nodes[0] as Redis;
    const subscriber = (client.notifier as unknown as { subs: { conn: Redis }[] }).subs[0].conn;
    const ended = Promise.all([node, subscriber].map((c) => new Promise((r) => c.once('end', r))));
    node.disconnect();
    subscriber.disconnect();
    await ended;

    let again = await timed(locks.using('ended:again', () => undefined));
    for (let i = 0; i < 30 && !again.ok; i++) {
      await sleep(100);
      again = await timed(locks.using('ended:again', () => undefined));
    }
    let listening = client.notifier.listening;
    for (let i = 0; i < 30 && !listening; i++) {
      await sleep(100);
      listening = client.notifier.listening;
    }
    expect({ locks: again.ok, listening }).toEqual({ locks: true, listening: true });
  });
});
