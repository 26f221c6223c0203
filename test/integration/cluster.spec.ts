import { Injectable, type INestApplication } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { LockContext, Locked, LockService, SegmentExhaustedError } from 'nest-locked';
import { findOverlaps, now } from '../support/intervals';
import { createLockApp, sleep, uniquePrefix } from '../support/lock-app';
import { type RedisClusterHandle, startRedisCluster } from '../support/redis-server';

/**
 * Redis Cluster (3 masters): keys spread over slots, multi-key locks across slots work without
 * CROSSSLOT errors, segmented slices land on different slots, and the grant queue works.
 */
jest.setTimeout(90_000);

let cluster: RedisClusterHandle;
let client: Cluster;
let app: INestApplication;
let prefix: string;
const spans: { key: string; start: number; end: number }[] = [];

@Injectable()
class Bank {
  balances = new Map<string, number>();

  @Locked(['account:{from}', 'account:{to}'])
  async transfer(from: string, to: string, amount: number): Promise<void> {
    const a = this.balances.get(from) ?? 0;
    const b = this.balances.get(to) ?? 0;
    await sleep(1);
    this.balances.set(from, a - amount);
    this.balances.set(to, b + amount);
  }

  @Locked('stock:{sku}', { segments: 8 })
  async takeSlice(sku: string, exhausted: Set<number>): Promise<number> {
    const { segment } = LockContext.current()!;
    if (exhausted.has(segment!)) throw new SegmentExhaustedError();
    await sleep(5);
    return segment!;
  }

  @Locked('hot:{id}', { waitTimeout: 20_000 })
  async hot(id: string): Promise<void> {
    const start = now();
    await sleep(1);
    spans.push({ key: id, start, end: now() });
  }
}

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  client = new Cluster(cluster.startupNodes, { lazyConnect: false });
  prefix = uniquePrefix('cluster');
  app = await createLockApp({
    options: { clients: [client], keyPrefix: prefix },
    providers: [Bank],
  });
});

afterAll(async () => {
  await app?.close();
  // The module never closes an instance the user passed in: we do.
  await client?.quit().catch(() => client.disconnect());
  await cluster?.stop();
});

const slotOf = async (key: string) => Number(await client.cluster('KEYSLOT', key));

it('takes multi-key locks over keys in different slots, without deadlock', async () => {
  const keys = ['account:A', 'account:B'].map((k) => `${prefix}{${k}}`);
  const slots = await Promise.all(keys.map(slotOf));
  expect(new Set(slots).size).toBe(2);

  const bank = app.get(Bank);
  bank.balances.set('A', 1_000).set('B', 1_000);
  await Promise.all([
    ...Array.from({ length: 30 }, () => bank.transfer('A', 'B', 3)),
    ...Array.from({ length: 30 }, () => bank.transfer('B', 'A', 2)),
  ]);
  expect(bank.balances.get('A')! + bank.balances.get('B')!).toBe(2_000);
  expect(bank.balances.get('A')).toBe(1_000 - 90 + 60);
});

it('spreads the slices of a segmented key over several slots', async () => {
  const slices = Array.from({ length: 8 }, (_, i) => `${prefix}{stock:x:seg:${i}}`);
  const slots = new Set(await Promise.all(slices.map(slotOf)));
  expect(slots.size).toBeGreaterThan(1);

  const bank = app.get(Bank);
  const taken = await Promise.all(
    Array.from({ length: 16 }, () => bank.takeSlice('x', new Set([0, 1]))),
  );
  expect(taken.every((s) => s >= 2 && s < 8)).toBe(true);
});

it('keeps one holder at a time on a hot key, and hands over by grant', async () => {
  const other = await createLockApp({
    options: { clients: [client], keyPrefix: prefix },
    providers: [Bank],
  });
  try {
    const before = other.get(LockService).stats();
    await Promise.all([
      ...Array.from({ length: 20 }, () => app.get(Bank).hot('h1')),
      ...Array.from({ length: 20 }, () => other.get(Bank).hot('h1')),
    ]);
    expect(spans).toHaveLength(40);
    expect(findOverlaps(spans)).toEqual([]);
    const grants =
      other.get(LockService).stats().grants - before.grants + app.get(LockService).stats().grants;
    expect(grants).toBeGreaterThan(0);
  } finally {
    await other.close();
  }
});
