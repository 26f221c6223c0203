import type { INestApplication } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { LockBackendError, LockService } from 'nest-locked';
import { findOverlaps, type Interval, maxConcurrency, now } from '../support/intervals';
import { createLockApp, queuedInRedis, sleep, uniquePrefix, within } from '../support/lock-app';
import {
  type RedisClusterHandle,
  type RedisServerHandle,
  startRedisCluster,
  startRedisServers,
  stopAll,
} from '../support/redis-server';

/**
 * Read/write locks and permits on Redis Cluster (3 masters: the holders zset shares the lock's
 * hash tag; several keys over several slots) and on a 3-server quorum with a node down (reads
 * and writes go on with a majority; a permit needs every node and fails fast).
 */
jest.setTimeout(90_000);

const read = { mode: 'read' as const };

/** Runs `calls` sections from two apps: every 4th a write (or all permits of `permits`). */
async function hammer(
  apps: LockService[],
  key: string,
  calls: number,
  permits?: number,
): Promise<{ writes: Interval[]; shared: Interval[] }> {
  const writes: Interval[] = [];
  const shared: Interval[] = [];
  const section = async (into: Interval[], fence: number) => {
    const start = now();
    await sleep(2 + Math.random() * 4);
    into.push({ key, start, end: now(), fence });
  };
  await within(
    Promise.all(
      Array.from({ length: calls }, (_, i) => {
        const locks = apps[i % apps.length];
        if (permits) {
          return locks.using(key, ({ fence }) => section(shared, fence), {
            permits,
            waitTimeout: 30_000,
          });
        }
        return i % 4 === 0
          ? locks.using(key, ({ fence }) => section(writes, fence), { waitTimeout: 30_000 })
          : locks.using(key, ({ fence }) => section(shared, fence), {
              ...read,
              waitTimeout: 30_000,
            });
      }),
    ),
    60_000,
    'the calls',
  );
  return { writes, shared };
}

function expectExclusiveWrites(writes: Interval[], reads: Interval[]): void {
  const bad = findOverlaps([
    ...writes.map((w) => ({ ...w, by: 'write' })),
    ...reads.map((r) => ({ ...r, by: 'read' })),
  ]).filter(([x, y]) => x.by === 'write' || y.by === 'write');
  expect(bad).toEqual([]);
}

describe('Redis Cluster', () => {
  let cluster: RedisClusterHandle;
  const clients: Cluster[] = [];
  const apps: INestApplication[] = [];
  let locks: LockService[];
  const keyPrefix = uniquePrefix('shared-cluster');

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    for (let i = 0; i < 2; i++) {
      const client = new Cluster(cluster.startupNodes);
      clients.push(client);
      apps.push(await createLockApp({ options: { clients: [client], keyPrefix } }));
    }
    locks = apps.map((a) => a.get(LockService));
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const c of clients) await c.quit().catch(() => c.disconnect());
    await cluster?.stop();
  });

  it('read and write holds: writes exclusive, reads shared', async () => {
    const { writes, shared } = await hammer(locks, 'catalog:1', 60);
    expectExclusiveWrites(writes, shared);
    expect(maxConcurrency(shared)).toBeGreaterThan(1);
  });

  it('a writer queued behind readers is granted by the last reader out; readers behind it after', async () => {
    const r = await locks[0].acquire('catalog:2', read);
    const before = locks[1].stats();
    const order: string[] = [];
    const writer = locks[1].using('catalog:2', () => void order.push('writer'));
    await queuedInRedis(clients[0], keyPrefix, 'catalog:2', 1);
    const late = locks[1].using('catalog:2', () => void order.push('reader'), read);
    await queuedInRedis(clients[0], keyPrefix, 'catalog:2', 2);
    await r.release();
    await within(Promise.all([writer, late]), 5_000, 'writer and reader');
    expect(order).toEqual(['writer', 'reader']);
    const after = locks[1].stats();
    // Both pushed by a release (the writer by the reader's, the reader by the writer's).
    expect(after.grants - before.grants).toBe(2);
    expect(after.timerWakeups - before.timerWakeups).toBe(0);
  });

  it('permits: never more than N, N reached', async () => {
    const { shared } = await hammer(locks, 'gateway:1', 40, 3);
    expect(maxConcurrency(shared)).toBe(3);
    expect(new Set(shared.map((s) => s.fence)).size).toBe(40);
  });

  it('a read hold of several keys in different slots, all or nothing', async () => {
    const keys = ['a:1', 'b:2', 'c:3'];
    const r1 = await locks[0].acquire(keys, read);
    const r2 = await locks[1].acquire(keys, { ...read, waitTimeout: 0 });
    const writer = locks[1].acquire('b:2', { waitTimeout: 3_000 });
    await queuedInRedis(clients[0], keyPrefix, 'b:2', 1);
    await r1.release();
    await r2.release();
    const w = await writer;
    expect(w.fence).toBeGreaterThan(r1.fences['b:2']);
    await w.release();
    expect(await locks[0].isLocked('a:1')).toBe(false);
  });
});

describe('quorum of 3 servers, one stopped', () => {
  let servers: RedisServerHandle[];
  let apps: INestApplication[];
  let locks: LockService[];

  beforeAll(async () => {
    servers = await startRedisServers(3);
    const keyPrefix = uniquePrefix('shared-quorum');
    const clients = servers.map((s) => s.url);
    apps = [];
    for (let i = 0; i < 2; i++) {
      apps.push(await createLockApp({ options: { clients, keyPrefix, commandTimeout: 500 } }));
    }
    locks = apps.map((a) => a.get(LockService));
    await servers[2].stop();
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    await stopAll(servers);
  });

  it('reads and writes go on with the majority', async () => {
    const { writes, shared } = await hammer(locks, 'q:rw', 24);
    expectExclusiveWrites(writes, shared);
    expect(maxConcurrency(shared)).toBeGreaterThan(1);
  });

  it('a permit needs every node: LockBackendError at once, no hang', async () => {
    const started = performance.now();
    await expect(locks[0].acquire('q:p', { permits: 2, waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockBackendError,
    );
    expect(performance.now() - started).toBeLessThan(3_000);
  });
});
