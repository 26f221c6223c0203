import * as vm from 'node:vm';
import type { INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  LockBackendError,
  LockConfigError,
  LockContext,
  type LockedOptions,
  type LockHandle,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  type RedlockModuleOptions,
} from '../../lib';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { ACQUIRE } from '../../lib/redis/protocol/scripts';
import {
  describeOutcome,
  frozen,
  releaseIfHeld,
  settle,
  type Settled,
  uid,
} from '../support/faults';
import {
  createLockApp,
  lockRedisKey,
  sleep,
  uniquePrefix,
  until,
  within,
} from '../support/lock-app';
import { type RedisServerHandle, startRedisServers, stopAll } from '../support/redis-server';
import { blockEventLoop, setNxFromAnotherProcess } from '../support/stalls';

/**
 * Reproductions of engine defects found at 9fa1524. Every test asserts the behaviour the engine
 * should have, so it fails on that commit and passes once the defect is fixed. Public API only
 * (plus `LockService.stats()`, and the lock client's `queued()` to know a caller waits); Redis is
 * inspected with plain ioredis clients.
 */
jest.setTimeout(60_000);

// ------------------------------------------------------------------------------ harness

const servers: RedisServerHandle[] = [];
const apps: INestApplication[] = [];
const clients: Redis[] = [];

afterAll(async () => {
  // Resume anything a failed test left frozen, so the apps can close and the servers stop.
  for (const s of servers) if (s.pid !== undefined) s.kill('SIGCONT');
  await Promise.all(
    apps.map((a) => within(a.close(), 10_000, 'app.close()').catch(() => undefined)),
  );
  for (const c of clients) c.disconnect();
  await stopAll(servers);
});

async function startServers(count: number): Promise<RedisServerHandle[]> {
  const started = await startRedisServers(count);
  servers.push(...started);
  return started;
}

async function startApp(options: RedlockModuleOptions): Promise<INestApplication> {
  const app = await createLockApp({ options });
  apps.push(app);
  return app;
}

async function lockService(options: RedlockModuleOptions): Promise<LockService> {
  return (await startApp(options)).get(LockService);
}

function rawClient(server: RedisServerHandle): Redis {
  const client = new Redis(server.url);
  clients.push(client);
  return client;
}

/** Three fresh servers, a plain client on each, and a lock service over them as a quorum. */
async function quorumOfThree(
  keyPrefix: string,
  commandTimeout: number,
): Promise<{ nodes: RedisServerHandle[]; raw: Redis[]; locks: LockService }> {
  const nodes = await startServers(3);
  const raw = nodes.map(rawClient);
  const locks = await lockService({ clients: nodes.map((n) => n.url), keyPrefix, commandTimeout });
  return { nodes, raw, locks };
}

// ------------------------------------------------------------------------------ engine

let server: RedisServerHandle;
let redis: Redis;

beforeAll(async () => {
  [server] = await startServers(1);
  redis = rawClient(server);
});

describe('defect 1: a forgotten handle does not poison its key', () => {
  const keyPrefix = uniquePrefix('d1');
  let locks: LockService;
  let other: LockService;

  beforeAll(async () => {
    [locks, other] = await Promise.all([
      lockService({ clients: [server.url], keyPrefix }),
      lockService({ clients: [server.url], keyPrefix }),
    ]);
  });

  it('once the forgotten lease ran out and another hold of the key was released here, the free key is taken at once', async () => {
    const key = `job:${uid()}`;
    // Taken and never released: its lease ends in Redis after 200 ms.
    await locks.acquire(key, { ttl: 200, watchdog: false });
    await until(
      async () => (await redis.exists(lockRedisKey(keyPrefix, key))) === 0,
      'the forgotten lease ran out in Redis',
      3_000,
    );

    // Another hold of the key in the same process, released normally.
    const second = await locks.acquire(key, { waitTimeout: 0 });
    await second.release();

    // The key is free in Redis: another app takes it at once.
    const elsewhere = await settle(() => other.acquire(key, { waitTimeout: 0 }));
    expect(describeOutcome(elsewhere)).toBe('acquired');
    await releaseIfHeld(elsewhere);

    // So must this process, without and with waiting.
    const now = await settle(() => locks.acquire(key, { waitTimeout: 0 }));
    await releaseIfHeld(now);
    const waiting = await settle(() => locks.acquire(key, { waitTimeout: 1_000 }));
    await releaseIfHeld(waiting);
    expect({ now: describeOutcome(now), waiting: describeOutcome(waiting) }).toEqual({
      now: 'acquired',
      waiting: 'acquired',
    });
    expect(waiting.ms).toBeLessThan(500);
  });
});

describe('defect 2: a waiter behind an expiring lease of its own process gets the lock at the expiry', () => {
  const keyPrefix = uniquePrefix('d2');
  let locks: LockService;

  beforeAll(async () => {
    locks = await lockService({ clients: [server.url], keyPrefix });
  });

  it('waitTimeout 1000 behind a 200 ms lease that is never released: acquired at about 200 ms', async () => {
    const key = `job:${uid()}`;
    const start = performance.now();
    await locks.acquire(key, { ttl: 200, watchdog: false }); // never released
    const r = await settle(() => locks.acquire(key, { waitTimeout: 1_000 }));
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toBe('acquired');
    // Not before the lease ran out (mutual exclusion), and soon after it.
    const gotAt = r.at - start;
    expect(gotAt).toBeGreaterThanOrEqual(150);
    expect(gotAt).toBeLessThanOrEqual(450);
  });
});

describe('defect 3: quorum wake-ups do not hang on the first node', () => {
  /** Closes an app (bounded: a subscriber stuck on a dead node must not hang the suite). */
  async function closeApp(app: INestApplication): Promise<void> {
    const i = apps.indexOf(app);
    if (i >= 0) apps.splice(i, 1);
    await within(app.close(), 10_000, 'app.close()').catch(() => undefined);
  }

  const COMMAND_TIMEOUT = 2_000;
  let nodes: RedisServerHandle[];

  beforeAll(async () => {
    nodes = await startServers(3);
  });

  const options = (keyPrefix: string): RedlockModuleOptions => ({
    clients: nodes.map((n) => n.url),
    keyPrefix,
    commandTimeout: COMMAND_TIMEOUT,
  });

  it('node 0 stopped: a release in another app reaches the waiter well before commandTimeout', async () => {
    const keyPrefix = uniquePrefix('d3a');
    const [holderApp, waiterApp] = await Promise.all([
      startApp(options(keyPrefix)),
      startApp(options(keyPrefix)),
    ]);
    try {
      await nodes[0].stop();
      const key = `job:${uid()}`;
      const lock = await holderApp.get(LockService).acquire(key, { waitTimeout: 0 });
      const waiting = settle(() => waiterApp.get(LockService).acquire(key, { waitTimeout: 5_000 }));
      // Waiting: subscribed to the key's channel, where the release will reach it.
      await until(
        () => waiterApp.get(LockService).stats().subscriptions === 1,
        'the waiter listening for the release',
      );
      const releasedAt = performance.now();
      await lock.release();
      const r = await waiting;
      await releaseIfHeld(r);
      expect(describeOutcome(r)).toBe('acquired');
      expect(r.at).toBeGreaterThanOrEqual(releasedAt);
      // Woken from a live node: far less than commandTimeout after the release.
      expect(r.at - releasedAt).toBeLessThan(1_000);
    } finally {
      // Back up before closing: a subscriber waiting for node 0 would hold the close up.
      await nodes[0].restart();
      await Promise.all([closeApp(holderApp), closeApp(waiterApp)]);
    }
  });

  it('nodes 0 and 1 stopped: a caller queued behind a hold of its own process gets LockBackendError, not LockNotAcquiredError', async () => {
    const keyPrefix = uniquePrefix('d3b');
    const app = await startApp(options(keyPrefix));
    const locks = app.get(LockService);
    try {
      const key = `job:${uid()}`;
      const held = await locks.acquire(key, { waitTimeout: 0 });
      await Promise.all([nodes[0].stop(), nodes[1].stop()]);
      const waiting = settle(() => locks.acquire(key, { waitTimeout: 1_500 }));
      const client = app.get(LockGroupRegistry).get('default');
      await until(() => client.queued(key) === 1, 'the caller queued behind the hold');
      await held.release(); // fails in Redis (no quorum): logged, never thrown
      const r = await waiting;
      await releaseIfHeld(r);
      // No majority of nodes can answer: a backend failure, not contention.
      expect(describeOutcome(r)).toMatch(/^LockBackendError/);
      expect(r.error).toBeInstanceOf(LockBackendError);
    } finally {
      await Promise.all([nodes[0].restart(), nodes[1].restart()]);
      await closeApp(app);
    }
  });
});

describe('defect 4: a quorum acquire that gives up leaves no token behind', () => {
  const COMMAND_TIMEOUT = 2_000;
  let nodes: RedisServerHandle[];
  let raw: Redis[];
  let locks: LockService;
  const keyPrefix = uniquePrefix('d4');

  beforeAll(async () => {
    ({ nodes, raw, locks } = await quorumOfThree(keyPrefix, COMMAND_TIMEOUT));
  });

  /** Lock keys (not :fence/:wait/...) under the prefix on one node, with their values. */
  async function lockKeys(node: Redis): Promise<Record<string, string | null>> {
    const keys = (await node.keys(`${keyPrefix}*`)).filter((k) => k.endsWith('}'));
    const out: Record<string, string | null> = {};
    for (const k of keys) out[k] = await node.get(k);
    return out;
  }

  it('held elsewhere on nodes 0 and 1, node 1 slow to answer: once the call rejected, node 2 holds none of its tokens', async () => {
    // The key is held by another client on a majority (nodes 0 and 1); node 2 is free, so every
    // attempt of the caller takes it there and must undo that. Node 1 answers late (frozen): the
    // first try is counted only at commandTimeout (~2 s), the next attempt is still in flight
    // when the call gives up at 2.6 s.
    const key = `job:${uid()}`;
    const rk = lockRedisKey(keyPrefix, key);
    await Promise.all([
      raw[0].set(rk, 'foreign', 'PX', 60_000),
      raw[1].set(rk, 'foreign', 'PX', 60_000),
    ]);
    const { r, onNode0, onNode2 } = await frozen(nodes[1], 0, async () => {
      const r = await settle(() => locks.acquire(key, { waitTimeout: 2_600 }));
      await releaseIfHeld(r);
      await sleep(200); // settle time: an undo sent when the call gave up has landed by now
      return { r, onNode2: await lockKeys(raw[2]), onNode0: await lockKeys(raw[0]) };
    });
    // Node 1 resumed: a window for its late commands (and any undo after them) to land.
    await sleep(300);
    const onNode1 = await lockKeys(raw[1]);

    expect(describeOutcome(r)).toMatch(/^LockNotAcquiredError/);
    // Only the foreign token may be anywhere; the failed caller's token must be gone.
    expect({ node0: onNode0, node1: onNode1, node2: onNode2 }).toEqual({
      node0: { [rk]: 'foreign' },
      node1: { [rk]: 'foreign' },
      node2: {},
    });
  });
});

describe('defect 15: a late error of an earlier quorum attempt does not undo a later hold', () => {
  const COMMAND_TIMEOUT = 400;
  let nodes: RedisServerHandle[];
  let raw: Redis[];
  let locks: LockService;
  const keyPrefix = uniquePrefix('d15');

  beforeAll(async () => {
    ({ nodes, raw, locks } = await quorumOfThree(keyPrefix, COMMAND_TIMEOUT));
    await locks.using('warm-up', () => undefined); // scripts loaded, connections open
  });

  it('node 0 frozen past commandTimeout while the waiter tries again: once held, the key is its own on nodes 0 and 1', async () => {
    // Node 2 is held elsewhere for good, node 1 for 250 ms; node 0 is frozen. The first tries
    // find a majority busy and end without node 0's answer. At 250 ms the next attempt takes
    // node 1 and waits for node 0, whose earlier commands time out at 400 ms (errors that come
    // after their round was over). Node 0 resumes at 520 ms: the attempt takes it there and
    // holds by nodes 0 and 1. A late error must not undo that hold on node 0: the key would be
    // held by one node only, and another caller could take nodes 0 and 2 while it runs.
    const key = `job:${uid()}`;
    const rk = lockRedisKey(keyPrefix, key);
    await Promise.all([
      raw[2].set(rk, 'foreign', 'PX', 60_000),
      raw[1].set(rk, 'brief', 'PX', 250),
    ]);
    let pending!: Promise<Settled<LockHandle>>;
    await frozen(nodes[0], 520, async () => {
      pending = settle(() => locks.acquire(key, { waitTimeout: 5_000, ttl: 30_000 }));
    });
    const r = await pending;
    await sleep(200); // the late commands, and any undo sent after them, have landed
    const values = await Promise.all(raw.map((n) => n.get(rk)));
    await releaseIfHeld(r);

    expect(describeOutcome(r)).toBe('acquired');
    expect({ node0: values[0] === values[1], node1: values[1], node2: values[2] }).toEqual({
      node0: true,
      node1: expect.stringMatching(/./),
      node2: 'foreign',
    });
  });
});

describe('defect 16: waiters queued within the same millisecond keep their order', () => {
  it('four waiters queued back to back (one MULTI) are first in the queue in the order they came, whatever their tokens', async () => {
    // The queue is ordered by the time each waiter queued; Redis orders members with the same
    // score by their bytes, so with a score in ms, waiters of one millisecond (a burst, or
    // several processes at once) came out by token, not by arrival.
    const rk = lockRedisKey(uniquePrefix('d16'), 'tie');
    const keys = [rk, `${rk}:fence`, `${rk}:wait`, `${rk}:q`, `${rk}:qm`, `${rk}:h`];
    await redis.set(rk, 'holder.0', 'PX', 10_000);
    const tokens = ['zz.1', 'yy.1', 'xx.1', 'ww.1'];
    const queued = redis.multi();
    for (const t of tokens)
      queued.eval(ACQUIRE.lua, keys.length, ...keys, t, 5_000, 5_000, '1', 5, 'clock');
    await queued.exec();
    expect(await redis.zrange(`${rk}:q`, 0, -1)).toEqual(tokens);
    await redis.del(...keys);
  });
});

describe('defect 6: a key without a TTL is not hammered', () => {
  let trio: RedisServerHandle[];

  beforeAll(async () => {
    trio = await startServers(3);
  });

  it.each([
    ['one node', 1],
    ['three nodes (quorum)', 3],
  ])('%s: a 1 s wait on a key with no expiry sends few attempts', async (_label, count) => {
    const keyPrefix = uniquePrefix('d6');
    const nodes = count === 1 ? [server] : trio;
    const locks = await lockService({ clients: nodes.map((n) => n.url), keyPrefix });
    const key = `job:${uid()}`;
    // Written by another tool: no expiry at all (PTTL -1).
    await Promise.all(nodes.map((n) => rawClient(n).set(lockRedisKey(keyPrefix, key), 'foreign')));
    const before = locks.stats().attempts;
    const r = await settle(() => locks.acquire(key, { waitTimeout: 1_000 }));
    const attempts = locks.stats().attempts - before;
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toMatch(/^LockNotAcquiredError/);
    expect(r.error).toBeInstanceOf(LockNotAcquiredError);
    expect(attempts).toBeLessThan(50);
  });
});

describe('defect 7: a ttl too long for a timer is rejected, or its timers are clamped', () => {
  /** Calls of Lua scripts (EVALSHA + EVAL) a server has run so far. */
  async function scriptCalls(client: Redis): Promise<number> {
    const info = await client.info('commandstats');
    let calls = 0;
    for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
    return calls;
  }

  const TTL = 7e9; // > 3 * (2^31 - 1): ttl / 3 does not fit a timer

  /** TimeoutOverflowWarnings of the real process (jest's `process` is a copy that never hears them). */
  function overflowWarnings(): { seen: string[]; stop: () => void } {
    const real = vm.runInThisContext('process') as NodeJS.Process;
    const seen: string[] = [];
    // Silence Node's own printer meanwhile (it would print one line per warning).
    const saved = real.listeners('warning') as ((w: Error) => void)[];
    real.removeAllListeners('warning');
    const listener = (w: Error) => {
      if (w.name === 'TimeoutOverflowWarning') seen.push(w.message.split('\n')[0]);
    };
    real.on('warning', listener);
    return {
      seen,
      stop: () => {
        real.off('warning', listener);
        for (const l of saved) real.on('warning', l);
      },
    };
  }

  async function check(locks: LockService, options: LockedOptions): Promise<void> {
    const key = `job:${uid()}`;
    const warnings = overflowWarnings();
    let renewals = 0;
    try {
      const r = await settle(() => locks.acquire(key, options));
      if (!r.ok) {
        // The first acceptable fix: such a ttl is refused.
        expect(r.error).toBeInstanceOf(LockConfigError);
        return;
      }
      // The other: accepted, with its timers clamped.
      const before = await scriptCalls(redis);
      // The window in which clamped timers must not have fired a burst of renewals.
      await sleep(200);
      renewals = (await scriptCalls(redis)) - before;
      await releaseIfHeld(r);
      await new Promise(setImmediate); // warnings are emitted on the next tick
    } finally {
      warnings.stop();
    }
    expect({ warnings: warnings.seen.length, first: warnings.seen[0] }).toEqual({
      warnings: 0,
      first: undefined,
    });
    expect(renewals).toBeLessThanOrEqual(2);
  }

  it('per call: ttl 7e9', async () => {
    const locks = await lockService({ clients: [server.url], keyPrefix: uniquePrefix('d7') });
    await check(locks, { ttl: TTL });
  });

  it('module option: ttl 7e9', async () => {
    let locks: LockService;
    try {
      locks = await lockService({ clients: [server.url], keyPrefix: uniquePrefix('d7'), ttl: TTL });
    } catch (error) {
      expect(error).toBeInstanceOf(LockConfigError);
      return;
    }
    await check(locks, {});
  });
});

describe('defect 8: the wait deadline never fires early', () => {
  const keyPrefix = uniquePrefix('d8');
  let locks: LockService;

  beforeAll(async () => {
    locks = await lockService({ clients: [server.url], keyPrefix });
  });

  it('a busy key rejects no sooner than waitTimeout, every time', async () => {
    const key = `job:${uid()}`;
    await redis.set(lockRedisKey(keyPrefix, key), 'foreign', 'PX', 60_000);
    const early: string[] = [];
    const outcomes = new Set<string>();
    for (const waitTimeout of [50, 50, 50, 50, 50, 20, 20, 20, 20, 20]) {
      for (let i = 0; i < 3; i++) {
        const r = await settle(() => locks.acquire(key, { waitTimeout }));
        await releaseIfHeld(r);
        outcomes.add(r.ok ? 'acquired' : (r.error as Error).name);
        if (r.ms < waitTimeout) early.push(`${r.ms.toFixed(2)} ms < ${waitTimeout} ms`);
      }
    }
    expect([...outcomes]).toEqual(['LockNotAcquiredError']);
    expect(early).toEqual([]);
  });
});

describe('defect 9: a stalled Redis leaves no lock that nobody holds', () => {
  const keyPrefix = uniquePrefix('d9');
  let stall: RedisServerHandle;
  let raw: Redis;
  let locks: LockService;

  beforeAll(async () => {
    [stall] = await startServers(1);
    raw = rawClient(stall);
    locks = await lockService({
      clients: [stall.url],
      keyPrefix,
      commandTimeout: 400,
      ttl: 10_000,
    });
  });

  it('callers failed by commandTimeout while Redis was frozen: their keys are free once it resumes', async () => {
    const keys = Array.from({ length: 5 }, () => `job:${uid()}`);
    await locks.using('warm-up', () => undefined); // scripts loaded, connection open
    stall.kill('SIGSTOP');
    let failures: Settled<LockHandle>[];
    try {
      const stoppedAt = performance.now();
      failures = await Promise.all(
        keys.map((k, i) => settle(() => locks.acquire(k, { waitTimeout: i % 2 ? 1_000 : 0 }))),
      );
      await sleep(Math.max(0, 2_000 - (performance.now() - stoppedAt)));
    } finally {
      stall.kill('SIGCONT');
    }
    for (const f of failures) await releaseIfHeld(f);
    expect(failures.map(describeOutcome).map((o) => o.split(':')[0])).toEqual(
      keys.map(() => 'LockBackendError'),
    );

    await sleep(300); // the late scripts ran as soon as Redis resumed
    const left = await Promise.all(keys.map((k) => raw.get(lockRedisKey(keyPrefix, k))));
    const next = [];
    for (const k of keys) {
      const r = await settle(() => locks.acquire(k, { waitTimeout: 0 }));
      await releaseIfHeld(r);
      next.push(describeOutcome(r));
    }
    expect({ left, next }).toEqual({
      left: keys.map(() => null),
      next: keys.map(() => 'acquired'),
    });
  });
});

describe('defect 12: a wait can be cancelled with an AbortSignal', () => {
  const keyPrefix = uniquePrefix('d12');
  let locks: LockService;

  beforeAll(async () => {
    locks = await lockService({ clients: [server.url], keyPrefix });
  });

  /** A foreign holder has the key; the call waits 200 ms, then its signal is aborted. */
  async function cancelledOn(
    key: string,
    call: (options: LockedOptions) => Promise<unknown>,
  ): Promise<void> {
    const rk = lockRedisKey(keyPrefix, key);
    await redis.set(rk, 'foreign', 'PX', 10_000);
    const controller = new AbortController();
    const reason = new Error('caller gone');
    const options = { waitTimeout: 3_000, signal: controller.signal } as LockedOptions;
    const waiting = settle(() => call(options));
    await until(async () => (await redis.zcard(`${rk}:q`)) === 1, 'the call queued in Redis');
    const abortedAt = performance.now();
    controller.abort(reason);
    const r = await waiting;
    await releaseIfHeld(r);
    expect(r.ok ? 'settled with a value' : r.error).toBe(reason);
    expect(r.at - abortedAt).toBeLessThan(500);
    // Nothing of the caller is left queued, in Redis or in the process: its undo lands soon, while
    // a token left behind would stay there until its wait (3 s) ran out.
    await until(
      async () =>
        (await redis.zcard(`${rk}:q`)) === 0 &&
        (await redis.hlen(`${rk}:qm`)) === 0 &&
        locks.stats().queues === 0,
      'nothing of the caller left queued',
      1_000,
    );
  }

  it('acquire({ signal }): abort ends the wait at once with the reason, nothing left queued', async () => {
    const key = `job:${uid()}`;
    await cancelledOn(key, (options) => locks.acquire(key, options));
  });

  it('using({ signal }): abort ends the wait with the reason, the function never runs', async () => {
    const key = `job:${uid()}`;
    let ran = false;
    await cancelledOn(key, (options) =>
      locks.using(
        key,
        () => {
          ran = true;
        },
        options,
      ),
    );
    expect(ran).toBe(false);
  });

  it('an already aborted signal ends the call at once with its reason', async () => {
    const key = `job:${uid()}`;
    const rk = lockRedisKey(keyPrefix, key);
    await redis.set(rk, 'foreign', 'PX', 10_000);
    const reason = new Error('already gone');
    const options = { waitTimeout: 3_000, signal: AbortSignal.abort(reason) } as LockedOptions;
    const r = await settle(() => locks.acquire(key, options));
    await releaseIfHeld(r);
    expect(r.ok ? 'settled with a value' : r.error).toBe(reason);
    expect(r.ms).toBeLessThan(500);
  });
});

describe('defect 13: a lease known to be over is not reported as held', () => {
  const TTL = 300;
  const keyPrefix = uniquePrefix('d13');
  let stall: RedisServerHandle;
  let locks: LockService;

  beforeAll(async () => {
    [stall] = await startServers(1);
    locks = await lockService({ clients: [stall.url], keyPrefix, commandTimeout: 2_000 });
  });

  it('using: after the event loop was blocked past the lease, the signal is aborted before any reply can be read', async () => {
    const seen = await locks.using(
      `job:${uid()}`,
      async () => {
        const kept = LockContext.current()!.signal;
        if (kept.aborted) return { fresh: 'aborted before the block', kept: true };
        // Registered before the block, due after the local lease end: every timer due earlier
        // (the watchdog's, a local expiry timer) runs first, and no socket was read yet when
        // this one resumes us (timers run before I/O in a loop turn).
        const turn = sleep(TTL + 100);
        blockEventLoop(2 * TTL);
        await turn;
        const fresh = LockContext.current()!.signal.aborted;
        return { fresh, kept: kept.aborted };
      },
      { ttl: TTL },
    );
    expect(seen).toEqual({ fresh: true, kept: true });
  });

  it('acquire with Redis frozen: the handle signal is aborted by the local lease end, no reply needed', async () => {
    const handle = await locks.acquire(`job:${uid()}`, { ttl: TTL });
    let aborted: boolean;
    let reason: unknown;
    stall.kill('SIGSTOP');
    try {
      blockEventLoop(2 * TTL);
      await sleep(100); // a few loop turns; no round trip can complete
      aborted = handle.signal.aborted;
      reason = handle.signal.reason;
    } finally {
      stall.kill('SIGCONT');
    }
    await handle.release();
    expect(aborted).toBe(true);
    expect(reason).toBeInstanceOf(LockLostError);
  });
});

// ------------------------------------------------------------------------------ argument validation

describe('defect 5: bad keys passed to acquire / using are LockKeyError', () => {
  const keyPrefix = uniquePrefix('d5');
  let locks: LockService;

  beforeAll(async () => {
    locks = await lockService({ clients: [server.url], keyPrefix });
  });

  const fn = () => 'ran';
  it.each<[string, (l: LockService) => Promise<unknown>]>([
    ['acquire(42)', (l) => l.acquire(42 as any)],
    ['acquire(null)', (l) => l.acquire(null as any)],
    ['using(null, fn)', (l) => l.using(null as any, fn)],
    ['using(42, fn)', (l) => l.using(42 as any, fn)],
    ['acquire([]) (nothing to lock)', (l) => l.acquire([])],
    ['using([], fn) (nothing to lock)', (l) => l.using([], fn)],
  ])('%s rejects with LockKeyError', async (_label, call) => {
    const r = await settle(() => call(locks));
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toMatch(/^LockKeyError/);
    expect(r.error).toBeInstanceOf(LockKeyError);
  });
});

describe('defect 10: bad per-call options are LockConfigError', () => {
  const keyPrefix = uniquePrefix('d10');
  let locks: LockService;

  beforeAll(async () => {
    locks = await lockService({ clients: [server.url], keyPrefix });
  });

  it.each<[string, string, LockedOptions]>([
    ['waitTimout', 'waitTimeout', { waitTimout: 10 } as LockedOptions],
    ['tll', 'ttl', { tll: 500 } as LockedOptions],
    ['watchDog', 'watchdog', { watchDog: false } as LockedOptions],
  ])(
    'unknown key %s: LockConfigError naming it and suggesting %s',
    async (unknown, suggestion, options) => {
      for (const call of [
        (): Promise<unknown> => locks.acquire(`job:${uid()}`, options),
        () => locks.using(`job:${uid()}`, () => 'ran', options),
      ]) {
        const r = await settle(call);
        await releaseIfHeld(r);
        expect(describeOutcome(r)).toMatch(/^LockConfigError/);
        expect((r.error as Error).message).toContain(unknown);
        expect((r.error as Error).message).toContain(suggestion);
      }
    },
  );

  it('using(key, fn, null) and acquire(key, null): LockConfigError', async () => {
    for (const call of [
      (): Promise<unknown> => locks.using(`job:${uid()}`, () => 'ran', null as any),
      () => locks.acquire(`job:${uid()}`, null as any),
    ]) {
      const r = await settle(call);
      await releaseIfHeld(r);
      expect(describeOutcome(r)).toMatch(/^LockConfigError/);
    }
  });

  /** LockConfigError, or a real wait until the foreign 1 s lease ran out. */
  async function refusedOrWaits(locks: LockService, options: LockedOptions): Promise<void> {
    const key = `job:${uid()}`;
    await redis.set(lockRedisKey(keyPrefix, key), 'foreign', 'PX', 1_000);
    const r = await settle(() => locks.acquire(key, options));
    await releaseIfHeld(r);
    if (r.ok) {
      expect(r.ms).toBeGreaterThanOrEqual(800);
      return;
    }
    expect(describeOutcome(r)).toMatch(/^LockConfigError/);
  }

  it('per call waitTimeout 2 ** 31: LockConfigError, or it really waits', async () => {
    await refusedOrWaits(locks, { waitTimeout: 2 ** 31 });
  });

  it('module option waitTimeout 2 ** 31: LockConfigError at startup, or calls really wait', async () => {
    let withBigWait: LockService;
    try {
      withBigWait = await lockService({ clients: [server.url], keyPrefix, waitTimeout: 2 ** 31 });
    } catch (error) {
      expect(error).toBeInstanceOf(LockConfigError);
      return;
    }
    await refusedOrWaits(withBigWait, {});
  });
});

// ------------------------------------------------------------------------------ grants

describe('defect 14: a grant read after its claim window ran out is not a hold', () => {
  const keyPrefix = uniquePrefix('d14');

  it('the grantee stalled past the claim while another client took the key: it does not run as holder', async () => {
    const holder = await lockService({ clients: [server.url], keyPrefix });
    const grantee = await lockService({ clients: [server.url], keyPrefix });
    const key = `grant:${uid()}`;
    const rk = lockRedisKey(keyPrefix, key);
    const held = await holder.acquire(key, { ttl: 5_000 });
    // The grantee queues in Redis behind the holder (another process, as far as Redis knows).
    const waiting = grantee.acquire(key, { ttl: 5_000, waitTimeout: 6_000 }).then(async (h) => {
      const owner = await redis.get(rk);
      await h.release();
      return owner;
    });
    await until(async () => (await redis.zcard(`${rk}:q`)) === 1, 'the grantee queued in Redis');
    // Another client (a separate OS process) takes the key once the grant's claim ran out.
    const intruder = setNxFromAnotherProcess(server.port, rk, 'intruder', {
      delayMs: 1_400,
      pxMs: 1_500,
    });
    // The release grants the key to the grantee; its grant message waits in the socket while
    // this process is stalled past the claim window (1 s).
    await held.release();
    blockEventLoop(2_200);
    const ownerWhenGranteeRan = await waiting;
    const intruderSaid = await intruder;
    // The intruder really took the free key (otherwise this test proves nothing)...
    expect(intruderSaid.trim()).toBe('OK');
    // ...so the grantee must not have run while the intruder held it.
    expect(ownerWhenGranteeRan).not.toBe('intruder');
  });
});
