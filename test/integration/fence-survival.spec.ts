import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockService } from 'nest-locked';
import { strictlyIncreasing } from '../support/faults';
import { createLockApp, lockRedisKey, sleep, uniquePrefix } from '../support/lock-app';
import {
  type RedisServerHandle,
  startRedisServer,
  startRedisServers,
} from '../support/redis-server';

jest.setTimeout(60_000);

/** Fences of `n` holds of `key`, one after the other. */
async function fencesOf(locks: LockService, key: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await locks.using(key, ({ fence }) => fence));
  return out;
}

/**
 * Fences of `n` holds of `key` once the lock connections are back after a restart: tried up to 50
 * times, 100 ms apart; none (an empty list) if every try failed.
 */
async function fencesOnceBack(locks: LockService, key: string, n: number): Promise<number[]> {
  let fences: number[] = [];
  for (let i = 0; i < 50 && fences.length === 0; i++) {
    fences = await fencesOf(locks, key, n).catch(async () => {
      await sleep(100);
      return [];
    });
  }
  return fences;
}

describe('fences never go backwards (single node)', () => {
  let server: RedisServerHandle;
  let app: INestApplication;
  let locks: LockService;
  let raw: Redis;
  const keyPrefix = uniquePrefix('fence-survival');

  beforeAll(async () => {
    server = await startRedisServer();
    raw = new Redis(server.url);
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix, waitTimeout: 2_000 },
    });
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    raw?.disconnect();
    await server?.stop();
  });

  it('after Redis restarted without persistence, the next fence is larger than every earlier one', async () => {
    const before = await fencesOf(locks, 'restart:a', 5);
    await server.restart();
    // The lock connection reconnects by itself; give it a moment.
    const after = await fencesOnceBack(locks, 'restart:a', 5);
    expect(strictlyIncreasing([...before, ...after])).toBe(true);
  });

  it('after the fence counter was evicted (deleted), the next fence is larger', async () => {
    const before = await fencesOf(locks, 'evict:a', 3);
    await raw.del(`${lockRedisKey(keyPrefix, 'evict:a')}:fence`);
    const after = await fencesOf(locks, 'evict:a', 3);
    expect(strictlyIncreasing([...before, ...after])).toBe(true);
  });

  it('after the fence counter came back behind (a promoted replica, an old snapshot), the next fence is above the server clock', async () => {
    const before = await fencesOf(locks, 'behind:a', 3);
    await raw.set(`${lockRedisKey(keyPrefix, 'behind:a')}:fence`, '1000', 'PX', 60_000);
    const [seconds, micros] = await raw.time();
    const serverUs = Number(seconds) * 1_000_000 + Number(micros);
    const after = await fencesOf(locks, 'behind:a', 3);
    expect(after[0]).toBeGreaterThan(serverUs);
    expect(strictlyIncreasing([...before, ...after])).toBe(true);
  });

  it('fence counters expire: an idle key leaves nothing behind for good', async () => {
    await fencesOf(locks, 'idle:a', 1);
    const pttl = await raw.pttl(`${lockRedisKey(keyPrefix, 'idle:a')}:fence`);
    expect(pttl).toBeGreaterThan(0);
  });

  it('a fence counter lives about a minute, not a day: 200,000 keys used once leave no counter an hour later', async () => {
    await fencesOf(locks, 'idle:b', 2);
    const pttl = await raw.pttl(`${lockRedisKey(keyPrefix, 'idle:b')}:fence`);
    expect(pttl).toBeGreaterThan(0);
    // Every counter is seeded from the server clock, so one that expired cannot make fences go
    // back (the tests above): it needs to live only long enough to hand out its blocks.
    expect(pttl).toBeLessThanOrEqual(2 * 60_000);
  });
});

describe('fences never go backwards (quorum of 3)', () => {
  let servers: RedisServerHandle[];
  let app: INestApplication;
  let locks: LockService;
  const keyPrefix = uniquePrefix('fence-survival-q');

  beforeAll(async () => {
    servers = await startRedisServers(3);
    app = await createLockApp({
      // A node restarted empty votes again a lease (the group's ttl) after its start: a short
      // ttl keeps the test from waiting the default 30 s for the majority to come back.
      options: { clients: servers.map((s) => s.url), keyPrefix, waitTimeout: 2_000, ttl: 3_000 },
    });
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await Promise.all((servers ?? []).map((s) => s.stop()));
  });

  it('two of three nodes restarted empty: the next fence is larger than every earlier one', async () => {
    const before = await fencesOf(locks, 'q:a', 5);
    await servers[0].restart();
    await servers[1].restart();
    const after = await fencesOnceBack(locks, 'q:a', 5);
    expect(strictlyIncreasing([...before, ...after])).toBe(true);
  });
});
