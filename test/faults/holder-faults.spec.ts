import { Redis } from 'ioredis';
import { LockLostError, LockNotAcquiredError, LockService } from 'nest-locked';
import type { SampleConfig } from '../../sample/config/sample.config';
import { DatabaseService } from '../../sample/database/database.service';
import { ReportsRepository } from '../../sample/reports/reports.repository';
import {
  describeOutcome,
  eventually,
  FaultFrame,
  singleNodeApps,
  nextLine,
  outcome,
  releaseIfHeld,
  settle,
  signalProcess,
  uid,
  wallNow,
} from '../support/faults';
import { lockRedisKey, sleep, uniquePrefix, until } from '../support/lock-app';
import type { RedisServerHandle } from '../support/redis-server';

/**
 * A holder's process dies or freezes (PRODUCT 5: "a holder killed with SIGKILL", "a holder whose
 * event loop stalls past its lease"). The holder is an OS process (test/fixtures/fault-worker);
 * the next holder is this process.
 */
jest.setTimeout(40_000);

const frame = new FaultFrame();
let server: RedisServerHandle;
let raw: Redis;
let locks: LockService;
let others: LockService;
const keyPrefix = uniquePrefix('holder-faults');

beforeAll(async () => {
  ({
    server,
    raw,
    services: [locks, others],
  } = await singleNodeApps(frame, 2, { keyPrefix }));
});

afterAll(() => frame.stopAll());

describe('a holder SIGKILLed', () => {
  const TTL = 2_000;

  it('its lock is taken by a waiting process within ttl of the kill, never before its lease ran out', async () => {
    const key = `job:${uid()}`;
    const holder = frame.worker({
      scenario: 'hold',
      options: { clients: [server.url], keyPrefix },
      call: { ttl: TTL },
      key,
      holdMs: 30_000,
      timeoutMs: 35_000,
    });
    await holder.ready;
    holder.go();
    const acquired = await nextLine(holder, 'acquired', 10_000);
    // Past the first renewal (its PTTL back up), so the kill falls inside a renewed lease.
    const rk = lockRedisKey(keyPrefix, key);
    let last = await raw.pttl(rk);
    await until(
      async () => {
        const pttl = await raw.pttl(rk);
        const renewed = pttl > last;
        last = pttl;
        return renewed;
      },
      'the first renewal',
      5_000,
    );

    // A caller of another process waits for the key (queued in Redis behind the holder).
    const waiting = settle(() => locks.acquire(key, { waitTimeout: 3 * TTL }));
    await until(async () => (await raw.zcard(`${rk}:q`)) === 1, 'the caller queued in Redis');

    // The lease the holder has in Redis right now: nobody may get the key before it ran out.
    const pttl = await raw.pttl(lockRedisKey(keyPrefix, key));
    const killedAt = performance.now();
    holder.kill();
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(TTL);
    const leaseEnd = killedAt + pttl;

    const taken = await waiting;
    await releaseIfHeld(taken);
    expect(describeOutcome(taken)).toBe('acquired');
    // Within ttl of the kill (plus a margin for a loaded machine)...
    expect(taken.at - killedAt).toBeLessThanOrEqual(TTL + 500);
    // ...and never before the dead holder's lease ran out (1 ms: clock granularity).
    expect(taken.at).toBeGreaterThanOrEqual(leaseEnd - 1);
    const { fence } = taken.value!;
    expect(fence).toBeGreaterThan(acquired.fence);
  });
});

describe('a holder SIGSTOPped past its lease, then SIGCONT', () => {
  const TTL = 1_000;

  it('another process takes the key with a larger fence; on resume the frozen holder learns it at once, its late release leaves the new lock alone, and its fenced write is rejected', async () => {
    const key = `report:${uid()}`;
    const reportId = `r-${uid()}`;
    const dbPath = `${frame.tmpDir('sqlite')}/shop.db`;
    const database = new DatabaseService({ dbPath, dbLatencyMs: 0 } as SampleConfig);
    frame.stoppers.push(async () => database.onApplicationShutdown());
    const reports = new ReportsRepository(database);

    const holder = frame.worker({
      scenario: 'hold',
      options: { clients: [server.url], keyPrefix },
      call: { ttl: TTL },
      key,
      holdMs: 20_000,
      sqlite: { path: dbPath, reportId },
      timeoutMs: 30_000,
    });
    await holder.ready;
    holder.go();
    const acquired = await nextLine(holder, 'acquired', 10_000);
    const first = await nextLine(holder, 'write', 5_000, (l) => l.phase === 'first');
    expect(first).toMatchObject({ fence: acquired.fence, accepted: true });

    // Frozen: no renewal, no timer, nothing runs in the holder's process.
    signalProcess(holder.pid, 'SIGSTOP');
    const stoppedAt = performance.now();
    let resumedAt = 0;
    let handle;
    try {
      const taken = await settle(() => locks.acquire(key, { waitTimeout: 5_000, ttl: 5_000 }));
      expect(describeOutcome(taken)).toBe('acquired');
      // Once the frozen holder's lease ran out (at most ttl after the freeze), not a ttl later.
      expect(taken.at - stoppedAt).toBeLessThanOrEqual(TTL + 700);
      handle = taken.value!;
      expect(handle.fence).toBeGreaterThan(acquired.fence);
      // The new holder writes under its fence.
      expect(reports.save(reportId, handle.fence, 'this-process', 50, 'taken over')).toBe(true);
      await sleep(300); // the new holder works a while before the old one resumes: the scenario
    } finally {
      resumedAt = wallNow();
      signalProcess(holder.pid, 'SIGCONT');
    }

    // The frozen holder's signal aborts promptly on resume (an overdue lease is over at once).
    const aborted = await nextLine(holder, 'aborted', 5_000);
    expect(aborted.name).toBe(LockLostError.name);
    expect(aborted.at - resumedAt).toBeLessThan(500);

    // Its write under the old fence is rejected by the repository.
    const last = await nextLine(holder, 'write', 5_000, (l) => l.phase === 'last');
    expect(last).toMatchObject({ fence: acquired.fence, accepted: false });

    // Its late release does not touch the new holder's lock.
    await nextLine(holder, 'released', 5_000);
    // A window, not a barrier: anything its release set off would have landed by then.
    await sleep(100);
    expect(await raw.exists(lockRedisKey(keyPrefix, key))).toBe(1);
    const probe = await settle(() => others.acquire(key, { waitTimeout: 0 }));
    await releaseIfHeld(probe);
    expect(outcome(probe)).toBe(LockNotAcquiredError.name);
    expect(handle.signal.aborted).toBe(false);
    await expect(handle.extend(5_000)).resolves.toBeUndefined();

    expect(reports.find(reportId)).toMatchObject({
      fence: handle.fence,
      instance: 'this-process',
      status: 'taken over',
    });
    await handle.release();
    const result = await holder.exited;
    expect(result.code).toBe(0);
  });
});

describe("a queued waiter's process SIGKILLed before the release", () => {
  const TTL = 10_000;

  it('the next live waiter gets the lock within the claim window (3 s at ttl 10 s), not a ttl', async () => {
    const key = `job:${uid()}`;
    const queue = `${lockRedisKey(keyPrefix, key)}:q`;
    const holding = await locks.acquire(key, { ttl: TTL });
    const queued = (n: number) => async () => (await raw.zcard(queue)) >= n;

    // First in line: a waiter in another OS process.
    const doomed = frame.worker({
      scenario: 'hold',
      options: { clients: [server.url], keyPrefix },
      call: { ttl: TTL, waitTimeout: 20_000 },
      key,
      holdMs: 100,
      timeoutMs: 30_000,
    });
    await doomed.ready;
    doomed.go();
    expect(await eventually(queued(1), 5_000)).toBe(true);

    // Second in line: a live waiter of another app.
    const waiting = settle(() => others.acquire(key, { ttl: TTL, waitTimeout: 15_000 }));
    expect(await eventually(queued(2), 5_000)).toBe(true);

    doomed.kill();
    await doomed.exited;
    const releasedAt = performance.now();
    await holding.release();

    const next = await waiting;
    await releaseIfHeld(next);
    expect(describeOutcome(next)).toBe('acquired');
    expect(next.at - releasedAt).toBeLessThanOrEqual(3_000);
    expect(next.value!.fence).toBeGreaterThan(holding.fence);
  });
});
