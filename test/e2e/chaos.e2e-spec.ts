import { ChaosHookServer } from '../../scripts/chaos-hook-server';
import { ChaosInstances } from '../../scripts/chaos-instances';
import { CHAOS_ROWS, type ChaosSaleResult, runChaosSale } from '../../scripts/chaos-sale';
import { chaosSchedule } from '../../scripts/chaos-schedule';
import { processExists } from '../support/pid-registry';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';
import { tempDir } from './support/sample-app';

/**
 * `npm run demo -- --chaos`, shorter (stock 40, lease 1 s): three sample processes sell while a
 * seeded schedule stalls one holder of the product lock past its lease, restarts Redis without
 * persistence under another and SIGKILLs a third; once with the lock only, once with the fenced
 * write. The faults hit at exact points of a purchase (the sample's chaos hook), so what the
 * late writes do is known: applied after newer sales without the fence, refused with it.
 */

const STOCK = 40;
const TTL_MS = 1_000;
const schedule = chaosSchedule(7, { stock: STOCK, ttlMs: TTL_MS });
const pids: number[] = [];

let redis: RedisServerHandle;
let hook: ChaosHookServer;
let instances: ChaosInstances;
let dir: ReturnType<typeof tempDir>;
const results = new Map<string, ChaosSaleResult>();

beforeAll(async () => {
  redis = await startRedisServer();
  hook = await ChaosHookServer.start();
  dir = tempDir('e2e-chaos');
  instances = await ChaosInstances.start({
    instances: 3,
    redisUrls: [redis.url],
    dbPath: `${dir.path}/shop.sqlite`,
    latencyMs: 5,
    lockWaitMs: 30_000,
    lockTtlMs: TTL_MS,
    chaosUrl: hook.url,
    namePrefix: 'chaos',
  });
  for (const row of CHAOS_ROWS) {
    const result = await runChaosSale({
      row,
      schedule,
      stock: STOCK,
      buyers: 6,
      instances,
      redis,
      hook,
      dbPath: `${dir.path}/shop.sqlite`,
      log: () => undefined,
      timeoutMs: 30_000,
    });
    results.set(row.mode, result);
    for (const f of result.faults) pids.push(f.pid);
  }
  pids.push(...instances.instances.map((i) => i.pid));
}, 90_000);

afterAll(async () => {
  await instances?.stop();
  await hook?.stop();
  await redis?.stop();
  dir?.remove();
}, 30_000);

const row = (mode: 'product' | 'fenced') => results.get(mode)!;
const lateWrites = (r: ChaosSaleResult) =>
  r.faults.filter((f) => f.kind !== 'kill').map((f) => `${f.kind}: ${f.lateWrite}`);

describe('chaos: the same faults at the same reads, with and without the fenced write', () => {
  it('ran every fault of the schedule in both rows, within the time bound', () => {
    for (const r of results.values()) {
      expect(r.timedOut).toBe(false);
      expect(r.faults.map((f) => f.kind)).toEqual(schedule.faults.map((f) => f.kind));
    }
  });

  it('lock + fenced write: both late writes refused, exactly the stock sold, nothing left', () => {
    const r = row('fenced');
    expect(lateWrites(r).sort()).toEqual(['redis-restart: rejected', 'stall: rejected']);
    expect(r.staleRejected).toBeGreaterThanOrEqual(2);
    expect(r.staleApplied).toBe(0);
    expect({ sold: r.sold, finalStock: r.finalStock }).toEqual({ sold: STOCK, finalStock: 0 });
  });

  it('lock only: the late writes land after newer holders sold (stale writes applied)', () => {
    const r = row('product');
    expect(lateWrites(r).sort()).toEqual(['redis-restart: applied', 'stall: applied']);
    // An order written with an older fence than one written before it.
    expect(r.staleApplied).toBeGreaterThanOrEqual(1);
  });

  it('every holder left running with a lost lock was told so (signal aborted, lost event)', () => {
    for (const r of results.values()) {
      const told = r.faults.filter((f) => f.kind !== 'kill').map((f) => f.learnedReason);
      // Usually `expired` after the stall (its own clock) and `lost` after the restart (its
      // next renewal); a renewal caught in flight by SIGSTOP can make the stall's `lost`.
      expect(told).toHaveLength(2);
      for (const reason of told) expect(['expired', 'lost']).toContain(reason);
    }
  });

  it('leaves no sample process behind once stopped', async () => {
    await instances.stop();
    expect(pids.filter(processExists)).toEqual([]);
  });
});
