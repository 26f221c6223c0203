import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockContext, LockService } from 'nest-locked';
import type { CounterScenario } from '../fixtures/lock-worker';
import { describeOverlaps, findOverlaps, now } from '../support/intervals';
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
import { describeResult, spawnWorker } from '../support/workers';
import { HANDOFF, REFILL, RELEASE_TO } from '../../lib/redis/protocol/scripts';
import { onEvalsha } from '../support/evalsha-calls';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { describeWith, itWith } from '../support/policies';

/**
 * A hot key on a single node: a process passes it from caller to caller in memory for as long as
 * no waiter of another process is queued (its fences refilled in the background), and goes
 * public within `localHandoffs` once one is. Exclusion, fences and order are checked by the
 * sections themselves, never by timing.
 */
jest.setTimeout(60_000);

const LOCAL_HANDOFFS = 4;

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

const evalshaCalls = async (): Promise<number> =>
  Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);

interface Section {
  readonly by: string;
  readonly index: number;
  readonly key: string;
  readonly fence: number;
  readonly start: number;
  readonly end: number;
}

/** One caller's call: records its section (who, its call number, fence, start and end). */
function section(
  service: LockService,
  key: string,
  by: string,
  index: number,
  ms: number,
  into: Section[],
): Promise<void> {
  return service.using(
    key,
    async () => {
      const { fence } = LockContext.current()!;
      const start = now();
      await sleep(ms);
      into.push({ by, index, key, fence, start, end: now() });
    },
    { waitTimeout: 30_000 },
  );
}

/** Sections whose fence is not above the fence of the section before (by start): none. */
function fencesNotIncreasing(sections: readonly Omit<Section, 'index'>[]): string[] {
  const sorted = [...sections].sort((a, b) => a.start - b.start);
  const bad: string[] = [];
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].fence <= sorted[i - 1].fence) {
      bad.push(`#${i} by ${sorted[i].by}: ${sorted[i].fence} after ${sorted[i - 1].fence}`);
    }
  }
  return bad;
}

describeWith('localHandoff')('one process alone on a hot key', () => {
  let app: INestApplication;
  let prefix: string;

  beforeAll(async () => {
    prefix = uniquePrefix('hot');
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: prefix, localHandoffs: LOCAL_HANDOFFS },
    });
    // Listening for other processes' notices already (a process that is not stays bounded by
    // localHandoffs until it is: see KeyLine.quietSince).
    await (app.get(LockGroupRegistry).get('default') as RedisLockBackend).notifier.ready();
  });
  afterAll(() => app?.close());

  it('passes it on in memory past localHandoffs, in FIFO order, fences refilled ahead of need', async () => {
    const locks = app.get(LockService);
    const calls = 60;
    const sections: Section[] = [];
    // The scripts sent, to tell the passes made by HANDOFF (see below) from the rest.
    const sent: string[] = [];
    const restore = onEvalsha(app, (_keys, _argv, sha) => sent.push(sha));
    const before = { evalsha: await evalshaCalls(), stats: locks.stats() };
    try {
      await Promise.all(
        Array.from({ length: calls }, (_, i) => section(locks, 'job:alone', 'a', i, 1, sections)),
      );
    } finally {
      restore();
    }
    const evalsha = (await evalshaCalls()) - before.evalsha;
    const handoffs = locks.stats().localHandoffs - before.stats.localHandoffs;
    const byScript = sent.filter((sha) => sha === HANDOFF.sha).length;
    const releasesTo = sent.filter((sha) => sha === RELEASE_TO.sha).length;

    expect(sections).toHaveLength(calls);
    expect(findOverlaps(sections)).toEqual([]);
    // FIFO: the callers ran in the order they called.
    expect(sections.map((s) => s.index)).toEqual(sections.map((_, i) => i));
    // Fences still strictly increasing, far beyond one block of localHandoffs + 1.
    expect(fencesNotIncreasing(sections)).toEqual([]);
    expect(handoffs).toBe(calls - 1);
    // Passed in memory: neither by HANDOFF nor by a RELEASE_TO that found nobody else queued.
    expect(handoffs - byScript - releasesTo).toBeGreaterThan(0);
    // No release every localHandoffs + 1 sections (that was 12 going public and 1 acquire here):
    // the first try, a refill per 4 blocks (20 fences), the last release, and the release that
    // finds nobody else queued (a new line assumes someone may be). A pass in memory needs the
    // lease set or renewed at most ttl x driftFactor + 2 ms ago (`RedisLeases.freshFor`: 302 ms
    // at the default 30 s), and REFILL does not renew it: a run that lasts longer (a loaded
    // machine: 8 EVALSHA were seen) passes by HANDOFF once the lease is older, by design, and
    // the new token's first pass in memory needs a REFILL. Those two per HANDOFF are counted
    // apart; an unloaded run has none.
    const publicChecks = 1;
    expect(evalsha - 2 * byScript).toBeLessThanOrEqual(
      2 + Math.ceil(calls / (4 * (LOCAL_HANDOFFS + 1))) + publicChecks,
    );
    expect(await redis.exists(lockRedisKey(prefix, 'job:alone'))).toBe(0);
  });

  it('keeps passing in memory when the sections are shorter than a refill round trip', async () => {
    // Callers that let go at once run through a block of fences faster than a REFILL comes back:
    // the next pass waits for the refill on its way (one round trip, as a HANDOFF would cost)
    // instead of sending a HANDOFF that changes the token and so throws the refill's block away
    // (which then repeated every block: a HANDOFF and a REFILL per localHandoffs + 1 callers).
    const locks = app.get(LockService);
    const calls = 200;
    const order: number[] = [];
    const fences: number[] = [];
    const holder = await locks.acquire('job:quick');
    const before = { evalsha: await evalshaCalls(), stats: locks.stats() };
    const all = Promise.all(
      Array.from({ length: calls }, (_, i) =>
        locks.using(
          'job:quick',
          () => {
            order.push(i);
            fences.push(LockContext.current()!.fence);
          },
          { waitTimeout: 30_000 },
        ),
      ),
    );
    const client = app.get(LockGroupRegistry).get('default');
    await until(() => client.queued('job:quick') === calls, `${calls} waiting for the holder`);
    await holder.release();
    await all;
    const evalsha = (await evalshaCalls()) - before.evalsha;
    const handoffs = locks.stats().localHandoffs - before.stats.localHandoffs;

    expect(order).toEqual(order.map((_, i) => i));
    expect(fences.filter((f, i) => i > 0 && f <= fences[i - 1])).toEqual([]);
    expect(handoffs).toBe(calls);
    // The release that finds nobody else queued, the refills (each a block of 4 x
    // (localHandoffs + 1) fences at least) and the last release.
    expect(evalsha).toBeLessThanOrEqual(2 + Math.ceil(calls / (4 * (LOCAL_HANDOFFS + 1))));
    expect(await redis.exists(lockRedisKey(prefix, 'job:quick'))).toBe(0);
  });
});

describe('a waiter of another client group', () => {
  let apps: INestApplication[] = [];
  let prefix: string;

  beforeAll(async () => {
    prefix = uniquePrefix('hot2');
    apps = await Promise.all(
      [0, 1].map(() =>
        createLockApp({
          options: { clients: [server.url], keyPrefix: prefix, localHandoffs: LOCAL_HANDOFFS },
        }),
      ),
    );
  });
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  /** Waits until `count` callers of this group wait in its line for `key`. */
  const inLine = (key: string, count: number) => {
    const client = apps[0].get(LockGroupRegistry).get('default');
    return until(() => client.queued(key) === count, `${count} waiting here for ${key}`);
  };

  it('gets in after at most localHandoffs local sections once it queued', async () => {
    const [here, there] = apps.map((a) => a.get(LockService));
    const sections: Section[] = [];
    // Sections long enough that the other group's first try, its queueing round and the notice
    // to this group all land inside the section during which it called.
    const ms = 15;
    const hammer = Promise.all(
      Array.from({ length: 24 }, (_, i) => section(here, 'job:hot2', 'here', i, ms, sections)),
    );
    // Past localHandoffs in a row: the key stays here because nobody else waits.
    await until(() => sections.length >= LOCAL_HANDOFFS + 4, 'a run past localHandoffs');
    const calledAt = now();
    await within(section(there, 'job:hot2', 'there', 0, 1, sections), 10_000, 'the other group');
    await hammer;

    expect(findOverlaps(sections)).toEqual([]);
    expect(fencesNotIncreasing(sections)).toEqual([]);
    const theirs = sections.find((s) => s.by === 'there')!;
    // Sections of this group that started after the other group called and before it got in:
    // the bound of README "How waiting works" (the one running when it called is not counted).
    const passedBy = sections.filter(
      (s) => s.by === 'here' && s.start > calledAt && s.start < theirs.start,
    );
    expect(passedBy.length).toBeLessThanOrEqual(LOCAL_HANDOFFS);
    // FIFO within the hammering group, across the other group's turn.
    const ours = sections.filter((s) => s.by === 'here').sort((a, b) => a.start - b.start);
    expect(ours.map((s) => s.index)).toEqual(ours.map((_, i) => i));
  });
  itWith('localHandoff')(
    'counts a new run of localHandoffs once the key went back to Redis with nobody of this group waiting',
    async () => {
      const [here, there] = apps.map((a) => a.get(LockService));
      const key = `job:run:${randomBytes(3).toString('hex')}`;
      // A run of two passes in memory...
      const first = await here.acquire(key);
      const next = [0, 1].map(() => here.acquire(key, { waitTimeout: 10_000 }));
      await inLine(key, 2);
      await first.release();
      const second = await next[0];
      await second.release();
      const third = await next[1];
      // ...then the key goes back to Redis, nobody of this group waiting; a caller of this group
      // arriving during that release waits for it and takes the key over the network.
      const releasing = third.release();
      const fourth = here.acquire(key, { waitTimeout: 10_000 });
      await releasing;
      const held = await fourth;

      // Another group queues; then callers of this group line up behind the holder.
      const sections: Section[] = [];
      const theirs = section(there, key, 'there', 0, 1, sections);
      await queuedInRedis(redis, prefix, key, 1);
      const ours = Array.from({ length: LOCAL_HANDOFFS + 2 }, (_, i) =>
        section(here, key, 'here', i, 1, sections),
      );
      await inLine(key, LOCAL_HANDOFFS + 2);
      await held.release();
      await within(Promise.all([theirs, ...ours]), 10_000, 'the sections');

      const order = [...sections].sort((a, b) => a.start - b.start).map((s) => s.by);
      // The key was public when `held` took it: a whole run of localHandoffs passes in memory,
      // then the other group's waiter (not the rest of an earlier run).
      expect(order.indexOf('there')).toBe(LOCAL_HANDOFFS);
      expect(findOverlaps(sections)).toEqual([]);
    },
  );

  /**
   * The other group holds a new key while `waiting` callers of this group line up behind it
   * (sections of `ms`: the head queued in Redis, the rest behind it in this process); it lets
   * go, and once this group's turn began a waiter of the other group queues, then (`late`) one
   * more caller of this group. The sections, and who ran in which order.
   */
  async function turnAfterGrant(waiting: number, ms: number, late: boolean) {
    const [here, there] = apps.map((a) => a.get(LockService));
    const key = `job:turn:${randomBytes(3).toString('hex')}`;
    const sections: Section[] = [];
    const held = await there.acquire(key);
    const calls = Array.from({ length: waiting }, (_, i) =>
      section(here, key, 'here', i, ms, sections),
    );
    // The head queued in Redis, the rest behind it in this process.
    await queuedInRedis(redis, prefix, key, 1);
    await inLine(key, waiting);
    await held.release();
    await until(() => sections.length > 0, "this group's turn begun");
    calls.push(section(there, key, 'there', 0, 1, sections));
    if (late) {
      // After the other group's waiter queued in Redis (or, too late for that, ran: the order
      // then says so).
      await until(
        async () =>
          (await redis.zcard(`${lockRedisKey(prefix, key)}:q`)) === 1 ||
          sections.some((x) => x.by === 'there'),
        "the other group's waiter queued",
      );
      calls.push(section(here, key, 'here', waiting, 1, sections));
    }
    await within(Promise.all(calls), 10_000, 'the sections');
    const order = [...sections].sort((x, y) => x.start - y.start).map((s) => `${s.by}${s.index}`);
    return { sections, order };
  }

  itWith('localHandoff')(
    'a turn after a grant serves every caller already waiting here once, past localHandoffs; later callers wait for the next turn',
    async () => {
      const waiting = 2 * LOCAL_HANDOFFS;
      const { sections, order } = await turnAfterGrant(waiting, 5, true);

      expect(order).toEqual([
        ...Array.from({ length: waiting }, (_, i) => `here${i}`),
        'there0',
        `here${waiting}`,
      ]);
      expect(findOverlaps(sections)).toEqual([]);
      expect(fencesNotIncreasing(sections)).toEqual([]);
    },
  );

  itWith('localHandoff')(
    'a turn is at most 4 x (localHandoffs + 1) holds, however many callers wait here',
    async () => {
      const turn = 4 * (LOCAL_HANDOFFS + 1);
      const { sections, order } = await turnAfterGrant(turn + 6, 2, false);

      expect(order.indexOf('there0')).toBe(turn);
      expect(findOverlaps(sections)).toEqual([]);
      expect(fencesNotIncreasing(sections)).toEqual([]);
    },
  );
});

describeWith('localHandoff')('REFILL', () => {
  const keys = (prefix: string, key: string): string[] => {
    const rk = lockRedisKey(prefix, key);
    return [rk, `${rk}:fence`, `${rk}:wait`, `${rk}:q`, `${rk}:qm`, `${rk}:h`];
  };
  const refill = (k: string[], token: string, count: number) =>
    redis.eval(REFILL.lua, 6, ...k, token, count, 'clock') as Promise<number[]>;

  it('mints a block above every fence only for the holding token, and tells who is queued', async () => {
    const k = keys(uniquePrefix('refill'), 'job:r');
    await redis.set(k[0], 'mine.1', 'PX', 10_000);
    await redis.set(k[1], '1000');
    expect(await refill(k, 'theirs.1', 5)).toEqual([0]);
    const [ok, first, others] = await refill(k, 'mine.1', 5);
    expect([ok, others]).toEqual([1, 0]);
    // Never below the server's clock (microseconds) on a single node, and above the counter.
    expect(first).toBeGreaterThan(1000);
    const [, second] = await refill(k, 'mine.1', 5);
    expect(second).toBeGreaterThanOrEqual(first + 5);
    // The lease is left alone (renewals are the watchdog's).
    expect(await redis.pttl(k[0])).toBeLessThanOrEqual(10_000);

    const serverMs = Number((await redis.time())[0]) * 1000;
    // A waiter of this process queued, and one of another process whose deadline passed: nobody.
    await redis.zadd(k[3], 1, 'mine.2', 2, 'gone.1');
    await redis.hset(k[4], 'mine.2', `1000:${serverMs + 60_000}`, 'gone.1', `1000:${serverMs - 1}`);
    expect((await refill(k, 'mine.1', 5))[2]).toBe(0);
    // A live waiter of another process (a reader's entry too): someone else waits.
    await redis.zadd(k[3], 3, 'other.1');
    await redis.hset(k[4], 'other.1', `1000:${serverMs + 60_000}:r`);
    expect((await refill(k, 'mine.1', 5))[2]).toBe(1);
    await redis.del(...k);
  });

  it("tells the holder at once when a refill finds the key no longer the token's", async () => {
    const prefix = uniquePrefix('refill-lost');
    // localHandoffs 1: blocks of 2 fences, so refills come every few passes.
    const app = await createLockApp({
      options: { clients: [server.url], keyPrefix: prefix, localHandoffs: 1 },
    });
    try {
      const locks = app.get(LockService);
      const key = 'job:refill-lost';
      const rk = lockRedisKey(prefix, key);
      const first = await locks.acquire(key);
      const told: { index: number; reason: string | undefined }[] = [];
      // Callers passed the key in memory. The second (the first past localHandoffs: its
      // RELEASE_TO found nobody else queued, so the key stays here and later passes ask for
      // fences in the background) deletes it in Redis, as an expiry or an eviction would,
      // while the process goes on passing it; each caller notes whether it was told.
      const callers = Array.from({ length: 24 }, (_, index) =>
        locks
          .using(
            key,
            async ({ signal }) => {
              if (index === 1) await redis.del(rk);
              await sleep(20);
              if (signal.aborted) {
                told.push({ index, reason: (signal.reason as { reason?: string }).reason });
              }
            },
            { waitTimeout: 30_000 },
          )
          .catch(() => undefined),
      );
      const client = app.get(LockGroupRegistry).get('default');
      await until(() => client.queued(key) === 24, 'the callers waiting for the first');
      await first.release();
      await within(Promise.all(callers), 30_000, 'the callers');
      // The next refill answers that the token holds nothing: the holder of that moment is told
      // (before, only its watchdog's next renewal, ttl / 3 later, would have said so).
      expect(told.length).toBeGreaterThan(0);
      expect(told[0].index).toBeGreaterThan(1);
      expect(told[0].reason).toBe('lost');
    } finally {
      await app.close();
    }
  });
});

describe('across OS processes', () => {
  it('keeps exclusion and fence order when a second process joins a key passed on in memory', async () => {
    const id = randomBytes(4).toString('hex');
    const config = (calls: number): CounterScenario => ({
      scenario: 'counter',
      clients: [server.url],
      keyPrefix: `hot:${id}:`,
      dataUrl: server.url,
      dataPrefix: `hot:${id}:data:`,
      timeoutMs: 45_000,
      waitTimeout: 40_000,
      names: ['n'],
      calls,
      delayMs: 2,
      locked: true,
    });
    const first = spawnWorker(config(120));
    const second = spawnWorker(config(30));
    await Promise.all([first.ready, second.ready]);
    let joined = false;
    const joins = new Promise<void>((resolve) =>
      first.onLine(() => {
        // The first process alone for a while: well past localHandoffs, fences refilled.
        if (!joined && first.lines.filter((l) => l.type === 'hold').length >= 20) {
          joined = true;
          second.go();
          resolve();
        }
      }),
    );
    first.go();
    await within(joins, 30_000, 'the first process passing 20 sections');
    const results = await Promise.all([first.exited, second.exited]);
    for (const r of results)
      expect({ code: r.code, why: describeResult(r) }).toMatchObject({ code: 0 });

    expect(await redis.get(`hot:${id}:data:n`)).toBe('150');
    const holds = results.flatMap((r, p) =>
      r.lines.flatMap((l) => (l.type === 'hold' ? [{ ...l, by: String(p), index: 0 }] : [])),
    );
    expect(holds).toHaveLength(150);
    expect(describeOverlaps(findOverlaps(holds))).toBe('');
    expect(fencesNotIncreasing(holds)).toEqual([]);
    // The second process was not starved: it got in while the first still had callers.
    const lastOfFirst = Math.max(...holds.filter((h) => h.by === '0').map((h) => h.start));
    const firstOfSecond = Math.min(...holds.filter((h) => h.by === '1').map((h) => h.start));
    expect(firstOfSecond).toBeLessThan(lastOfFirst);
  });
});
