import { randomBytes } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockContext, Locked } from 'nest-locked';
import type { TransferScenario } from '../fixtures/lock-worker';
import { describeOverlaps, findOverlaps, type Interval, now } from '../support/intervals';
import { createLockApp, sleep, uniquePrefix, within } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { describeResult, linesOf, runWorkers } from '../support/workers';

jest.setTimeout(90_000);

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

describe('multi-key locks across 2 processes', () => {
  it('runs 100 A->B and 100 B->A transfers at once without deadlock, conserving the total', async () => {
    const id = randomBytes(4).toString('hex');
    const [A, B] = [`a-${id}`, `b-${id}`];
    const dataPrefix = `mk:${id}:balance:`;
    await redis.mset(`${dataPrefix}${A}`, '1000', `${dataPrefix}${B}`, '1000');
    // Each process runs half of each direction, so opposite transfers race in and across them.
    const config = (): TransferScenario => ({
      scenario: 'transfer',
      clients: [server.url],
      keyPrefix: `mk:${id}:`,
      dataUrl: server.url,
      dataPrefix,
      timeoutMs: 70_000,
      waitTimeout: 60_000,
      delayMs: 1,
      transfers: [
        { from: A, to: B, amount: 3, count: 50 },
        { from: B, to: A, amount: 2, count: 50 },
      ],
    });
    const results = await runWorkers([config(), config()]);
    for (const r of results)
      expect({ code: r.code, why: describeResult(r) }).toMatchObject({ code: 0 });
    expect(linesOf(results, 'error')).toEqual([]);

    const [a, b] = (await redis.mget(`${dataPrefix}${A}`, `${dataPrefix}${B}`)).map(Number);
    expect(a + b).toBe(2000);
    // Exact, not only conserved: no update of either balance was lost.
    expect([a, b]).toEqual([1000 - 100 * 3 + 100 * 2, 1000 + 100 * 3 - 100 * 2]);

    const holds = linesOf(results, 'hold').map((h) => ({ ...h, by: h.pid }));
    expect(holds).toHaveLength(2 * 200); // one record per key per transfer
    expect(describeOverlaps(findOverlaps(holds))).toBe('');
    expect(findOverlaps(holds)).toHaveLength(0);
  });
});

@Injectable()
class LedgerService {
  readonly balances = new Map<string, number>();
  readonly sections: Interval[] = [];

  // A ring of accounts: A->B, B->C and C->A each need two keys another transfer also needs.
  @Locked(['account:{from}', 'account:{to}'], { waitTimeout: 60_000 })
  async transfer(from: string, to: string, amount: number): Promise<void> {
    const start = now();
    const { keys } = LockContext.current()!;
    const f = this.balances.get(from) ?? 0;
    const t = this.balances.get(to) ?? 0;
    await sleep(1);
    this.balances.set(from, f - amount);
    this.balances.set(to, t + amount);
    const end = now();
    for (const key of keys) this.sections.push({ key, start, end });
  }
}

describe('multi-key locks in one process, high concurrency', () => {
  let app: INestApplication;
  let ledger: LedgerService;

  beforeAll(async () => {
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: uniquePrefix('mk') },
      providers: [LedgerService],
    });
    ledger = app.get(LedgerService);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('runs a ring of transfers (A->B, B->C, C->A) and their reverses without deadlock', async () => {
    const id = randomBytes(4).toString('hex');
    const [A, B, C] = ['a', 'b', 'c'].map((n) => `${n}-${id}`);
    for (const acc of [A, B, C]) ledger.balances.set(acc, 1000);
    const pairs: [string, string][] = [
      [A, B],
      [B, C],
      [C, A],
      [B, A],
      [C, B],
      [A, C],
    ];
    const calls = pairs.flatMap(([from, to]) =>
      Array.from({ length: 20 }, () => ledger.transfer(from, to, 1)),
    );
    await within(Promise.all(calls), 60_000, '120 concurrent transfers');
    expect([A, B, C].map((acc) => ledger.balances.get(acc))).toEqual([1000, 1000, 1000]);
    expect(ledger.sections).toHaveLength(240);
    expect(describeOverlaps(findOverlaps(ledger.sections))).toBe('');
  });
});
