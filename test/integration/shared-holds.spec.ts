import { Injectable, type INestApplication } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import {
  LockConfigError,
  LockContext,
  Locked,
  LockNotAcquiredError,
  LockService,
  type LockHandle,
} from 'nest-locked';
import { findOverlaps, type Interval, maxConcurrency, now } from '../support/intervals';
import {
  createLockApp,
  lockRedisKey,
  queuedInRedis,
  sleep,
  uniquePrefix,
  until,
  within,
} from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { blockEventLoop, setNxFromAnotherProcess } from '../support/stalls';
import { itWith } from '../support/policies';

jest.setTimeout(30_000);

/**
 * Read/write locks and permits (PRODUCT.md 2.7) on one redis-server, in one process with two
 * apps (two lock clients: two "processes" as far as Redis and the grant channels know).
 */
let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

@Injectable()
class Catalog {
  readonly trail: string[] = [];

  @Locked('doc:{id}', { mode: 'write', waitTimeout: 5_000 })
  async write(id: string, inner?: 'read' | 'write'): Promise<string> {
    const ctx = LockContext.current()!;
    this.trail.push(`write ${ctx.mode} ${ctx.permits}`);
    if (inner === 'read') await this.read(id);
    return ctx.mode;
  }

  @Locked('doc:{id}', { mode: 'read', waitTimeout: 5_000 })
  async read(id: string, inner?: 'read' | 'write'): Promise<string> {
    const ctx = LockContext.current()!;
    this.trail.push(`read ${ctx.mode} ${ctx.permits}`);
    if (inner === 'write') await this.write(id);
    if (inner === 'read') await this.read(id);
    return ctx.mode;
  }
}

let prefix: string;
let a: INestApplication;
let b: INestApplication;
let locksA: LockService;
let locksB: LockService;

beforeEach(async () => {
  prefix = uniquePrefix('shared');
  const options = { clients: [server.url], keyPrefix: prefix, ttl: 2_000 };
  a = await createLockApp({ options, providers: [Catalog] });
  b = await createLockApp({ options });
  locksA = a.get(LockService);
  locksB = b.get(LockService);
});

afterEach(async () => {
  await a.close();
  await b.close();
});

const read = { mode: 'read' as const };

const clientOf = (app: INestApplication) =>
  app.get(LockGroupRegistry).get('default') as RedisLockBackend;

/**
 * Waits until `count` permit waits of `app` for `key` have no attempt on the way. Once they are
 * in the Redis queue (`queuedInRedis` first), this says their process heard so: only then may a
 * freed permit pass to them in memory. Read from the engine's own record
 * (`SharedHolds.permitWaits`, of `RedisLockBackend.shared`): nothing public says it.
 */
async function permitWaitsQueued(app: INestApplication, key: string, count: number) {
  type Waits = Map<string, Set<{ attempting(): boolean }>>;
  const { shared } = clientOf(app) as unknown as { shared: { permitWaits: Waits } };
  const waits = shared.permitWaits;
  const known = () => [...(waits.get(key) ?? [])].filter((w) => !w.attempting()).length;
  await until(() => known() === count, `${count} permit waits known queued for ${key}`);
}

/**
 * A reader of A that arrives now, while `writer` (queued before it) waits for the share `held`
 * holds, runs only after the writer.
 */
async function lateReaderAfterWriter(
  key: string,
  held: LockHandle,
  writer: Promise<unknown>,
  order: string[],
  options: { mode: 'read'; ttl: number },
): Promise<void> {
  const lateReader = locksA.using(key, () => order.push('late reader'), options);
  await sleep(50);
  expect(order).toEqual([]);
  await held.release();
  await within(Promise.all([writer, lateReader]), 5_000, 'writer and late reader');
  expect(order).toEqual(['writer', 'late reader']);
}

describe('read/write locks', () => {
  it('readers share a key, across clients, each with the current fence; the lock reports it', async () => {
    const w = await locksA.acquire('r:1');
    const writerFence = w.fence;
    expect(w.mode).toBe('write');
    await w.release();
    const r1 = await locksA.acquire('r:1', read);
    const r2 = await locksB.acquire('r:1', read);
    const r3 = await locksB.acquire('r:1', { ...read, waitTimeout: 0 });
    expect([r1.mode, r1.permits]).toEqual(['read', 1]);
    // The counter's value: at least the last writer's fence, below the next writer's.
    for (const r of [r1, r2, r3]) {
      expect(r.fence).toBeGreaterThanOrEqual(writerFence);
      expect(r.fence).toBe(r1.fence);
    }
    expect(await locksA.isLocked('r:1')).toBe(true);
    // A share per reader, of either process.
    expect(await redis.zcard(`${lockRedisKey(prefix, 'r:1')}:h`)).toBe(3);
    await expect(locksB.acquire('r:1', { waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await Promise.all([r1.release(), r2.release(), r3.release()]);
    expect(await locksA.isLocked('r:1')).toBe(false);
    const w2 = await locksB.acquire('r:1', { waitTimeout: 0 });
    expect(w2.fence).toBeGreaterThan(r1.fence);
    await expect(locksA.acquire('r:1', { ...read, waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await w2.release();
  });

  it('a writer waiting behind readers is granted by the last reader out, ahead of later readers', async () => {
    const long = { ...read, ttl: 30_000 };
    const r1 = await locksA.acquire('r:2', long);
    const r2 = await locksB.acquire('r:2', long);
    const order: string[] = [];
    const writer = locksB.using('r:2', async () => {
      order.push('writer');
      await sleep(50);
    });
    await queuedInRedis(redis, prefix, 'r:2', 1);
    const lateReader = locksA.using('r:2', () => order.push('late reader'), long);
    await queuedInRedis(redis, prefix, 'r:2', 2);
    expect(order).toEqual([]);
    await r1.release();
    // Nothing to wait for: this is a window in which a wrong grant (to the writer while r2 still
    // reads, or to the late reader ahead of it) would show.
    await sleep(20);
    expect(order).toEqual([]);
    const before = locksB.stats().grants;
    await r2.release();
    await within(Promise.all([writer, lateReader]), 5_000, 'writer and late reader');
    expect(order).toEqual(['writer', 'late reader']);
    expect(locksB.stats().grants - before).toBe(1);
    expect(locksB.stats().timerWakeups).toBe(0);
  });

  it('readers waiting together behind a writer are granted together', async () => {
    const w = await locksA.acquire('r:3');
    const intervals: Interval[] = [];
    const reader = (locks: LockService) =>
      locks.using(
        'r:3',
        async () => {
          const start = now();
          await sleep(100);
          intervals.push({ key: 'r:3', start, end: now(), fence: 0 });
        },
        read,
      );
    const readers = [reader(locksA), reader(locksB), reader(locksA), reader(locksB)];
    // Every reader waits, each in the Redis queue (a reader queues an entry of its own).
    await queuedInRedis(redis, prefix, 'r:3', 4);
    await w.release();
    await within(Promise.all(readers), 5_000, 'readers');
    expect(maxConcurrency(intervals)).toBe(4);
  });

  it('a write holder enters read holds of its key; a read holder asking to write fails at once', async () => {
    const catalog = a.get(Catalog);
    await expect(catalog.write('d1', 'read')).resolves.toBe('write');
    // The nested read ran inside the write hold: it reports the write hold.
    expect(catalog.trail).toEqual(['write write 1', 'read write 1']);
    await expect(catalog.read('d1', 'read')).resolves.toBe('read');
    const started = performance.now();
    const error = await catalog.read('d1', 'write').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as Error).message).toMatch(/holds it for reading and asked for the write lock/);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(await locksA.isLocked('doc:d1')).toBe(false);
  });

  it('a lost reader lease aborts its signal and frees its share', async () => {
    const r = await locksA.acquire('r:4', { ...read, ttl: 300, watchdog: false });
    await until(() => r.signal.aborted, 'the signal aborted once the 300 ms lease ran out', 3_000);
    // The share ran out in Redis too (the signal aborts a little ahead, for clock drift).
    await until(
      async () => (await redis.exists(lockRedisKey(prefix, 'r:4'))) === 0,
      'the share expired in Redis',
      3_000,
    );
    const w = await locksB.acquire('r:4', { waitTimeout: 0 });
    await w.release();
    await r.release();
  });
});

describe('readers of one process', () => {
  const h = (key: string) => `${lockRedisKey(prefix, key)}:h`;

  it('each hold a share of their own until the last of them lets go', async () => {
    const r1 = await locksA.acquire('j:1', read);
    const r2 = await locksA.acquire('j:1', read);
    const r3 = await locksA.acquire('j:1', { ...read, waitTimeout: 0 });
    // No writer yet: each reader's fence is the server's clock, where the first writer's starts.
    expect(r2.fence).toBeGreaterThanOrEqual(r1.fence);
    expect(r3.fence).toBeGreaterThanOrEqual(r2.fence);
    expect(await redis.zcard(h('j:1'))).toBe(3);
    await r1.release();
    await r3.release();
    // r2 still reads: its share stays, and writers stay out.
    expect(await redis.zcard(h('j:1'))).toBe(1);
    await expect(locksB.acquire('j:1', { waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await r2.release();
    expect(await locksA.isLocked('j:1')).toBe(false);
    expect(locksA.stats().queues).toBe(0);
    const w = await locksB.acquire('j:1', { waitTimeout: 0 });
    expect(w.fence).toBeGreaterThan(r3.fence);
    await w.release();
  });

  it('a writer of their own process waiting: later readers queue behind it', async () => {
    const long = { ...read, ttl: 30_000 };
    const r1 = await locksA.acquire('j:2', long);
    const order: string[] = [];
    const writer = locksA.using('j:2', async () => {
      order.push('writer');
      await sleep(30);
    });
    await queuedInRedis(redis, prefix, 'j:2', 1);
    await lateReaderAfterWriter('j:2', r1, writer, order, long);
  });

  it('a writer of another process queued behind their share: a later reader of theirs does not overtake it', async () => {
    const long = { ...read, ttl: 30_000 };
    const r1 = await locksA.acquire('j:3', long);
    const writer = locksB.acquire('j:3');
    await queuedInRedis(redis, prefix, 'j:3', 1);
    await expect(locksA.acquire('j:3', { ...long, waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    await r1.release();
    const w = await within(writer, 5_000, 'writer');
    await w.release();
  });

  it("a writer of their process granted by their share's release holds its full lease: its claim renewed the claim window", async () => {
    const r1 = await locksA.acquire('j:7', { ...read, ttl: 30_000 });
    const writer = locksA.acquire('j:7', { ttl: 30_000 });
    await queuedInRedis(redis, prefix, 'j:7', 1);
    await r1.release();
    const w = await within(writer, 2_000, 'writer');
    await sleep(1_300); // past the 1 s claim window
    expect(w.signal.aborted).toBe(false);
    expect(await redis.pttl(lockRedisKey(prefix, 'j:7'))).toBeGreaterThan(25_000);
    await w.release();
  });

  it('a reader whose share ran out lets go without freeing the share of a later reader', async () => {
    const r1 = await locksA.acquire('j:4', { ...read, ttl: 300, watchdog: false });
    await sleep(400);
    const r2 = await locksA.acquire('j:4', { ...read, waitTimeout: 0 });
    expect(await redis.zcard(h('j:4'))).toBe(1);
    await r1.release();
    // r1's release gave back nothing of r2's.
    expect(await locksB.isLocked('j:4')).toBe(true);
    await r2.release();
    expect(await locksB.isLocked('j:4')).toBe(false);
  });

  it('a reader with minHold leaves first: the key stays read-locked until minHold after the last release', async () => {
    const r1 = await locksA.acquire('j:5', read);
    const started = performance.now();
    await locksA.using('j:5', () => undefined, { ...read, minHold: 600 });
    await r1.release();
    expect(await locksB.isLocked('j:5')).toBe(true);
    const w = await within(locksB.acquire('j:5', { waitTimeout: 3_000 }), 5_000, 'writer');
    expect(performance.now() - started).toBeGreaterThanOrEqual(550);
    await w.release();
  });
});

describe('release by expiry, several keys, shutdown', () => {
  it('a read hold with minHold stays until minHold, then frees by itself', async () => {
    await locksA.using('m:1', () => undefined, { ...read, minHold: 300 });
    expect(await locksB.isLocked('m:1')).toBe(true);
    await expect(locksB.acquire('m:1', { waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    const w = await locksB.acquire('m:1', { waitTimeout: 2_000 });
    await w.release();
  });

  it('a read hold of several keys, all or nothing; a writer of one of them waits for it', async () => {
    const r1 = await locksA.acquire(['s:a', 's:b'], read);
    const r2 = await locksB.acquire(['s:b', 's:a'], { ...read, waitTimeout: 0 });
    const w = await locksB.acquire(['s:b', 's:c'], { waitTimeout: 0 }).catch((e: unknown) => e);
    expect(w).toBeInstanceOf(LockNotAcquiredError);
    // Nothing of the refused call stayed behind.
    expect(await locksA.isLocked('s:c')).toBe(false);
    const writer = locksB.acquire('s:b', { waitTimeout: 3_000 });
    await queuedInRedis(redis, prefix, 's:b', 1);
    await r1.release();
    await r2.release();
    const held = await writer;
    expect(held.fence).toBeGreaterThan(r1.fences['s:b']);
    await held.release();
  });

  it('counts shared waits and holds in stats().queues, and none once they are over', async () => {
    const w = await locksA.acquire('st:1');
    const waiting = locksB.acquire('st:1', read);
    await queuedInRedis(redis, prefix, 'st:1', 1);
    expect(locksB.stats().queues).toBe(1);
    await w.release();
    const r = await waiting;
    expect(locksB.stats().queues).toBe(1);
    await r.release();
    expect(locksB.stats().queues).toBe(0);
  });

  it('shutdown releases shared holds and aborts their signals', async () => {
    const other = await createLockApp({
      options: { clients: [server.url], keyPrefix: prefix, ttl: 30_000 },
    });
    const r = await other.get(LockService).acquire('sd:1', read);
    const p = await other.get(LockService).acquire('sd:2', { permits: 2 });
    await other.close();
    expect(r.signal.aborted).toBe(true);
    expect(p.signal.aborted).toBe(true);
    expect(await locksA.isLocked('sd:1')).toBe(false);
    expect(await locksA.isLocked('sd:2')).toBe(false);
  });
});

describe('permits', () => {
  it('admits N holders at once, each with a new, larger fence, FIFO after that', async () => {
    const held: LockHandle[] = [];
    for (let i = 0; i < 3; i++) {
      held.push(await (i % 2 ? locksB : locksA).acquire('p:1', { permits: 3, waitTimeout: 0 }));
    }
    const fences = held.map((h) => h.fence);
    expect([...fences].sort((x, y) => x - y)).toEqual(fences);
    expect(new Set(fences).size).toBe(3);
    expect(held[0].permits).toBe(3);
    expect(held[0].mode).toBe('write');
    await expect(locksB.acquire('p:1', { permits: 3, waitTimeout: 0 })).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    const next = locksB.acquire('p:1', { permits: 3 });
    await queuedInRedis(redis, prefix, 'p:1', 1);
    await held[1].release();
    const fourth = await within(next, 2_000, 'the fourth permit');
    expect(fourth.fence).toBeGreaterThan(Math.max(...fences));
    for (const h of [held[0], held[2], fourth]) await h.release();
    expect(await locksA.isLocked('p:1')).toBe(false);
  });

  it('a lost permit aborts its holder signal at the next renewal; the others keep theirs', async () => {
    const lost = await locksA.acquire('p:4', { permits: 2, ttl: 1_500 });
    const kept = await locksB.acquire('p:4', { permits: 2, ttl: 1_500 });
    const lockKey = lockRedisKey(prefix, 'p:4');
    const [token, other] = await redis.zrange(`${lockKey}:h`, 0, 1);
    const keptUntil = Number(await redis.zscore(`${lockKey}:h`, other));
    // Its share is gone (as if another client had taken it away).
    await redis.zrem(`${lockKey}:h`, token);
    await until(() => lost.signal.aborted || kept.signal.aborted, 'the lost signal', 4_000);
    // The other holder renewed its share since (its expiry, the score, moved on): it was not
    // taken for lost.
    await until(
      async () => Number(await redis.zscore(`${lockKey}:h`, other)) > keptUntil,
      'the other share renewed',
      4_000,
    );
    expect([lost.signal.aborted, kept.signal.aborted].sort()).toEqual([false, true]);
    expect((lost.signal.aborted ? lost : kept).signal.reason).toMatchObject({
      name: 'LockLostError',
    });
    await lost.release();
    await kept.release();
    expect(await locksA.isLocked('p:4')).toBe(false);
  });

  it('a caller of a process whose others already queue for the key goes straight into the queue (no first try)', async () => {
    const two = { permits: 2, waitTimeout: 5_000 };
    const held = [await locksB.acquire('p:q', two), await locksB.acquire('p:q', two)];
    const first = locksA.acquire('p:q', two);
    await queuedInRedis(redis, prefix, 'p:q', 1);
    await permitWaitsQueued(a, 'p:q', 1);
    const before = locksA.stats().attempts;
    const second = locksA.acquire('p:q', two);
    await queuedInRedis(redis, prefix, 'p:q', 2);
    // One attempt: the one that queued it.
    expect(locksA.stats().attempts - before).toBe(1);
    await Promise.all(held.map((h) => h.release()));
    const got = await within(Promise.all([first, second]), 5_000, 'queued permits');
    await Promise.all(got.map((h) => h.release()));
  });

  itWith('permitPass')(
    'a freed permit passes to the next permit caller of the same process, with a new, larger fence',
    async () => {
      const two = { permits: 2, waitTimeout: 5_000 };
      const p1 = await locksA.acquire('p:pass', two);
      const p2 = await locksA.acquire('p:pass', two);
      const waiting = locksA.acquire('p:pass', two);
      await queuedInRedis(redis, prefix, 'p:pass', 1);
      await permitWaitsQueued(a, 'p:pass', 1);
      const handoffs = locksA.stats().localHandoffs;
      await p1.release();
      const p3 = await within(waiting, 2_000, 'passed permit');
      expect(locksA.stats().localHandoffs - handoffs).toBe(1);
      expect(p3.fence).toBeGreaterThan(Math.max(p1.fence, p2.fence));
      const k = lockRedisKey(prefix, 'p:pass');
      // Two shares (the passed one is p1's token), and nobody left in the queue.
      expect(await redis.zcard(`${k}:h`)).toBe(2);
      expect(await redis.zcard(`${k}:q`)).toBe(0);
      await Promise.all([p2.release(), p3.release()]);
      expect(await locksA.isLocked('p:pass')).toBe(false);
      expect(locksA.stats().queues).toBe(0);
    },
  );

  itWith('permitPass')(
    'a permit passes within its process at most localHandoffs (4) times in a row, then to the oldest waiter of another process',
    async () => {
      const two = { permits: 2, waitTimeout: 10_000 };
      const order: string[] = [];
      const pB = await locksB.acquire('p:turns', two);
      const pA = await locksA.acquire('p:turns', two);
      const other = locksB.using('p:turns', () => order.push('B'), two);
      await queuedInRedis(redis, prefix, 'p:turns', 1); // B's waiter first
      const ours = [1, 2, 3, 4, 5, 6].map((i) =>
        locksA.using(
          'p:turns',
          async () => {
            order.push(`A${i}`);
            await sleep(5);
          },
          two,
        ),
      );
      await queuedInRedis(redis, prefix, 'p:turns', 7); // A's waiters behind it
      await permitWaitsQueued(a, 'p:turns', 6);
      await pA.release();
      await within(other, 5_000, "B's waiter");
      await pB.release();
      await within(Promise.all(ours), 5_000, "A's waiters");
      expect(order.slice(0, 5)).toEqual(['A1', 'A2', 'A3', 'A4', 'B']);
    },
  );

  itWith('permitPass')(
    'with no waiter of another process ahead, a permit keeps passing within its process past localHandoffs (4)',
    async () => {
      const two = { permits: 2, waitTimeout: 10_000 };
      const p1 = await locksA.acquire('p:alone', two);
      const p2 = await locksA.acquire('p:alone', two);
      const order: number[] = [];
      const waiters = Array.from({ length: 12 }, (_, i) =>
        locksA.using(
          'p:alone',
          async () => {
            order.push(i);
            await sleep(2);
          },
          two,
        ),
      );
      await queuedInRedis(redis, prefix, 'p:alone', 12);
      await permitWaitsQueued(a, 'p:alone', 12);
      const before = locksA.stats();
      await Promise.all([p1.release(), p2.release()]);
      await within(Promise.all(waiters), 5_000, 'the waiters');
      const after = locksA.stats();
      // Every waiter got a passed permit: none went back to the Redis queue to be granted.
      expect({
        passed: after.localHandoffs - before.localHandoffs,
        granted: after.grants - before.grants,
      }).toEqual({ passed: 12, granted: 0 });
      expect(order).toEqual(order.slice().sort((x, y) => x - y));
    },
  );

  it('refuses a call with another N than the current holders, naming both', async () => {
    const h = await locksA.acquire('p:2', { permits: 3 });
    const error = await locksB.acquire('p:2', { permits: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as Error).message).toMatch(/permits: 5.*permits: 3/);
    const asReader = await locksB.acquire('p:2', read).catch((e: unknown) => e);
    expect(asReader).toBeInstanceOf(LockConfigError);
    await h.release();
  });

  it('never more than N at once, and N reached, under load from two clients', async () => {
    const intervals: Interval[] = [];
    const call = (locks: LockService) =>
      locks.using(
        'p:3',
        async ({ fence }) => {
          const start = now();
          await sleep(5 + Math.random() * 10);
          intervals.push({ key: 'p:3', start, end: now(), fence });
        },
        { permits: 3, waitTimeout: 10_000 },
      );
    const calls: Promise<void>[] = [];
    for (let i = 0; i < 30; i++) calls.push(call(i % 2 ? locksA : locksB));
    await within(Promise.all(calls), 20_000, 'permit calls');
    expect(maxConcurrency(intervals)).toBe(3);
    expect(new Set(intervals.map((i) => i.fence)).size).toBe(30);
    expect(locksA.stats().queues + locksB.stats().queues).toBe(0);
  });
});

it('keeps write holds exclusive of read holds under load (no overlap, readers overlap)', async () => {
  const writes: Interval[] = [];
  const reads: Interval[] = [];
  const section = async (into: Interval[], fence: number) => {
    const start = now();
    await sleep(2 + Math.random() * 5);
    into.push({ key: 'rw', start, end: now(), fence });
  };
  const calls: Promise<void>[] = [];
  for (let i = 0; i < 60; i++) {
    const locks = i % 2 ? locksA : locksB;
    calls.push(
      i % 4 === 0
        ? locks.using('rw', ({ fence }) => section(writes, fence), { waitTimeout: 15_000 })
        : locks.using('rw', ({ fence }) => section(reads, fence), { ...read, waitTimeout: 15_000 }),
    );
  }
  await within(Promise.all(calls), 25_000, 'read/write calls');
  const cross = findOverlaps([
    ...writes.map((w) => ({ ...w, by: 'write' })),
    ...reads.map((r) => ({ ...r, by: 'read' })),
  ]).filter(([x, y]) => x.by === 'write' || y.by === 'write');
  expect(cross).toEqual([]);
  expect(maxConcurrency(reads)).toBeGreaterThan(1);
});

itWith('localHandoff')(
  'keeps the exclusive path: an uncontended cycle is TRY (two keys) + RELEASE, hot sections pass on in memory, while other keys have readers and permits',
  async () => {
    const node = clientOf(a).nodes[0] as Redis;
    const evalsha = node.evalsha.bind(node);
    const sent: string[][] = [];
    const key = lockRedisKey(prefix, 'excl:1');
    node.evalsha = ((...args: Parameters<Redis['evalsha']>) => {
      // The ScriptRunner passes its arguments as one array (ioredis flattens it).
      const argv = (args.length === 1 && Array.isArray(args[0]) ? args[0] : args) as unknown[];
      const [, numkeys, ...rest] = argv as [string, number, ...string[]];
      if (rest[0] === key) sent.push(rest.slice(0, Number(numkeys)));
      return evalsha(...args);
    }) as Redis['evalsha'];
    const readers = await Promise.all([
      locksA.acquire('other:r', read),
      locksB.acquire('other:r', read),
    ]);
    const permit = await locksA.acquire('other:p', { permits: 4 });
    try {
      for (let i = 0; i < 3; i++) await locksA.using('excl:1', () => undefined);
      expect(sent).toEqual(
        Array.from({ length: 3 }, () => [
          [key, `${key}:fence`],
          [key, `${key}:fence`, `${key}:wait`, `${key}:q`, `${key}:qm`, `${key}:h`],
        ]).flat(),
      );
      // A hot key: callers of this process pass it on in memory (no script per section).
      sent.length = 0;
      await Promise.all(Array.from({ length: 4 }, () => locksA.using('excl:1', () => sleep(1))));
      expect(sent.length).toBeLessThanOrEqual(2);
    } finally {
      node.evalsha = evalsha;
      for (const h of [...readers, permit]) await h.release();
    }
  },
);

it('a shared grant read after its claim ran out is not a hold (defect 14, for readers)', async () => {
  const key = 'claim:1';
  const rk = lockRedisKey(prefix, key);
  const held = await locksA.acquire(key, { ttl: 5_000 });
  const waiting = locksB
    .acquire(key, { ...read, ttl: 5_000, waitTimeout: 6_000 })
    .then(async (h) => {
      const owner = await redis.get(rk);
      await h.release();
      return owner;
    });
  await queuedInRedis(redis, prefix, key, 1);
  // Another client takes the key once the grant's claim (1 s) ran out.
  const intruder = setNxFromAnotherProcess(server.port, rk, 'intruder', {
    delayMs: 1_400,
    pxMs: 1_500,
  });
  await held.release();
  // The grant message waits in the socket while this process is stalled past the claim.
  blockEventLoop(2_200);
  const ownerWhenReaderRan = await waiting;
  const said = await intruder;
  expect(said.trim()).toBe('OK');
  expect(ownerWhenReaderRan).toBe('\0r');
});
