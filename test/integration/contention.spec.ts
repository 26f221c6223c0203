import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { LockContext, LockNotAcquiredError, LockService } from 'nest-locked';
import type { HoldScenario, WorkerLine } from '../fixtures/lock-worker';
import { findOverlaps } from '../support/intervals';
import {
  createLockApp,
  lockRedisKey,
  queuedInRedis,
  sleep,
  uniquePrefix,
  until,
  within,
} from '../support/lock-app';
import { type RedisServerHandle, useRedis } from '../support/redis-server';
import { killWorkers, spawnWorker } from '../support/workers';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { itWith } from '../support/policies';
import { onEvalsha } from '../support/evalsha-calls';
import { HANDOFF, RELEASE_TO } from '../../lib/redis/protocol/scripts';

/**
 * The waiting engine: waiters are woken by the release itself (a grant pushed over pub/sub), an
 * expired lease is still taken without any release, and nothing is left behind afterwards.
 */
jest.setTimeout(60_000);

let server: RedisServerHandle;
let redis: Redis;
let app: INestApplication;
let locks: LockService;
let prefix: string;

beforeAll(async () => {
  server = await useRedis();
  redis = new Redis(server.url);
  prefix = uniquePrefix('contention');
  app = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix, ttl: 1_500 } });
  locks = app.get(LockService);
});

afterAll(async () => {
  await killWorkers();
  await app?.close();
  redis?.disconnect();
  await server?.stop();
});

/**
 * Another process holds `name`; this app's wait for it is aborted (reason: 'caller gone') just
 * after sending the EVALSHA that `when` picks. Resolves with the lock's Redis key, still held.
 */
async function abortedWait(
  name: string,
  when: (keys: string[], argv: unknown[]) => boolean,
): Promise<string> {
  const key = lockRedisKey(prefix, name);
  await redis.set(key, 'other-process', 'PX', 10_000);
  const stop = new AbortController();
  const restore = onEvalsha(app, (keys, argv) => {
    if (keys[0] === key && when(keys, argv)) stop.abort(new Error('caller gone'));
  });
  try {
    const client = app.get(LockGroupRegistry).get('default');
    await expect(
      client.acquire([name], { ttl: 1_000, waitTimeout: 5_000, signal: stop.signal }),
    ).rejects.toThrow('caller gone');
  } finally {
    restore();
  }
  expect(stop.signal.aborted).toBe(true);
  return key;
}

/** Starts a worker process holding `job:<id>` for `holdMs`, resolved once it holds it. */
async function holdInAnotherProcess(id: string, holdMs: number, ttl = 1_500) {
  const config: HoldScenario = {
    scenario: 'hold',
    clients: [server.url],
    keyPrefix: prefix,
    dataUrl: server.url,
    dataPrefix: `${prefix}data:`,
    timeoutMs: 30_000,
    ttl,
    id,
    holdMs,
  };
  const worker = spawnWorker(config);
  await worker.ready;
  const acquired = new Promise<Extract<WorkerLine, { type: 'acquired' }>>((resolve) =>
    worker.onLine((l) => l.type === 'acquired' && resolve(l)),
  );
  worker.go();
  return { worker, acquired: await within(acquired, 10_000, 'the worker taking the lock') };
}

it('wakes a waiter by the release of another process, not by a retry timer', async () => {
  const { worker, acquired } = await holdInAnotherProcess('push', 800);
  const before = locks.stats();
  const lock = await locks.acquire('job:push', { waitTimeout: 10_000 });
  const after = locks.stats();
  await lock.release();
  const released = (await worker.exited).lines.find((l) => l.type === 'released');

  // The lock came by a grant pushed from the other process's release...
  expect(after.grants - before.grants).toBe(1);
  // ...and no fallback timer was needed to get it.
  expect(after.timerWakeups - before.timerWakeups).toBe(0);
  expect(lock.fence).toBeGreaterThan(acquired.fence);
  expect(released).toBeDefined();
});

it('takes a lock whose holder was killed, although no release was published', async () => {
  const { worker } = await holdInAnotherProcess('killed', 20_000, 1_200);
  worker.kill(); // SIGKILL: no release, the lease (1.2 s) must expire
  const before = locks.stats();
  const start = Date.now();
  const lock = await locks.acquire('job:killed', { waitTimeout: 10_000 });
  const waited = Date.now() - start;
  await lock.release();
  const after = locks.stats();
  expect(after.grants - before.grants).toBe(0);
  expect(after.timerWakeups - before.timerWakeups).toBeGreaterThan(0);
  // Not before the lease could have expired, and not long after.
  expect(waited).toBeLessThan(1_200 + 2_500);
});

it('leaves no subscription, local queue or Redis queue behind', async () => {
  const { worker } = await holdInAnotherProcess('tidy', 600);
  const waiters = Array.from({ length: 20 }, (_, i) =>
    locks
      .using('job:tidy', () => sleep(2), { waitTimeout: i < 5 ? 50 : 10_000 })
      .then(
        () => 'ok',
        (e: unknown) => (e instanceof LockNotAcquiredError ? 'busy' : `error: ${String(e)}`),
      ),
  );
  // While they wait, no key channel is subscribed at all: on a single node the grants come on
  // the group's own channel (one subscription for the connection's life, not one per key).
  await queuedInRedis(redis, prefix, 'job:tidy', 1);
  expect(locks.stats()).toMatchObject({ subscriptions: 0, queues: 1 });
  const outcomes = await Promise.all(waiters);
  await worker.exited;
  expect(outcomes.filter((o) => o === 'busy')).toHaveLength(5);
  expect(outcomes.filter((o) => o === 'ok')).toHaveLength(15);
  expect(locks.stats()).toMatchObject({ subscriptions: 0, queues: 0 });
  const key = lockRedisKey(prefix, 'job:tidy');
  expect(await redis.exists(key, `${key}:q`, `${key}:qm`)).toBe(0);
});

it('subscribes racing (multi-key) waiters to the key channels while they wait, and drops them', async () => {
  const held = await locks.acquire('job:race-a');
  const before = locks.stats();
  const waiting = locks.using(['job:race-a', 'job:race-b'], () => 'done', { waitTimeout: 5_000 });
  // It has tried (flagged the held key) and listens on both keys' channels.
  const flag = `${lockRedisKey(prefix, 'job:race-a')}:wait`;
  await until(async () => (await redis.exists(flag)) === 1, 'the held key flagged');
  await until(() => locks.stats().subscriptions === 2, 'both key channels subscribed');
  await held.release();
  await expect(waiting).resolves.toBe('done');
  const after = locks.stats();
  expect(after.notifiedWakeups - before.notifiedWakeups).toBe(1);
  expect(after.timerWakeups - before.timerWakeups).toBe(0);
  expect(after.subscriptions).toBe(0);
});

it('keeps mutual exclusion between local waiters, grants and handoffs', async () => {
  // Three processes' worth of contention on one key: this process, plus two workers.
  const a = await holdInAnotherProcess('mix', 300);
  const b = holdInAnotherProcess('mix', 300);
  const spans: { key: string; start: number; end: number }[] = [];
  await Promise.all(
    Array.from({ length: 30 }, () =>
      locks.using(
        'job:mix',
        async () => {
          const start = performance.timeOrigin + performance.now();
          await sleep(1);
          spans.push({ key: 'job:mix', start, end: performance.timeOrigin + performance.now() });
        },
        { waitTimeout: 20_000 },
      ),
    ),
  );
  const other = await b;
  for (const w of [a.worker, other.worker]) {
    await w.exited;
  }
  // The workers' methods ran at least from `acquired` for 300 ms: inside their holds.
  for (const { acquired } of [a, other]) {
    spans.push({ key: 'job:mix', start: acquired.at, end: acquired.at + 300 });
  }
  expect(spans.length).toBe(32);
  expect(findOverlaps(spans)).toEqual([]);
});

it('keeps two apps of one process apart (each client recognises only its own grants)', async () => {
  const other = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix } });
  try {
    const spans: { key: string; start: number; end: number }[] = [];
    const run = (service: LockService) =>
      service.using(
        'job:twins',
        async () => {
          const start = performance.timeOrigin + performance.now();
          await sleep(1);
          spans.push({ key: 'job:twins', start, end: performance.timeOrigin + performance.now() });
        },
        { waitTimeout: 20_000 },
      );
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => run(i % 2 ? locks : other.get(LockService))),
    );
    expect(spans).toHaveLength(40);
    expect(findOverlaps(spans)).toEqual([]);
    expect(locks.stats().grants + other.get(LockService).stats().grants).toBeGreaterThan(0);
  } finally {
    await other.close();
  }
});

it('with localHandoffs 0, a caller its process queued behind another process (RELEASE_TO) hears its grant, in its turn', async () => {
  // A process that never waited on its grant channel, and passes its key on only through Redis.
  const passer = await createLockApp({
    options: { clients: [server.url], keyPrefix: prefix, localHandoffs: 0 },
  });
  const late = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix } });
  try {
    const service = passer.get(LockService);
    const order: string[] = [];
    const section = (name: string) => async () => {
      order.push(name);
      await sleep(20);
    };
    const held = await service.acquire('job:rt0');
    const other = locks.using('job:rt0', section('other process'), { waitTimeout: 5_000 });
    await queuedInRedis(redis, prefix, 'job:rt0', 1);
    const own = service.using('job:rt0', section('own next caller'), { waitTimeout: 5_000 });
    const passerClient = passer.get(LockGroupRegistry).get('default');
    await until(() => passerClient.queued('job:rt0') === 1, "waits in its process's line");
    // Granted to the other process; the next caller of this one queued behind it.
    await held.release();
    // The later process arrives once the key went to the other process (and this one's next
    // caller queued behind it in Redis).
    await until(() => order.length > 0, 'the other process holds the key');
    const last = late
      .get(LockService)
      .using('job:rt0', section('later process'), { waitTimeout: 5_000 });
    const started = performance.now();
    await within(Promise.all([other, own, last]), 5_000, 'all three');
    expect(order).toEqual(['other process', 'own next caller', 'later process']);
    // By the grant message, not by a retry timer after the grant's claim window ran out.
    expect(performance.now() - started).toBeLessThan(900);
    expect(service.stats().timerWakeups).toBe(0);
  } finally {
    await passer.close();
    await late.close();
  }
});

it('delivers every grant while two apps hammer four slices', async () => {
  // Two clients (two apps) hammering four slices: grants go back and forth on each app's own
  // channel. A grant lost or sent to the wrong app would show up as a waiter woken by its
  // fallback timer.
  const other = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix } });
  try {
    const services = [locks, other.get(LockService)];
    const before = services.map((s) => s.stats());
    await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        services[i % 2].using('job:slices', () => sleep(1), { segments: 4, waitTimeout: 20_000 }),
      ),
    );
    const after = services.map((s) => s.stats());
    const grants = after.reduce((n, s, i) => n + s.grants - before[i].grants, 0);
    const timers = after.reduce((n, s, i) => n + s.timerWakeups - before[i].timerWakeups, 0);
    expect(grants).toBeGreaterThan(0);
    expect(timers).toBe(0);
    expect(after.map((s) => s.subscriptions)).toEqual([0, 0]);
  } finally {
    await other.close();
  }
});

itWith('localHandoff')(
  'hands the key to the next caller of the process with no round trip, fences still increasing',
  async () => {
    const sections: { fence: number; start: number }[] = [];
    const section = async () => {
      const { fence } = LockContext.current()!;
      sections.push({ fence, start: performance.now() });
      await sleep(1);
    };
    // A pass in memory gives the next caller the rest of the lease only while that is what a
    // fresh acquire would give less one more drift allowance (`RedisLeases.freshFor`): the lease
    // set or renewed at most ttl x driftFactor + 2 ms ago. At this app's ttl (1.5 s) that is
    // 17 ms, which a loaded machine's pauses exceed; then the pass is made by HANDOFF, a round
    // trip, by design (at load 9 a run sent TRY, RELEASE_TO, 4 HANDOFFs, 3 REFILLs and RELEASE;
    // another 13 EVALSHA). These callers take 30 s leases (302 ms fresh), and the HANDOFFs still
    // sent on a stalled machine are counted apart.
    const ttl = 30_000;
    const sent: string[] = [];
    const restore = onEvalsha(app, (_keys, _argv, sha) => sent.push(sha));
    const before = locks.stats();
    try {
      await Promise.all(
        Array.from({ length: 20 }, () =>
          locks.using('job:local', section, { waitTimeout: 20_000, ttl }),
        ),
      );
    } finally {
      restore();
    }
    const after = locks.stats();
    expect(sections).toHaveLength(20);
    const passes = after.localHandoffs - before.localHandoffs;
    const handoffs = sent.filter((sha) => sha === HANDOFF.sha).length;
    const releasesTo = sent.filter((sha) => sha === RELEASE_TO.sha).length;
    // Every default-bounded run of local handoffs (4) costs no command: one acquire and one
    // release or pass-on per five sections, not one per section.
    expect(passes).toBeGreaterThanOrEqual(15);
    // Passes in memory: neither by HANDOFF nor by a RELEASE_TO that found nobody else queued.
    expect(passes - handoffs - releasesTo).toBeGreaterThan(0);
    // A pass made by HANDOFF (its lease no longer fresh) costs that HANDOFF, and the new token
    // it takes has no spare fences, so the next pass in memory costs a REFILL: two commands
    // beyond the bound of an unloaded run, which has none.
    expect(sent.length - 2 * handoffs).toBeLessThanOrEqual(10);
    const fences = sections.sort((a, b) => a.start - b.start).map((s) => s.fence);
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);

    // A caller with another lease length is handed the key by the HANDOFF script instead (its
    // lease is set in Redis), and the fences go on increasing; so does another app's.
    const mixed: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        locks.using(
          'job:local',
          async ({ fence }) => {
            mixed.push(fence);
            await sleep(1);
          },
          { waitTimeout: 20_000, ttl: i % 2 ? 1_500 : 2_500 },
        ),
      ),
    );
    for (let i = 1; i < mixed.length; i++) expect(mixed[i]).toBeGreaterThan(mixed[i - 1]);
    expect(mixed[0]).toBeGreaterThan(fences[fences.length - 1]);
    const other = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix } });
    try {
      const handle = await other.get(LockService).acquire('job:local', { waitTimeout: 0 });
      expect(handle.fence).toBeGreaterThan(mixed[mixed.length - 1]);
      await handle.release();
    } finally {
      await other.close();
    }
  },
);

it('leaves the Redis queue when a wait ends while its first queued attempt is in flight', async () => {
  // Otherwise the token stays queued and a release grants the key to a caller that is gone.
  // ACQUIRE with [token, ttl, wait ms, queue, block]: the first attempt that may queue.
  const key = await abortedWait(
    'job:inflight',
    (keys, argv) => keys.length === 6 && argv[2] !== '0' && argv[2] !== 0,
  );
  // The undo lands soon after; a token left behind would stay (its wait was 5 s) and fail this.
  await until(async () => (await redis.zcard(`${key}:q`)) === 0, 'the token left the queue', 2_000);
  await redis.del(key);
});

it('runs an uncontended cycle on TRY (two keys) and RELEASE, and a release that finds a waiter still grants', async () => {
  const key = lockRedisKey(prefix, 'job:lean');
  const sent: string[][] = [];
  const restore = onEvalsha(app, (keys) => keys[0] === key && sent.push(keys));
  const other = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix } });
  try {
    await locks.using('job:lean', () => undefined);
    // The acquire sends the lock and its fence counter, the release the key's six keys (of which
    // it reads the lock and deletes it and the wait flag when nobody waits).
    expect(sent).toEqual([
      [key, `${key}:fence`],
      [key, `${key}:fence`, `${key}:wait`, `${key}:q`, `${key}:qm`, `${key}:h`],
    ]);

    sent.length = 0;
    const lock = await locks.acquire('job:lean');
    const waiter = other.get(LockService);
    const before = waiter.stats();
    const waiting = waiter.acquire('job:lean', { waitTimeout: 10_000 });
    await queuedInRedis(redis, prefix, 'job:lean', 1);
    await lock.release();
    const handle = await waiting;
    const after = waiter.stats();
    // The release's DEL found the wait flag, so the same script granted the key to the queued
    // waiter: pushed, no retry timer.
    expect(sent.map((keys) => keys.length)).toEqual([2, 6]);
    expect(after.grants - before.grants).toBe(1);
    expect(after.timerWakeups - before.timerWakeups).toBe(0);
    expect(handle.fence).toBeGreaterThan(lock.fence);
    await handle.release();
  } finally {
    restore();
    await other.close();
  }
});

it('queues a segmented call in Redis right after a busy sweep, without another first try', async () => {
  const slices = [0, 1].map((i) => lockRedisKey(prefix, `job:seg:seg:${i}`));
  const sent: string[][] = [];
  const other = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix } });
  const holder = other.get(LockService);
  const held = await Promise.all(
    [0, 1].map((i) => holder.acquire(`job:seg:seg:${i}`, { waitTimeout: 0 })),
  );
  const restore = onEvalsha(app, (keys) => slices.includes(keys[0]) && sent.push(keys));
  try {
    const before = locks.stats();
    const running = locks.using('job:seg', ({ segment }) => segment, {
      segments: 2,
      waitTimeout: 10_000,
    });
    await until(() => sent.length >= 2, 'the sweep and the queued attempt');
    // The sweep (two keys per slice), then straight into the Redis queue of one slice (the full
    // six keys): no TRY of a slice the sweep has just seen busy.
    expect(sent[0]).toHaveLength(4);
    expect(sent[1]).toHaveLength(6);
    const line = slices.indexOf(sent[1][0]);
    await held[line].release();
    await expect(running).resolves.toBe(line);
    expect(locks.stats().grants - before.grants).toBe(1);
  } finally {
    restore();
    await Promise.all(held.map((h) => h.release()));
    await other.close();
  }
});

it('leaves no local queue behind when the wait is aborted during the first try', async () => {
  const client = app.get(LockGroupRegistry).get('default');
  const queues = client.queueCount;
  // Aborted as soon as the first try is sent.
  await redis.del(await abortedWait('job:abort-first', () => true));
  expect(client.queueCount).toBe(queues);
});

describe('waiters behind the head (they sleep with no timer of their own)', () => {
  /** Settles to 'held' (released at once), or the error's name. */
  const outcome = (p: Promise<{ release(): Promise<void> }>) =>
    p.then(
      async (h) => {
        await h.release();
        return 'held';
      },
      (e: Error) => e.name,
    );

  it('end at once on their signal and at their deadline; the rest keep their order', async () => {
    const name = 'line:behind-ends';
    await redis.set(lockRedisKey(prefix, name), 'other-process', 'PX', 1_000);
    const order: number[] = [];
    const stop = new AbortController();
    const wait = (i: number, waitTimeout: number, signal?: AbortSignal) =>
      locks.acquire(name, { waitTimeout, signal }).then(async (h) => {
        order.push(i);
        await sleep(5);
        return h;
      });
    const client = app.get(LockGroupRegistry).get('default');
    const head = outcome(wait(0, 10_000));
    await queuedInRedis(redis, prefix, name, 1);
    const aborted = outcome(wait(1, 10_000, stop.signal));
    const timedOut = outcome(wait(2, 300));
    const last = outcome(wait(3, 10_000));
    await until(() => client.queued(name) === 4, 'three waiting behind the head');
    stop.abort(new Error('caller gone'));
    expect(await within(aborted, 1_000, 'the aborted waiter')).toBe('Error');
    expect(await within(timedOut, 2_000, 'the waiter at its deadline')).toBe(
      'LockNotAcquiredError',
    );
    expect(await within(Promise.all([head, last]), 8_000, 'the others')).toEqual(['held', 'held']);
    expect(order).toEqual([0, 3]);
  });

  it('one that becomes the head while the key is held here gets it at the release', async () => {
    const name = 'line:behind-held-here';
    const holder = await locks.acquire(name);
    const first = outcome(locks.acquire(name, { waitTimeout: 200 }));
    const second = locks.acquire(name, { waitTimeout: 10_000 });
    // The head times out while the key is held here: its successor is not woken (the release is).
    expect(await first).toBe('LockNotAcquiredError');
    // A window, not a barrier: a successor woken wrongly now would try (and fail) before the
    // release, and then miss it.
    await sleep(50);
    const fence = holder.fence;
    await holder.release();
    const next = await within(second, 2_000, 'the new head, at the release');
    expect(next.fence).toBeGreaterThan(fence);
    await next.release();
  });

  it('one that becomes the head while the key is held here takes it when the lease runs out unannounced', async () => {
    // The engine alone: no watchdog reports the lease's end, no release is sent. The new head
    // must learn it is the head and sleep on its own timer until the hold's end.
    const client = app.get(LockGroupRegistry).get('default');
    const name = 'line:behind-expired-here';
    const held = await client.acquire([name], { ttl: 1_000, waitTimeout: 0 });
    const first = client.acquire([name], { ttl: 1_000, waitTimeout: 200 });
    const second = client.acquire([name], { ttl: 1_000, waitTimeout: 10_000 });
    await expect(first).rejects.toBeInstanceOf(LockNotAcquiredError);
    const next = await within(second, 5_000, 'the new head, after the lease ran out');
    expect(next.fences[0]).toBeGreaterThan(held.fences[0]);
    await client.release(next);
    await client.release(held).catch(() => undefined);
  });

  it('one that becomes the head while the key is held here gets it when that hold is lost', async () => {
    const name = 'line:behind-lost-here';
    const holder = await locks.acquire(name);
    const first = outcome(locks.acquire(name, { waitTimeout: 200 }));
    const second = locks.acquire(name, { waitTimeout: 10_000 });
    expect(await first).toBe('LockNotAcquiredError');
    // The hold is lost in Redis: its watchdog finds out at its next renewal (ttl / 3).
    await redis.del(lockRedisKey(prefix, name));
    const next = await within(second, 5_000, 'the new head, after the loss');
    expect(holder.signal.aborted).toBe(true);
    await next.release();
    await holder.release();
  });
});
