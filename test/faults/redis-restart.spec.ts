import { Redis } from 'ioredis';
import { type LockHandle, LockLostError, LockNotAcquiredError, LockService } from 'nest-locked';
import {
  abortedWithin,
  describeOutcome,
  eventually,
  FaultFrame,
  singleNodeApps,
  outcome,
  releaseIfHeld,
  settle,
  type Settled,
  uid,
} from '../support/faults';
import { lockRedisKey, sleep, uniquePrefix, within } from '../support/lock-app';
import type { RedisServerHandle } from '../support/redis-server';

/**
 * Redis restarted without persistence (the harness keeps nothing on disk) while locks are held
 * and callers wait for them: the locks, the Redis queue of waiters and the fence counters are
 * gone. docs/faults.md: a holder learns it when its connection is ready again (a renewal at once,
 * not the next one); waiters are not left waiting for a grant nobody will publish; fences of a
 * key never go backwards (item 1 of the issue).
 */
jest.setTimeout(40_000);

const TTL = 3_000;
const WAIT = 8_000;

const frame = new FaultFrame();
let server: RedisServerHandle;
let raw: Redis;
let holder: LockService;
let waiter: LockService;
let prober: LockService;
const keyPrefix = uniquePrefix('restart');
const lockKey = (key: string) => lockRedisKey(keyPrefix, key);

beforeAll(async () => {
  ({
    server,
    raw,
    services: [holder, waiter, prober],
  } = await singleNodeApps(frame, 3, { keyPrefix, commandTimeout: 500 }));
});

afterAll(() => frame.stopAll());

describe('Redis restarted without persistence while locks are held and callers wait', () => {
  const keys = [`job:${uid()}`, `job:${uid()}`];
  const fencesBefore: number[] = [];
  let held: LockHandle[];
  let waits: Promise<Settled<LockHandle>>[];
  let heldAborted: Promise<number | undefined>[];
  let restartedAt: number;
  let results: Settled<LockHandle>[];

  beforeAll(async () => {
    // Some history first: fences handed out before the restart.
    for (const key of keys) {
      for (let i = 0; i < 3; i++) fencesBefore.push(await holder.using(key, ({ fence }) => fence));
    }
    held = await Promise.all(keys.map((key) => holder.acquire(key, { ttl: TTL })));
    fencesBefore.push(...held.map((h) => h.fence));
    waits = keys.map((key) => settle(() => waiter.acquire(key, { ttl: TTL, waitTimeout: WAIT })));
    for (const key of keys) {
      expect(
        await eventually(async () => (await raw.zcard(`${lockKey(key)}:q`)) === 1, 3_000),
      ).toBe(true);
    }
    heldAborted = held.map((h) => abortedWithin(h.signal, WAIT + 2_000));

    await server.restart();
    restartedAt = performance.now();
    results = await within(Promise.all(waits), WAIT + 3_000, 'the waiters');
  });

  afterAll(async () => {
    for (const h of held ?? []) await h.release();
    for (const r of results ?? []) await releaseIfHeld(r);
  });

  it('the waiters do not hang on a grant nobody will publish: they get the freed locks soon after the restart', () => {
    expect(results.map(describeOutcome)).toEqual(keys.map(() => 'acquired'));
    // At most about one poll (1 s) after Redis is back, plus reconnection and a loaded machine.
    const after = results.map((r) => Math.round(r.at - restartedAt));
    expect(after.filter((ms) => ms > 2_500)).toEqual([]);
  });

  it('the holders learn their locks are lost (signal aborts with LockLostError) at their next renewal', async () => {
    const abortedAt = await Promise.all(heldAborted);
    // A renewal runs every ttl/3 (1 s); allow one more for the reconnection.
    const after = abortedAt.map((at) =>
      at === undefined ? 'never' : Math.round(at - restartedAt),
    );
    expect(after.filter((ms) => ms === 'never' || ms > TTL / 3 + 1_000)).toEqual([]);
    for (const h of held) expect(h.signal.reason).toBeInstanceOf(LockLostError);
  });

  it('fences keep increasing: the new holders fence above every fence handed out before', () => {
    const highest = Math.max(...fencesBefore);
    const fences = results.map((r) => r.value?.fence ?? NaN);
    expect(fences.filter((f) => !(Number.isSafeInteger(f) && f > highest))).toEqual([]);
  });

  it("the old holders' late releases leave the new holders' locks alone", async () => {
    for (const h of held) await h.release();
    // A window, not a barrier: anything the releases set off would have landed by then.
    await sleep(100);
    for (const key of keys) expect(await raw.exists(lockKey(key))).toBe(1);
    for (const key of keys) {
      const probe = await settle(() => prober.acquire(key, { waitTimeout: 0 }));
      await releaseIfHeld(probe);
      expect(outcome(probe)).toBe(LockNotAcquiredError.name);
    }
    for (const r of results) expect(r.value?.signal.aborted).toBe(false);
  });

  it('after the restart, a release wakes a waiter of another app by its message again', async () => {
    const key = `after:${uid()}`;
    const holding = await holder.acquire(key, { ttl: TTL });
    const waiting = settle(() => waiter.acquire(key, { ttl: TTL, waitTimeout: WAIT }));
    expect(await eventually(async () => (await raw.zcard(`${lockKey(key)}:q`)) === 1, 3_000)).toBe(
      true,
    );
    const before = waiter.stats();
    const releasedAt = performance.now();
    await holding.release();
    const r = await waiting;
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toBe('acquired');
    expect(r.at - releasedAt).toBeLessThan(500);
    expect(waiter.stats().grants - before.grants).toBe(1);
  });
});

describe('Redis restarted without persistence under a long lease', () => {
  it('the holder of a 30 s lease is told within 1 s of the restart, not at its next renewal (10 s)', async () => {
    const held = await holder.acquire(`long:${uid()}`, { ttl: 30_000 });
    try {
      const aborted = abortedWithin(held.signal, 15_000);
      await server.restart();
      const restartedAt = performance.now();
      const at = await aborted;
      expect(at).toBeDefined();
      expect(held.signal.reason).toBeInstanceOf(LockLostError);
      expect((held.signal.reason as LockLostError).reason).toBe('lost');
      // Reconnection (ioredis backs off while the server is down) and a renewal's round trip.
      expect(Math.round(at! - restartedAt)).toBeLessThan(1_000);
    } finally {
      await held.release();
    }
  });
});
