import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { LockBackendError, type LockHandle, LockService } from 'nest-locked';
import {
  RedlockHealthIndicator,
  type RedlockHealthDetails,
  RedlockHealthModule,
} from 'nest-locked/health';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { TerminusModule } from '@nestjs/terminus';
import { type Client, createClient } from 'node-zookeeper-client';
import type { BackendWorkerConfig, BackendWorkerLine } from '../fixtures/backend-worker';
import type { FaultLine, FaultWorkerConfig } from '../fixtures/fault-worker';
import { nextLine, processStopped, resumeProcess, uid } from '../support/faults';
import { findOverlaps, now } from '../support/intervals';
import { createLockApp, until, within } from '../support/lock-app';
import { killWorkers, spawnWorker, type Worker } from '../support/workers';
import { startZooKeeperProxy } from '../support/zookeeper-proxy';
import {
  fourLetterWord,
  startZooKeeper,
  type ZooKeeperEnsemble,
} from '../support/zookeeper-server';

/**
 * ZooKeeper broken on purpose: holders killed and frozen past their session, a 3-member
 * ensemble losing its leader, a member frozen, a minority and a majority down. Every measured
 * figure is printed (`[zookeeper faults]`) for the docs; the assertions hold on a loaded machine.
 */

jest.setTimeout(90_000);

/** The workers' session: the lease of a process that stops answering. */
const SESSION_MS = 3_000;
/** ZooKeeper's OpCode of a multi (the create of a node in line, with the touch of its parent). */
const MULTI = 14;
const log = (what: string, value: unknown) =>
  process.stderr.write(`[zookeeper faults] ${what}: ${JSON.stringify(value)}\n`);

const apps: INestApplication[] = [];
const frozen = new Set<number>();

/** Closes the apps of a block before its ensemble stops (their sessions end cleanly). */
const closeApps = () => Promise.all(apps.splice(0).map((a) => a.close()));

afterAll(async () => {
  for (const pid of frozen) resumeProcess(pid);
  await killWorkers();
  await closeApps();
});

async function service(zk: ZooKeeperEnsemble, extra: object = {}): Promise<LockService> {
  const backend = zookeeperBackend({
    connectString: zk.connectString,
    sessionTimeout: 4_000,
    ...extra,
  });
  const app = await createLockApp({
    options: { backend, keyPrefix: 'f:', ttl: 10_000, waitTimeout: 20_000, commandTimeout: 1_000 },
    imports: [TerminusModule, RedlockHealthModule],
  });
  apps.push(app);
  return app.get(LockService);
}

/**
 * A worker that holds `key` (ttl 10 s and commandTimeout 2 s unless said), with `waiters` more
 * calls behind it, connected to `connectString` (the ensemble's unless said).
 */
function holder(
  zk: ZooKeeperEnsemble,
  key: string,
  { ttl = 10_000, waiters = 0, connectString = zk.connectString, commandTimeout = 2_000 } = {},
): Worker<FaultLine> {
  const config: FaultWorkerConfig = {
    scenario: 'hold',
    key,
    holdMs: 60_000,
    timeoutMs: 80_000,
    waiters,
    options: { keyPrefix: 'f:', ttl, waitTimeout: 60_000, commandTimeout },
    backend: {
      kind: 'zookeeper',
      options: { connectString, sessionTimeout: SESSION_MS },
    },
  };
  return spawnWorker<FaultWorkerConfig, FaultLine>(config, 'fault-worker');
}

/** The parent node of `key`'s line (the workers' and `service`'s root and prefix). */
const parentOf = (key: string) => `/nest-locked/${encodeURIComponent(`f:${key}`)}`;

/** Runs one call on a client of its own, connected for that call only. */
function rawCall<T>(
  zk: ZooKeeperEnsemble,
  call: (client: Client, done: (error: unknown, value?: T) => void) => void,
): Promise<T> {
  const client = createClient(zk.connectString, { sessionTimeout: 4_000, retries: 0 });
  return new Promise<T>((resolve, reject) => {
    client.once('connected', () =>
      call(client, (error, value) => {
        client.close();
        if (error) reject(error as Error);
        else resolve(value as T);
      }),
    );
    client.connect();
  });
}

/** The nodes in the line of `key` (none before its parent exists). */
const lineOf = (zk: ZooKeeperEnsemble, key: string): Promise<string[]> =>
  rawCall<string[]>(zk, (c, done) =>
    c.getChildren(parentOf(key), (e, nodes) =>
      // NO_NODE: no line yet.
      (e as { getCode?: () => number } | null)?.getCode?.() === -101
        ? done(null, [])
        : done(e, nodes),
    ),
  );

/**
 * The worker's call `call`, frozen past its session while its node was in line, settles without
 * entering its section while `lock` (taken by another process meanwhile) holds the key: it
 * fails with LockBackendError, or waits in line again (on a new session) and gets the key after
 * `lock` is released, with a larger fence. Releases `lock`.
 */
async function expectNoGrantWhileHeld(
  zk: ZooKeeperEnsemble,
  worker: Worker<FaultLine>,
  key: string,
  call: number,
  lock: LockHandle,
): Promise<void> {
  type Outcome = Extract<FaultLine, { type: 'acquired' | 'error' }>;
  const outcome = () =>
    worker.lines.find(
      (l): l is Outcome => (l.type === 'acquired' || l.type === 'error') && l.call === call,
    );
  await until(
    async () => outcome() !== undefined || (await lineOf(zk, key)).length === 2,
    `the frozen worker's call ${call} settled`,
    10_000,
  );
  const releasedAt = now();
  await lock.release();
  await until(() => outcome() !== undefined, `the frozen worker's call ${call} done`, 20_000);
  const settled = outcome()!;
  log(`frozen worker's call ${call} after resume`, settled);
  if (settled.type === 'acquired') {
    expect(settled.at).toBeGreaterThan(releasedAt);
    expect(settled.fence).toBeGreaterThan(lock.fence);
  } else {
    expect(settled.name).toBe('LockBackendError');
  }
}

describe('zookeeper: a holder process killed or frozen (one member)', () => {
  let zk: ZooKeeperEnsemble;
  beforeAll(async () => {
    zk = await startZooKeeper();
  });
  afterAll(async () => {
    await closeApps();
    await zk?.stop();
  });

  it('a SIGKILLed holder frees the lock when its session ends, and the next fence is larger', async () => {
    const key = `kill-${uid()}`;
    const worker = holder(zk, key);
    await worker.ready;
    worker.go();
    const held = await nextLine(worker, 'acquired', 20_000);
    const locks = await service(zk);
    let grantedAt: number | undefined;
    const next = locks.acquire(key).then((lock) => ((grantedAt = now()), lock));
    // Let the waiter get in line first (its node behind the holder's).
    await new Promise((r) => setTimeout(r, 200));
    const killedAt = now();
    // Nobody got the key while the holder lived (its session kept it).
    expect(grantedAt).toBeUndefined();
    worker.kill();
    const lock = await within(next, 20_000, 'the lock after the holder was killed');
    log('SIGKILLed holder: freed after (ms)', Math.round(grantedAt! - killedAt));
    expect(lock.fence).toBeGreaterThan(held.fence);
    await lock.release();
  });

  it('a holder frozen past its session: the next holder has a larger fence, the old one is told on resume', async () => {
    const key = `stop-${uid()}`;
    const worker = holder(zk, key);
    await worker.ready;
    worker.go();
    const held = await nextLine(worker, 'acquired', 20_000);
    const locks = await service(zk);
    const next = locks.acquire(key);
    await new Promise((r) => setTimeout(r, 200));
    const stoppedAt = now();
    process.kill(worker.pid, 'SIGSTOP');
    frozen.add(worker.pid);
    try {
      const lock = await within(next, 20_000, 'the lock while its holder is frozen');
      log('SIGSTOPped holder: taken over after (ms)', Math.round(now() - stoppedAt));
      expect(lock.fence).toBeGreaterThan(held.fence);
      resumeProcess(worker.pid);
      frozen.delete(worker.pid);
      const resumedAt = now();
      const aborted = await nextLine(worker, 'aborted', 10_000);
      log(
        'frozen holder: its signal aborted after resume (ms)',
        Math.round(aborted.at - resumedAt),
      );
      expect(aborted.name).toBe('LockLostError');
      await lock.release();
    } finally {
      resumeProcess(worker.pid);
      frozen.delete(worker.pid);
    }
  });

  it('a holder frozen past its session does not hand the key to its own waiter on resume (both nodes died with the session)', async () => {
    // The worker talks to ZooKeeper through a proxy that, once the worker is stopped, drops the
    // server's watch events: the holder's node deleted as the session expires would otherwise
    // tell the waiter (when the member sends it before closing the connection) ahead of the
    // hold's own timers. The hold's ttl is below the freeze: its timer and watchdog are due the
    // moment it resumes.
    const proxy = await startZooKeeperProxy(zk.members[0].address);
    const key = `handover-${uid()}`;
    const worker = holder(zk, key, { ttl: 1_000, waiters: 1, connectString: proxy.address });
    try {
      await worker.ready;
      worker.go();
      await nextLine(worker, 'acquired', 20_000, (l) => l.call === 0);
      await until(async () => (await lineOf(zk, key)).length === 2, 'the waiter in line', 10_000);
      const [held] = (await lineOf(zk, key)).sort((a, b) =>
        a.slice(-10).localeCompare(b.slice(-10)),
      );
      const member = zk.members[0];
      await until(
        async () => (await fourLetterWord(member.port, 'wchp', 1_000)).includes(`/${held}`),
        'the waiter watching the holder',
        10_000,
      );
      process.kill(worker.pid, 'SIGSTOP');
      frozen.add(worker.pid);
      await until(() => processStopped(worker.pid), 'the worker stopped');
      proxy.dropWatchEvents();
      const locks = await service(zk);
      // Granted once the frozen process's session expired: both of its nodes are gone.
      const lock = await within(locks.acquire(key), 20_000, 'the lock while its holder is frozen');
      resumeProcess(worker.pid);
      frozen.delete(worker.pid);
      await nextLine(worker, 'aborted', 10_000, (l) => l.call === 0);
      await expectNoGrantWhileHeld(zk, worker, key, 1, lock);
    } finally {
      resumeProcess(worker.pid);
      frozen.delete(worker.pid);
      await proxy.close();
    }
  });

  it('a grant whose answer reaches a process frozen past its session does not start a hold there (its node died with the session)', async () => {
    // The proxy keeps the answer to the worker's create (a multi: node and fence) until the
    // worker is stopped: an answer that says the key is the worker's, read only once the
    // session that made the node has expired and another process holds the key. The call's
    // own bound (commandTimeout) is longer than the freeze, so the answer is read, not given up.
    const proxy = await startZooKeeperProxy(zk.members[0].address);
    const key = `late-${uid()}`;
    const worker = holder(zk, key, {
      ttl: 1_000,
      connectString: proxy.address,
      commandTimeout: 30_000,
    });
    try {
      await worker.ready;
      // The key's parent exists: the first create is the one that enters the line.
      await rawCall(zk, (c, done) => c.mkdirp(parentOf(key), (e) => done(e)));
      const held = proxy.holdReplyTo(MULTI);
      worker.go();
      const deliver = await within(held, 10_000, "the create's answer held");
      process.kill(worker.pid, 'SIGSTOP');
      frozen.add(worker.pid);
      await until(() => processStopped(worker.pid), 'the worker stopped');
      deliver();
      const locks = await service(zk);
      // Granted once the frozen process's session expired: its node is gone.
      const lock = await within(locks.acquire(key), 20_000, 'the lock while the worker is frozen');
      resumeProcess(worker.pid);
      frozen.delete(worker.pid);
      await expectNoGrantWhileHeld(zk, worker, key, 0, lock);
    } finally {
      resumeProcess(worker.pid);
      frozen.delete(worker.pid);
      await proxy.close();
    }
  });

  it('the member frozen past the session timeout: a waiter with waitTimeout left queues again under a new session and gets the key', async () => {
    const key = `frozen-member-${uid()}`;
    const [a, b] = [await service(zk), await service(zk)];
    const held = await a.acquire(key);
    const waiter = b.acquire(key, { waitTimeout: 60_000 }).catch((error: unknown) => error);
    await until(async () => (await lineOf(zk, key)).length === 2, 'the waiter in line', 10_000);
    const member = zk.members[0];
    const pid = member.pid!;
    member.kill('SIGSTOP');
    frozen.add(pid);
    try {
      // Frozen past the session timeout (4 s): the sessions of both apps expire on resume.
      await new Promise((r) => setTimeout(r, 6_000));
    } finally {
      resumeProcess(pid);
      frozen.delete(pid);
    }
    const resumedAt = now();
    // The holder is never carried over: its signal aborts.
    await until(() => held.signal.aborted, 'the holder told', 20_000);
    const lock = await within(waiter, 30_000, 'the waiter after the freeze');
    log('member frozen past the session: the waiter got the key after resume (ms)', [
      lock instanceof Error ? lock.name : Math.round(now() - resumedAt),
    ]);
    expect(lock).not.toBeInstanceOf(Error);
    expect((lock as LockHandle).fence).toBeGreaterThan(held.fence);
    await (lock as LockHandle).release();
  });
});

describe('zookeeper: a 3-member ensemble under faults', () => {
  let zk: ZooKeeperEnsemble;
  let dataDir: string;
  beforeAll(async () => {
    zk = await startZooKeeper({ members: 3 });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nest-locked-data-'));
  });
  afterAll(async () => {
    for (const m of zk?.members ?? []) if (m.pid) resumeProcess(m.pid);
    await closeApps();
    await zk?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** 3 processes bumping one counter, `calls` each, all at once; `during` breaks something. */
  async function load(calls: number, during: (holds: () => number) => Promise<void>) {
    const name = uid();
    const config: BackendWorkerConfig = {
      backend: {
        kind: 'zookeeper',
        options: { connectString: zk.connectString, sessionTimeout: 4_000 },
      },
      keyPrefix: `load-${name}:`,
      dataDir,
      timeoutMs: 80_000,
      ttl: 10_000,
      waitTimeout: 30_000,
      scenario: 'counter',
      names: [name],
      calls,
      delayMs: 2,
    };
    const workers = Array.from({ length: 3 }, () =>
      spawnWorker<BackendWorkerConfig, BackendWorkerLine>(config, 'backend-worker'),
    );
    await Promise.all(workers.map((w) => w.ready));
    workers.forEach((w) => w.go());
    const holds = () =>
      workers.reduce((n, w) => n + w.lines.filter((l) => l.type === 'hold').length, 0);
    await during(holds);
    const results = await Promise.all(workers.map((w) => w.exited));
    const lines = results.flatMap((r) => r.lines);
    const held = lines.filter(
      (l): l is Extract<BackendWorkerLine, { type: 'hold' }> => l.type === 'hold',
    );
    const errors = lines.filter((l) => l.type === 'error');
    const counter = Number(fs.readFileSync(path.join(dataDir, name), 'utf8'));
    return { held, errors, counter };
  }

  /** Waits until `holds()` reaches `n` (bounded). */
  async function untilHolds(holds: () => number, n: number): Promise<void> {
    const deadline = performance.now() + 30_000;
    while (holds() < n) {
      if (performance.now() > deadline) throw new Error(`fewer than ${n} holds within 30 s`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** The longest time with no section running, around `at`. */
  function longestGap(held: { start: number; end: number }[], at: number): number {
    const sorted = [...held].sort((a, b) => a.start - b.start);
    let gap = 0;
    let lastEnd = -Infinity;
    for (const h of sorted) {
      if (h.start > at - 5_000 && lastEnd > -Infinity) gap = Math.max(gap, h.start - lastEnd);
      lastEnd = Math.max(lastEnd, h.end);
    }
    return gap;
  }

  it('the leader SIGKILLed under load: zero overlaps, an exact counter, unavailability measured', async () => {
    const leader = (await zk.leader())!;
    let killedAt = 0;
    const { held, errors, counter } = await load(20, async (holds) => {
      await untilHolds(holds, 15);
      killedAt = now();
      leader.kill();
    });
    expect(findOverlaps(held)).toEqual([]);
    expect(counter).toBe(held.length);
    log('leader killed: sections / failed calls', [held.length, errors.length]);
    log('leader killed: failures', errors);
    log('leader killed: longest gap without a holder (ms)', Math.round(longestGap(held, killedAt)));
    await leader.restart();
    await zk.waitServing();
  });

  it('a member frozen (SIGSTOP) under load: zero overlaps, an exact counter', async () => {
    const member = zk.members[0];
    try {
      let stoppedAt = 0;
      const { held, errors, counter } = await load(20, async (holds) => {
        await untilHolds(holds, 15);
        stoppedAt = now();
        member.kill('SIGSTOP');
        // Frozen for longer than the sessions' timeout: its clients must move on.
        await new Promise((r) => setTimeout(r, 5_000));
        member.kill('SIGCONT');
      });
      expect(findOverlaps(held)).toEqual([]);
      expect(counter).toBe(held.length);
      log('member frozen: sections / failed calls', [held.length, errors.length]);
      log('member frozen: failures', errors);
      log(
        'member frozen: longest gap without a holder (ms)',
        Math.round(longestGap(held, stoppedAt)),
      );
    } finally {
      member.kill('SIGCONT');
    }
    await zk.waitServing();
  });

  it('the member a caller is connected to SIGKILLed: its next lock goes through another member', async () => {
    await zk.waitServing('all');
    const locks = await service(zk);
    // Connected (start() waited for it): find the member that has this one session.
    const counts = await Promise.all(zk.members.map((m) => m.sessions()));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
    const connected = zk.members[counts.indexOf(1)];
    connected.kill();
    try {
      // Sent before the driver notices: the create's connection breaks under it.
      const lock = await locks.acquire(`moved-${uid()}`);
      await lock.release();
    } finally {
      await connected.restart();
    }
  });

  it('a minority down still locks; a majority down: a waiter rides it out to its deadline, LockBackendError, then recovers', async () => {
    await zk.waitServing('all');
    const locks = await service(zk);
    const health = () => apps[apps.length - 1].get(RedlockHealthIndicator).isHealthy();
    const group = async () =>
      (Object.values(await health())[0] as unknown as RedlockHealthDetails).groups.default;
    const before = await group();
    expect(before).toMatchObject({ status: 'up', quorum: 2, reachable: 3 });
    expect(before.nodes.map((n) => n.role).sort()).toEqual(['follower', 'follower', 'leader']);
    const [a, b] = zk.members;
    a.kill();
    await zk.waitServing();
    const one = await locks.acquire(`minority-${uid()}`);
    await one.release();
    expect(await group()).toMatchObject({ status: 'up', reachable: 2 });
    b.kill();
    const started = performance.now();
    // The waiter keeps trying while its wait lasts (a blip would end in the lock), then fails
    // as an outage, with the cause, not as busy.
    const failed = await locks.acquire(`majority-${uid()}`, { waitTimeout: 3_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    const failedMs = performance.now() - started;
    log('majority down: acquire failed after (ms)', Math.round(failedMs));
    expect(failed).toBeInstanceOf(LockBackendError);
    expect((failed as LockBackendError).cause).toBeInstanceOf(Error);
    expect(failedMs).toBeLessThan(10_000);
    expect(await group()).toMatchObject({ status: 'down' });
    const restartedAt = performance.now();
    await Promise.all([a.restart(), b.restart()]);
    await zk.waitServing();
    const deadline = performance.now() + 30_000;
    for (;;) {
      try {
        const again = await locks.acquire(`recovered-${uid()}`);
        await again.release();
        break;
      } catch (error) {
        if (!(error instanceof LockBackendError) || performance.now() > deadline) throw error;
      }
    }
    log(
      'majority back: locking again after restart (ms)',
      Math.round(performance.now() - restartedAt),
    );
  });
});
