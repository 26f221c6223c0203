import { randomBytes } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { LockBackendError, LockContext, Locked, LockService } from 'nest-locked';
import { describeOverlaps, findOverlaps, type Interval, now } from '../support/intervals';
import { Redis } from 'ioredis';
import {
  createLockApp,
  lockRedisKey,
  sleep,
  timed,
  uniquePrefix,
  until,
} from '../support/lock-app';
import { type RedisServerHandle, startRedisServers, stopAll } from '../support/redis-server';

jest.setTimeout(60_000);

const WAIT = 10_000;
const TTL = 2_000;

@Injectable()
class InventoryService {
  stock = 0;
  readonly sections: (Interval & { fence: number })[] = [];

  @Locked('stock:{sku}', { waitTimeout: WAIT })
  async restock(sku: string): Promise<number> {
    const start = now();
    const { keys, fence } = LockContext.current()!;
    const read = this.stock;
    await sleep(5);
    this.stock = read + 1;
    this.sections.push({ key: keys[0], start, end: now(), fence, by: sku });
    return fence;
  }
}

describe('Redlock quorum over 3 redis-servers', () => {
  let servers: RedisServerHandle[] = [];
  let app: INestApplication;
  let svc: InventoryService;
  let locks: LockService;
  const sku = randomBytes(4).toString('hex');

  beforeAll(async () => {
    servers = await startRedisServers(3);
    app = await createLockApp({
      options: {
        clients: servers.map((s) => s.url),
        keyPrefix: uniquePrefix('quorum'),
        waitTimeout: WAIT,
        commandTimeout: 500,
        // The longest lease in use: how long restarted nodes wait before they vote again.
        ttl: TTL,
      },
      providers: [InventoryService],
    });
    svc = app.get(InventoryService);
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app?.close();
    await stopAll(servers);
  });

  /** Runs `n` concurrent calls on one key and checks they excluded each other. */
  async function hammer(n: number): Promise<number[]> {
    svc.stock = 0;
    svc.sections.length = 0;
    const fences = await Promise.all(Array.from({ length: n }, () => svc.restock(sku)));
    expect(svc.stock).toBe(n);
    expect(describeOverlaps(findOverlaps(svc.sections))).toBe('');
    const ordered = [...svc.sections].sort((a, b) => a.start - b.start).map((s) => s.fence);
    for (let i = 1; i < ordered.length; i++) expect(ordered[i]).toBeGreaterThan(ordered[i - 1]);
    return fences;
  }

  let lastFence = 0;

  it('works with every node up', async () => {
    const fences = await hammer(8);
    lastFence = Math.max(...fences);
  });

  it("wakes another process's waiter by the release itself (the two-key release publishes)", async () => {
    const prefix = uniquePrefix('quorum-wake');
    const options = { clients: servers.map((s) => s.url), keyPrefix: prefix, commandTimeout: 500 };
    const [a, b] = await Promise.all([createLockApp({ options }), createLockApp({ options })]);
    const nodes = servers.map((s) => new Redis(s.url));
    try {
      const holder = a.get(LockService);
      const waiter = b.get(LockService);
      const lock = await holder.acquire(`wake:${sku}`, { waitTimeout: 0 });
      const before = waiter.stats();
      const waiting = waiter.acquire(`wake:${sku}`, { waitTimeout: WAIT });
      // The waiter has tried, flagged the key on a majority of the nodes, and subscribed.
      const flag = `${lockRedisKey(prefix, `wake:${sku}`)}:wait`;
      const flagged = async () =>
        (await Promise.all(nodes.map((n) => n.exists(flag)))).filter(Boolean);
      await until(async () => (await flagged()).length >= 2, 'the key flagged on a majority');
      await until(() => waiter.stats().subscriptions === 1, 'the waiter subscribed');
      await lock.release();
      const handle = await waiting;
      const after = waiter.stats();
      expect(after.notifiedWakeups - before.notifiedWakeups).toBe(1);
      expect(after.timerWakeups - before.timerWakeups).toBe(0);
      expect(handle.fence).toBeGreaterThan(lock.fence);
      await handle.release();
    } finally {
      nodes.forEach((n) => n.disconnect());
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('still works with one of three nodes stopped (a minority)', async () => {
    await servers[0].stop();
    const handle = await locks.acquire(`stock:${sku}`, { waitTimeout: 0 });
    expect(handle.fence).toBeGreaterThan(lastFence);
    expect(await locks.isLocked(`stock:${sku}`)).toBe(true);
    await handle.release();
    expect(await locks.isLocked(`stock:${sku}`)).toBe(false);

    const fences = await hammer(8);
    expect(Math.min(...fences)).toBeGreaterThan(handle.fence);
    lastFence = Math.max(...fences);
  });

  it('fails fast with LockBackendError with two of three stopped (no quorum), never waiting out waitTimeout', async () => {
    await servers[1].stop();
    const attempts: (() => Promise<unknown>)[] = [
      () => svc.restock(sku),
      () => locks.acquire(`stock:${sku}`),
      () => locks.isLocked(`stock:${sku}`),
    ];
    for (const call of attempts) {
      const r = await timed(call());
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error).toBeInstanceOf(LockBackendError);
      // Far below waitTimeout (10 s): a lost quorum is not contention.
      expect(r.ms).toBeLessThan(3_000);
    }
  });

  it('works again once they are restarted and have been up a lease, with fences still increasing', async () => {
    await Promise.all([servers[0].restart(), servers[1].restart()]);
    // ioredis reconnects with a backoff, and restarted nodes vote for new locks only a lease
    // (ttl) after their start (Redlock's restart rule): wait (bounded) until a lock can be had.
    let handle: Awaited<ReturnType<LockService['acquire']>> | undefined;
    for (let i = 0; i < 60 && !handle; i++) {
      handle = await locks.acquire(`stock:${sku}`, { waitTimeout: 0 }).catch(() => undefined);
      if (!handle) await sleep(250);
    }
    expect(handle).toBeDefined();
    expect(handle!.fence).toBeGreaterThan(lastFence);
    await handle!.release();

    const fences = await hammer(8);
    expect(Math.min(...fences)).toBeGreaterThan(handle!.fence);
  });
});
