import { Redis } from 'ioredis';
import { LockBackendError, type LockHandle, LockLostError, LockService } from 'nest-locked';
import {
  abortedWithin,
  describeOutcome,
  FaultFrame,
  singleNodeApps,
  frozen,
  outcome,
  releaseIfHeld,
  settle,
  type Settled,
  uid,
} from '../support/faults';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { lockRedisKey, sleep, uniquePrefix, until, within } from '../support/lock-app';
import type { RedisServerHandle } from '../support/redis-server';

/**
 * Redis stops answering (SIGSTOP) or goes away for a moment (killed, restarted on its port).
 * PRODUCT 5: "no caller hangs past waitTimeout + commandTimeout; recovery without restart";
 * docs/how-waiting-works.md "Blips" (item 8 of the faults issue): a caller already waiting survives an outage
 * shorter than its remaining wait, a new caller during the outage fails fast.
 */
jest.setTimeout(40_000);

const COMMAND_TIMEOUT = 500;
/** Scheduling slack on a loaded 2-core machine. */
const MARGIN = 700;

const frame = new FaultFrame();
let server: RedisServerHandle;
let raw: Redis;
let locks: LockService;
let others: LockService;
const keyPrefix = uniquePrefix('stall');
const lockKey = (key: string) => lockRedisKey(keyPrefix, key);
/** Entries in the Redis queue of `key`. */
const queuedInRedis = (key: string) => raw.zcard(`${lockKey(key)}:q`);
/** Callers of `others` waiting for `key` (the head and those behind it in its line). */
const othersQueued = (key: string) =>
  frame.apps[1].get(LockGroupRegistry).get('default').queued(key);

beforeAll(async () => {
  ({
    server,
    raw,
    services: [locks, others],
  } = await singleNodeApps(frame, 2, { keyPrefix, commandTimeout: COMMAND_TIMEOUT }));
  // Scripts loaded and connections open before anything breaks.
  await locks.using(`warm:${uid()}`, () => undefined);
  await others.using(`warm:${uid()}`, () => undefined);
});

afterAll(() => frame.stopAll());

interface Call {
  what: string;
  waitTimeout: number;
  result: Promise<Settled<LockHandle>>;
}

/** Every call settled (each released once held), never hung; outcome and time of each. */
async function settleAll(calls: Call[]) {
  const limit = Math.max(...calls.map((c) => c.waitTimeout)) + COMMAND_TIMEOUT + 5_000;
  const results = await within(Promise.all(calls.map((c) => c.result)), limit, 'the callers');
  return calls.map((c, i) => ({
    what: c.what,
    outcome: outcome(results[i]),
    detail: describeOutcome(results[i]),
    ms: Math.round(results[i].ms),
    bound: c.waitTimeout + COMMAND_TIMEOUT + MARGIN,
  }));
}

describe('Redis stalled (SIGSTOP 3 s)', () => {
  const STALL = 3_000;
  const HOLD_TTL = 1_500;
  const busy = `stall:busy:${uid()}`;
  const busyAtDeadline = `stall:busy-at-deadline:${uid()}`;
  let report: Awaited<ReturnType<typeof settleAll>>;
  let held: LockHandle;
  let heldAbortedAfter: number | undefined;

  /** The scenario runs once; each test below checks one promise about it. */
  beforeAll(async () => {
    // Held by another tool until early in the stall: its waiters have nothing to wait for once
    // Redis is back, and their poll at that expiry meets a frozen Redis.
    await raw.set(lockKey(busy), 'foreign', 'PX', 400);
    // Held until 100 ms before its waiter's deadline: that waiter's poll is still in flight (Redis
    // frozen) when its waitTimeout ends, hence the "+ commandTimeout" of the bound.
    await raw.set(lockKey(busyAtDeadline), 'foreign', 'PX', 1_700);
    held = await locks.acquire(`stall:held:${uid()}`, { ttl: HOLD_TTL });

    const calls: Call[] = [];
    const call = (what: string, key: string, waitTimeout: number) =>
      calls.push({
        what,
        waitTimeout,
        // Released as soon as it is held, so no caller waits on another's hold.
        result: settle(() => others.acquire(key, { waitTimeout })).then(async (r) => {
          await releaseIfHeld(r);
          return r;
        }),
      });
    // Already waiting when Redis stops: deadlines inside and after the stall.
    for (const waitTimeout of [1_000, 2_500, 6_000]) {
      call(`waiting ${waitTimeout}`, busy, waitTimeout);
    }
    call('waiting 1800, its poll in flight at its deadline', busyAtDeadline, 1_800);
    await until(
      async () =>
        othersQueued(busy) === 3 &&
        othersQueued(busyAtDeadline) === 1 &&
        (await queuedInRedis(busy)) === 1 &&
        (await queuedInRedis(busyAtDeadline)) === 1,
      'every caller waiting, each head in the Redis queue',
    );

    const stalledAt = performance.now();
    const heldAborted = abortedWithin(held.signal, HOLD_TTL + 3_000);
    await frozen(server, STALL, async () => {
      await sleep(200);
      // New callers during the stall, on free keys and on the busy one.
      for (const waitTimeout of [0, 1_000, 5_000]) {
        call(`new ${waitTimeout}`, `stall:free:${uid()}`, waitTimeout);
      }
      call('new 5000 on the busy key', busy, 5_000);
    });
    report = await settleAll(calls);
    const abortedAt = await heldAborted;
    heldAbortedAfter = abortedAt === undefined ? undefined : abortedAt - stalledAt;
    await held.release();
  });

  it('no caller hangs: each settles within its waitTimeout + commandTimeout', () => {
    expect(report.filter((r) => r.ms > r.bound)).toEqual([]);
  });

  it('each caller gets the lock or LockBackendError (Redis, not contention, failed it)', () => {
    expect(
      report.filter((r) => r.outcome !== 'acquired' && r.outcome !== LockBackendError.name),
    ).toEqual([]);
  });

  it('a new caller during the stall fails fast (its first try fails: a quick 503)', () => {
    const fresh = report.filter((r) => /^new \d+$/.test(r.what));
    expect(fresh.filter((r) => r.outcome !== LockBackendError.name)).toEqual([]);
    expect(fresh.filter((r) => r.ms >= COMMAND_TIMEOUT + MARGIN)).toEqual([]);
  });

  it('a caller waiting with a deadline well after the stall gets the lock', () => {
    expect(report.find((r) => r.what === 'waiting 6000')).toMatchObject({ outcome: 'acquired' });
  });

  it("a holder's signal aborts (LockLostError) no later than its lease's local end, Redis frozen or not", () => {
    expect(heldAbortedAfter).toBeDefined();
    expect(heldAbortedAfter).toBeLessThanOrEqual(HOLD_TTL + MARGIN);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
  });

  it('nothing is left locked by a token nobody holds', async () => {
    // A window, not a barrier: a late script of the stall would have landed by now.
    await sleep(300);
    const left = [];
    for (const key of [busy, busyAtDeadline, held.keys[0]]) {
      if (await raw.exists(lockKey(key))) left.push(key);
    }
    expect(left).toEqual([]);
  });

  it('recovers without a restart: the same apps lock, and a waiter of one is granted by the other', async () => {
    const again = await settle(() => locks.acquire(`stall:after:${uid()}`, { waitTimeout: 0 }));
    await releaseIfHeld(again);
    expect(describeOutcome(again)).toBe('acquired');
    const key = `stall:handoff:${uid()}`;
    const holding = await locks.acquire(key);
    const waiter = settle(() => others.acquire(key, { waitTimeout: 5_000 }));
    await until(async () => (await queuedInRedis(key)) === 1, 'the waiter queued in Redis');
    const releasedAt = performance.now();
    await holding.release();
    const granted = await waiter;
    await releaseIfHeld(granted);
    expect(describeOutcome(granted)).toBe('acquired');
    expect(granted.at - releasedAt).toBeLessThan(500);
  });
});

describe('a blip shorter than the remaining wait', () => {
  it('Redis SIGSTOPped 1 s: a caller already waiting (waitTimeout 5 s) gets the lock afterwards; a new caller during the blip gets LockBackendError fast', async () => {
    const key = `blip:stop:${uid()}`;
    // Free 600 ms from now, mid-blip: the waiter's next poll meets a frozen Redis.
    await raw.set(lockKey(key), 'foreign', 'PX', 600);
    const waiting = settle(() => others.acquire(key, { waitTimeout: 5_000 }));
    await until(async () => (await queuedInRedis(key)) === 1, 'the waiter queued in Redis');
    const fresh = await frozen(server, 1_000, async () => {
      await sleep(200);
      return settle(() => locks.acquire(`blip:new:${uid()}`, { waitTimeout: 5_000 }));
    });
    await releaseIfHeld(fresh);
    expect(describeOutcome(fresh)).toMatch(/^LockBackendError/);
    expect(fresh.ms).toBeLessThan(COMMAND_TIMEOUT + MARGIN);

    const r = await within(waiting, 10_000, 'the waiter');
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toBe('acquired');
    expect(r.ms).toBeLessThan(5_000);
  });

  it('a caller queued behind a waiting caller of its process, its deadline inside a stall: LockBackendError (the failures its head met), not contention', async () => {
    const key = `blip:behind:${uid()}`;
    // Free again 300 ms from now: the head's next try lands in the stall.
    await raw.set(lockKey(key), 'foreign', 'PX', 300);
    const head = settle(() => others.acquire(key, { waitTimeout: 4_000 }));
    await until(async () => (await queuedInRedis(key)) === 1, 'the head queued in Redis');
    // Behind the head in this process's line: it never asks Redis itself.
    const behind = settle(() => others.acquire(key, { waitTimeout: 1_300 }));
    await until(() => othersQueued(key) === 2, 'the caller behind the head in line');
    const r = await frozen(server, 2_000, () => within(behind, 5_000, 'the caller behind'));
    const first = await within(head, 10_000, 'the head');
    await releaseIfHeld(first);
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toMatch(/^LockBackendError/);
    expect(describeOutcome(first)).toBe('acquired');
  });

  it('Redis killed and restarted on its port 1 s later: the waiter gets the lock once it is back, a new caller meanwhile gets LockBackendError fast, fences keep increasing', async () => {
    const key = `blip:restart:${uid()}`;
    const before: number[] = [];
    for (let i = 0; i < 3; i++) before.push(await locks.using(key, ({ fence }) => fence));
    // Held by another tool for long: only the restart (an empty Redis) frees it.
    await raw.set(lockKey(key), 'foreign', 'PX', 30_000);
    const waiting = settle(() => others.acquire(key, { waitTimeout: 5_000 }));
    await until(async () => (await queuedInRedis(key)) === 1, 'the waiter queued in Redis');

    server.kill('SIGKILL');
    await until(() => server.pid === undefined, 'redis-server gone');
    const fresh = await settle(() => locks.acquire(`blip:new:${uid()}`, { waitTimeout: 5_000 }));
    await releaseIfHeld(fresh);
    await sleep(800); // the outage: down for about a second in all
    await server.restart();

    expect(describeOutcome(fresh)).toMatch(/^LockBackendError/);
    expect(fresh.ms).toBeLessThan(COMMAND_TIMEOUT + MARGIN);

    const r = await within(waiting, 10_000, 'the waiter');
    expect(describeOutcome(r)).toBe('acquired');
    expect(r.ms).toBeLessThan(5_000);
    const fence = r.value!.fence;
    await releaseIfHeld(r);
    expect(fence).toBeGreaterThan(Math.max(...before));
  });
});

describe('a locked call whose release meets a stalled Redis', () => {
  it("using() returns the method's result once it settles, not when the release times out; a later caller of this process waits for the release", async () => {
    const commandTimeout = 3_000;
    const app = await frame.app({ clients: [server.url], keyPrefix, commandTimeout });
    const slow = app.get(LockService);
    const slowClient = app.get(LockGroupRegistry).get('default');
    await slow.using(`warm:${uid()}`, () => undefined);
    const key = `stalled:${uid()}`;
    let stoppedAt = 0;
    let settledAt = 0;
    try {
      const first = await slow.using(key, async ({ fence }) => {
        server.kill('SIGSTOP');
        stoppedAt = performance.now();
        await sleep(50);
        settledAt = performance.now();
        return fence;
      });
      const returnedAt = performance.now();
      // Before: the release's commandTimeout (3 s) after the method settled.
      expect(Math.round(returnedAt - settledAt)).toBeLessThan(commandTimeout / 3);

      const second = settle(() =>
        slow.using(key, ({ fence }) => ({ fence, at: performance.now() }), {
          waitTimeout: 10_000,
        }),
      );
      await until(() => slowClient.queued(key) === 1, 'the second caller waiting for the release');
      server.kill('SIGCONT');
      const resumedAt = performance.now();
      const r = await within(second, 10_000, 'the second caller');
      expect(outcome(r)).toBe('acquired');
      expect(r.value!.at).toBeGreaterThan(resumedAt);
      expect(r.value!.fence).toBeGreaterThan(first);
    } finally {
      server.kill('SIGCONT');
    }
    expect(stoppedAt).toBeGreaterThan(0);
  });
});
