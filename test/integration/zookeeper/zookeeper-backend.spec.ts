import { type INestApplication, Logger } from '@nestjs/common';
import { createClient, type Client } from 'node-zookeeper-client';
import {
  LockConfigError,
  type LockContextInfo,
  LockNotAcquiredError,
  LockService,
} from 'nest-locked';
import { TerminusModule } from '@nestjs/terminus';
import {
  RedlockHealthIndicator,
  type RedlockHealthDetails,
  RedlockHealthModule,
} from 'nest-locked/health';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { LockGroupRegistry } from '../../../lib/module/lock-group.registry';
import { TokenMint } from '../../../lib/core/token-mint';
import { createLockApp, uniquePrefix, within } from '../../support/lock-app';
import { closedPort } from '../../support/redis-server';
import {
  fourLetterWord,
  startZooKeeper,
  type ZooKeeperEnsemble,
} from '../../support/zookeeper-server';

/**
 * What the ZooKeeper backend does beyond the contract every backend keeps (that one is
 * test/integration/contract/backend-contract.spec.ts), on one real ZooKeeper member (started
 * once for the file): FIFO, fences from zxids, its nodes and their watches, nothing left
 * behind, parents cleaned, health, its options.
 */

jest.setTimeout(20_000);

let zk: ZooKeeperEnsemble;
let raw: Client;
const apps: INestApplication[] = [];

beforeAll(async () => {
  zk = await startZooKeeper();
  raw = createClient(zk.connectString, { sessionTimeout: 4_000 });
  const connected = new Promise<void>((resolve) => raw.once('connected', () => resolve()));
  raw.connect();
  await connected;
}, 60_000);

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  raw?.close();
  await zk?.stop();
});

/** A fresh app (its own session, and the health indicator) locking under its own root. */
async function app(root: string, extra: Parameters<typeof zookeeperBackend>[0] | object = {}) {
  const backend = zookeeperBackend({
    connectString: zk.connectString,
    root,
    sessionTimeout: 2_000,
    parentCleanupDelay: 50,
    ...extra,
  });
  const nest = await createLockApp({
    options: { backend, keyPrefix: '', waitTimeout: 5_000, ttl: 3_000 },
    imports: [TerminusModule, RedlockHealthModule],
  });
  apps.push(nest);
  return nest.get(LockService);
}

const rootOf = (name: string) => `/${uniquePrefix(name).replace(/:/g, '-').replace(/-$/, '')}`;

function children(path: string): Promise<string[]> {
  return new Promise((resolve, reject) =>
    raw.getChildren(path, (e, c) =>
      e && (e as { getCode?: () => number }).getCode?.() === -101
        ? resolve([])
        : e
          ? reject(e)
          : resolve(c),
    ),
  );
}

/** Polls `check` until it holds or 5 s pass (the parent cleanup runs on a timer). */
async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = performance.now() + 5_000;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what}: not within 5 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('zookeeper backend', () => {
  it('excludes, hands over in FIFO order with growing fences, and leaves nothing', async () => {
    const root = rootOf('fifo');
    const [a, b] = [await app(root), await app(root)];
    const order: number[] = [];
    const fences: number[] = [];
    let inside = 0;
    let overlap = false;
    const first = await a.acquire('k');
    const waiters: Promise<void>[] = [];
    for (let i = 0; i < 6; i++) {
      waiters.push(
        (i % 2 ? a : b).using('k', async (lock: LockContextInfo) => {
          inside++;
          if (inside > 1) overlap = true;
          order.push(i);
          fences.push(lock.fence);
          await new Promise((r) => setTimeout(r, 5));
          inside--;
        }),
      );
      // In line before the next one asks: FIFO is by arrival.
      await eventually(async () => (await children(`${root}/k`)).length === i + 2, 'in line');
    }
    await first.release();
    await within(Promise.all(waiters), 10_000, 'the line');
    expect(overlap).toBe(false);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    expect([first.fence, ...fences]).toEqual([...[first.fence, ...fences]].sort((x, y) => x - y));
    expect(new Set([first.fence, ...fences]).size).toBe(7);
    await eventually(async () => (await children(root)).length === 0, 'parent cleaned');
  });

  it('a busy try or acquire answers the lease left of a holder of its process, the ttl asked otherwise', async () => {
    const root = rootOf('busy');
    const [a, b] = [await app(root), await app(root)];
    const [mine, theirs] = apps.slice(-2).map((n) => n.get(LockGroupRegistry).get('default'));
    const backendOf = (s: LockService) => (s === a ? mine : theirs);
    const held = await a.acquire('k', { ttl: 30_000, watchdog: false });
    // Held here: this process knows the lease (about 30 s left).
    const here = (await backendOf(a).tryAcquire(['k'], 1_000)) as number;
    expect(here).toBeGreaterThan(1_000);
    expect(here).toBeLessThanOrEqual(30_000);
    expect(await backendOf(a).tryAcquireAny(['k'], 1_000)).toBeGreaterThan(1_000);
    // Held by another process: nothing in ZooKeeper tells its lease (documented: the ttl asked).
    expect(await backendOf(b).tryAcquire(['k'], 7_000)).toBe(7_000);
    // A busy acquire, at once or at its deadline, says the same in its LockNotAcquiredError
    // (which LockService then bounds by the usual hold of the key, if it knows one).
    for (const waitTimeout of [0, 200]) {
      const error = (await backendOf(a)
        .acquire(['k'], { ttl: 1_000, waitTimeout })
        .catch((e: unknown) => e)) as LockNotAcquiredError;
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(error.retryAfterMs).toBeGreaterThan(1_000);
    }
    await held.release();
    // A segmented sweep is no single call here: tryAcquireAny is a loop of tries.
    expect(backendOf(a).canTakeAny).toBe(false);
  });

  it('gives fences that still grow after the key parent is deleted and created again', async () => {
    const root = rootOf('fence');
    const s = await app(root);
    const one = await s.acquire('k');
    await one.release();
    await eventually(async () => (await children(root)).length === 0, 'parent cleaned');
    const two = await s.acquire('k');
    await two.release();
    expect(two.fence).toBeGreaterThan(one.fence);
  });

  it('times out with LockNotAcquiredError, and the waiter node is gone', async () => {
    const root = rootOf('timeout');
    const [a, b] = [await app(root), await app(root)];
    const held = await a.acquire('k');
    await expect(b.acquire('k', { waitTimeout: 200 })).rejects.toBeInstanceOf(LockNotAcquiredError);
    await eventually(
      async () => (await children(`${root}/k`)).length === 1,
      'timed out waiter gone',
    );
    const aborted = new AbortController();
    const waiting = b.acquire('k', { waitTimeout: 60_000, signal: aborted.signal });
    await eventually(async () => (await children(`${root}/k`)).length === 2, 'in line');
    // Aborted while its node is in line, whatever step of its wait it is at: it ends now.
    aborted.abort(new Error('gave up'));
    const reason = await within(
      waiting.then(
        () => undefined,
        (e: unknown) => e,
      ),
      5_000,
      'the aborted wait',
    );
    expect(reason).toEqual(new Error('gave up'));
    await eventually(async () => (await children(`${root}/k`)).length === 1, 'waiter gone');
    await held.release();
    await eventually(async () => (await children(root)).length === 0, 'parent cleaned');
  });

  it('a writer right behind a read hold of its own process still waits for the reads ahead', async () => {
    const root = rootOf('rw-handoff');
    const [a, b] = [await app(root), await app(root)];
    const first = await a.acquire('k', { mode: 'read' });
    const own = await b.acquire('k', { mode: 'read' });
    let wrote = false;
    const writer = b.acquire('k', { mode: 'write' }).then((w) => ((wrote = true), w));
    await eventually(async () => (await children(`${root}/k`)).length === 3, 'writer in line');
    // The writer watches the node just ahead of it (b's own read) before that read ends.
    const line = (await children(`${root}/k`)).sort((x, y) =>
      x.slice(-10).localeCompare(y.slice(-10)),
    );
    const ownNode = line[1];
    await eventually(
      async () => (await fourLetterWord(zk.members[0].port, 'wchp', 1_000)).includes(ownNode),
      'the writer watches the read ahead of it',
    );
    // That read ends, in the writer's own process: a's read still holds the key.
    await own.release();
    await eventually(async () => (await children(`${root}/k`)).length === 2, 'own read gone');
    expect(await b.isLocked('k')).toBe(true);
    expect(wrote).toBe(false);
    await first.release();
    const w = await within(writer, 5_000, 'writer');
    expect(w.fence).toBeGreaterThan(own.fence);
    await w.release();
  });

  it("never takes another session's node for one of its own, even under the same token", async () => {
    const root = rootOf('same-token');
    const a = await app(root);
    const first = apps[apps.length - 1].get(LockGroupRegistry).get('default');
    const b = await app(root);
    const second = apps[apps.length - 1].get(LockGroupRegistry).get('default');
    // Two processes whose random instance ids collide: the same tokens, call for call.
    const { prefix } = (first as unknown as { tokens: { prefix: string } }).tokens;
    Object.assign(second, { tokens: new TokenMint(prefix) });
    Object.assign(first, { tokens: new TokenMint(prefix) });
    const held = await a.acquire('k');
    await expect(b.acquire('k', { waitTimeout: 300 })).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(held.signal.aborted).toBe(false);
    // The waiter's node is deleted on its own session as it gives up; this read comes on another
    // session, which ZooKeeper does not order after that delete.
    await eventually(async () => (await children(`${root}/k`)).length === 1, 'waiter node gone');
    expect(await children(`${root}/k`)).toEqual([expect.stringMatching(/0000000000$/)]);
    await held.release();
  });

  it('answers isLocked and health', async () => {
    const root = rootOf('health');
    const s = await app(root);
    const h = await s.acquire('k');
    expect(await s.isLocked('k')).toBe(true);
    await h.release();
    expect(await s.isLocked('k')).toBe(false);
    const health = await apps[apps.length - 1].get(RedlockHealthIndicator).isHealthy();
    const details = Object.values(health)[0] as unknown as RedlockHealthDetails;
    expect(details.status).toBe('up');
    const group = details.groups.default;
    expect(group).toMatchObject({ backend: 'zookeeper', quorum: 1, reachable: 1 });
    expect(group.nodes[0]).toMatchObject({
      node: zk.connectString,
      status: 'up',
      role: 'standalone',
    });
  });

  it('deletes at start the empty parents a dead process left', async () => {
    const root = rootOf('sweep');
    const left = `${root}/left-by-a-dead-process`;
    await new Promise<void>((resolve, reject) =>
      raw.mkdirp(left, (e) => (e ? reject(e) : resolve())),
    );
    await app(root);
    await eventually(async () => (await children(root)).length === 0, 'swept');
  });

  it('refuses bad options with LockConfigError', () => {
    expect(() => zookeeperBackend({ connectString: 'nowhere' })).toThrow(LockConfigError);
    expect(() => zookeeperBackend({ connectString: zk.connectString, root: 'x/' })).toThrow(
      LockConfigError,
    );
    expect(() => zookeeperBackend({ connectString: zk.connectString, sessionTimeout: 0 })).toThrow(
      LockConfigError,
    );
  });

  it('waits connectTimeout at startup for an unreachable ensemble, and the warning names it', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const address = `127.0.0.1:${await closedPort()}`;
      // connectTimeout above the module's own startup bound (2 x commandTimeout, at least 1 s).
      const backend = zookeeperBackend({ connectString: address, connectTimeout: 2_500 });
      apps.push(await createLockApp({ options: { backend, commandTimeout: 500 } }));
      const found = warn.mock.calls
        .map((c: unknown[]) => String(c[0]))
        .filter((w) => w.includes('not reachable at startup'));
      expect(found).toHaveLength(1);
      expect(found[0]).toContain(address);
      // What the backend says it waited: its connectTimeout, not the module's 1 s.
      expect(Number(/after (\d+) ms/.exec(found[0])?.[1])).toBeGreaterThan(1_000);
    } finally {
      warn.mockRestore();
    }
  });
});
