import { randomBytes } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  LockContext,
  Locked,
  type LockLostEvent,
  LockLostError,
  LockNotAcquiredError,
  LockService,
} from 'nest-locked';
import type { HoldScenario, WorkerLine } from '../fixtures/lock-worker';
import { now } from '../support/intervals';
import { createLockApp, lockRedisKey, sleep, uniquePrefix, within } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { describeResult, spawnWorker } from '../support/workers';

jest.setTimeout(60_000);

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

/** Resolves with the first line of `type` a worker prints (bounded by `ms`). */
function nextLine<T extends WorkerLine['type']>(
  worker: ReturnType<typeof spawnWorker>,
  type: T,
  ms: number,
): Promise<Extract<WorkerLine, { type: T }>> {
  const seen = worker.lines.find((l) => l.type === type);
  if (seen) return Promise.resolve(seen as Extract<WorkerLine, { type: T }>);
  return within(
    new Promise((resolve) =>
      worker.onLine((l) => {
        if (l.type === type) resolve(l as Extract<WorkerLine, { type: T }>);
      }),
    ),
    ms,
    `worker line "${type}"`,
  );
}

describe('watchdog: a method that outlives its lease, in another process', () => {
  const TTL = 1_000;
  const HOLD_MS = 3_500;
  const PROBE_EVERY = 300;
  let app: INestApplication;
  let locks: LockService;
  const keyPrefix = uniquePrefix('wd');

  beforeAll(async () => {
    app = await createLockApp({ options: { clients: [server.url], keyPrefix, waitTimeout: 0 } });
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`keeps a ${TTL} ms lease for ${HOLD_MS} ms, then frees the key the moment it returns`, async () => {
    const id = randomBytes(4).toString('hex');
    const key = `job:${id}`;
    const config: HoldScenario = {
      scenario: 'hold',
      clients: [server.url],
      keyPrefix,
      dataUrl: server.url,
      dataPrefix: `${keyPrefix}data:`,
      timeoutMs: 20_000,
      ttl: TTL,
      id,
      holdMs: HOLD_MS,
    };
    const worker = spawnWorker(config);
    await worker.ready;
    worker.go();
    const acquired = await nextLine(worker, 'acquired', 10_000);
    expect(acquired).toMatchObject({ key, ttl: TTL });
    const released = nextLine(worker, 'released', HOLD_MS + 10_000);
    released.catch(() => undefined); // awaited below; no unhandled rejection if a probe fails

    // Probe from this process while the method certainly still runs (stop 200 ms before its
    // end, so a probe never races the legitimate release).
    const probes: { at: number; outcome: string; pttl: number }[] = [];
    const stopAt = acquired.at + HOLD_MS - 200;
    for (let i = 0; i < 40 && now() < stopAt; i++) {
      const at = now() - acquired.at;
      let outcome: string;
      try {
        const handle = await locks.acquire(key, { waitTimeout: 0 });
        await handle.release();
        outcome = 'acquired';
      } catch (err) {
        outcome = err instanceof LockNotAcquiredError ? 'busy' : String(err);
      }
      const pttl = await redis.pttl(lockRedisKey(keyPrefix, key));
      probes.push({ at, outcome, pttl });
      await sleep(PROBE_EVERY);
    }

    // Enough probes, several of them well past the lease (only renewals keep the key).
    expect(probes.length).toBeGreaterThanOrEqual(6);
    expect(probes.filter((p) => p.at > 2 * TTL).length).toBeGreaterThanOrEqual(2);
    expect(probes.filter((p) => p.outcome !== 'busy')).toEqual([]);
    // The lease is the short ttl, renewed: never longer, never gone while the method ran.
    for (const p of probes) {
      expect(p.pttl).toBeGreaterThan(0);
      expect(p.pttl).toBeLessThanOrEqual(TTL);
    }

    // Right after the method returned (the worker prints `released` after the call settled),
    // the key is free.
    const done = await released;
    expect(done.aborted).toBe(false);
    expect(await locks.isLocked(key)).toBe(false);
    const handle = await locks.acquire(key, { waitTimeout: 0 });
    expect(handle.fence).toBeGreaterThan(acquired.fence);
    await handle.release();

    const result = await worker.exited;
    expect({ code: result.code, why: describeResult(result) }).toMatchObject({ code: 0 });
  });
});

interface LostOutcome {
  result: string;
  abortedAfterMs?: number;
  reason?: unknown;
}

@Injectable()
class ReportService {
  @Locked('report:{id}', { ttl: 1_200, waitTimeout: 0 })
  async build(id: string, started: () => Promise<number>): Promise<LostOutcome> {
    const { signal } = LockContext.current()!;
    const deletedAt = await started();
    const aborted = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 5_000);
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        { once: true },
      );
    });
    return aborted
      ? { result: `report ${id}`, abortedAfterMs: now() - deletedAt, reason: signal.reason }
      : { result: `report ${id}` };
  }
}

describe('lost lock: the key deleted behind the holder', () => {
  const TTL = 1_200;
  let app: INestApplication;
  let locks: LockService;
  let svc: ReportService;
  const keyPrefix = uniquePrefix('lost');

  beforeAll(async () => {
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix },
      providers: [ReportService],
    });
    locks = app.get(LockService);
    svc = app.get(ReportService);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('aborts the signal with LockLostError within one renewal interval, emits `lost`, keeps the result', async () => {
    const events: LockLostEvent[] = [];
    const onLost = (e: LockLostEvent) => events.push(e);
    locks.on('lost', onLost);
    try {
      const id = randomBytes(4).toString('hex');
      const key = `report:${id}`;
      const outcome = await svc.build(id, async () => {
        // DEL the lock key from a plain connection, as an operator or an expiry would.
        expect(await redis.del(lockRedisKey(keyPrefix, key))).toBe(1);
        return now();
      });

      // The method's own result reaches the caller.
      expect(outcome.result).toBe(`report ${id}`);
      expect(outcome.reason).toBeInstanceOf(LockLostError);
      expect(outcome.reason).toMatchObject({ name: 'LockLostError', reason: 'lost', keys: [key] });
      // Found by the next renewal: ttl/3 plus a margin for a loaded machine.
      expect(outcome.abortedAfterMs).toBeLessThanOrEqual(TTL / 3 + 600);

      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ keys: [key], client: 'default' });
      expect(events[0].error).toBe(outcome.reason);
      // Nobody re-created the key on the way out (the release is compare-and-delete).
      expect(await redis.exists(lockRedisKey(keyPrefix, key))).toBe(0);
    } finally {
      locks.off('lost', onLost);
    }
  });
});
