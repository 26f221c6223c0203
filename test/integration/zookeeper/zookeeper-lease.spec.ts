import {
  LockBackendError,
  type LockHandle,
  LockLostError,
  LockNotAcquiredError,
  LockService,
} from 'nest-locked';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { createLockApp, uniquePrefix, until, within } from '../../support/lock-app';
import { fourLetterWord } from '../../support/zookeeper-server';
import { zookeeperSuite } from '../../support/zookeeper-suite';

/**
 * How long a hold lives on ZooKeeper: as long as its lease (its `ttl`, renewed or not) while the
 * session lives, whatever the session timeout. The session's confirmations keep it valid; only a
 * session unconfirmed or lost ends it early, and then it hands its key to nobody (the frozen and
 * killed holders are in zookeeper-faults.spec.ts).
 */

jest.setTimeout(30_000);

/** Short, so a hold "longer than the session" takes seconds (the harness's tick is 100 ms). */
const SESSION_MS = 1_000;

const suite = zookeeperSuite();

/** An app of its own (its own session) locking under `root`, through `connectString`. */
async function app(root: string, connectString = suite.zk.connectString): Promise<LockService> {
  const backend = zookeeperBackend({
    connectString,
    root,
    sessionTimeout: SESSION_MS,
    parentCleanupDelay: 50,
  });
  const nest = await createLockApp({
    options: { backend, keyPrefix: '', ttl: 3 * SESSION_MS, waitTimeout: 5_000 },
  });
  suite.apps.push(nest);
  return nest.get(LockService);
}

const rootOf = (name: string) => `/${uniquePrefix(name).replace(/:/g, '-').replace(/-$/, '')}`;

/** Waits `ms` of the hold's life, or less if its signal aborts (the hold ended early). */
async function holdFor(handle: LockHandle, ms: number): Promise<void> {
  const from = performance.now();
  await until(() => handle.signal.aborted || performance.now() - from > ms, 'the hold', ms + 5_000);
}

/** Whether a waiter watches a node in the line of `k` under `root`. */
async function watched(root: string): Promise<boolean> {
  return (await fourLetterWord(suite.zk.members[0].port, 'wchp', 1_000)).includes(`${root}/k/`);
}

/** The other process cannot take the key now. */
async function refused(other: LockService, key: string): Promise<void> {
  await expect(other.acquire(key, { waitTimeout: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError);
}

describe('zookeeper: a hold lives as long as its lease, not one session timeout', () => {
  it('a hold renewed by its watchdog stays held past several session timeouts', async () => {
    const root = rootOf('renewed');
    const [a, b] = [await app(root), await app(root)];
    const held = await a.acquire('k');
    await holdFor(held, 3.5 * SESSION_MS);
    expect(held.signal.reason).toBeUndefined();
    expect(held.signal.aborted).toBe(false);
    await refused(b, 'k');
    await held.release();
    await (await b.acquire('k', { waitTimeout: 2_000 })).release();
  });

  it('with watchdog: false a hold lasts to its ttl, not to the session timeout', async () => {
    const root = rootOf('no-watchdog');
    const [a, b] = [await app(root), await app(root)];
    const ttl = 4 * SESSION_MS;
    const held = await a.acquire('k', { ttl, watchdog: false });
    await holdFor(held, 2 * SESSION_MS);
    expect(held.signal.reason).toBeUndefined();
    await refused(b, 'k');
    // Its ttl does end it: the signal aborts (expired) and the key is free for the others.
    await until(() => held.signal.aborted, 'the hold ends at its ttl', ttl + 5_000);
    expect(held.signal.reason).toBeInstanceOf(LockLostError);
    expect((held.signal.reason as LockLostError).reason).toBe('expired');
    await (await within(b.acquire('k', { waitTimeout: 5_000 }), 6_000, 'b after')).release();
  });

  it('a ttl of 100 session timeouts and more does not expire at once', async () => {
    const root = rootOf('long-ttl');
    const [a, b] = [await app(root), await app(root)];
    const held = await a.acquire('k', { ttl: 200 * SESSION_MS });
    // A round trip through the other session: an expired hold would have aborted by then.
    expect(await b.isLocked('k')).toBe(true);
    expect(held.signal.reason).toBeUndefined();
    await holdFor(held, 2 * SESSION_MS);
    expect(held.signal.reason).toBeUndefined();
    await refused(b, 'k');
    await held.release();
  });

  it('a hold that runs out with its session unconfirmed hands its key to no waiter of its process; the waiter, its session expired, queues again and gets the key after the next holder', async () => {
    const root = rootOf('stale-handoff');
    const proxy = await suite.proxy();
    const [a, c] = [await app(root, proxy.address), await app(root)];
    const held = await a.acquire('k', { ttl: 30 * SESSION_MS });
    let taken = false;
    const waiter = a.acquire('k', { waitTimeout: 30 * SESSION_MS }).then(
      (handle) => ((taken = true), handle),
      (error: unknown) => error,
    );
    // The waiter watches the hold's node: it would go in at once when that hold ends here.
    await until(() => watched(root), 'the waiter watches the hold');
    // Cut off from ZooKeeper: no confirmation of the session any more, so the hold runs out...
    proxy.cut();
    await until(() => held.signal.aborted, 'the hold runs out', 10 * SESSION_MS);
    // ...and the session expires on the server: another process takes the key.
    const other = await c.acquire('k', { waitTimeout: 10 * SESSION_MS });
    expect(taken).toBe(false);
    // Back: the session is found expired, its place in line went with it; the waiter, with time
    // left, enters the line again under the new session (at its end: behind `other`).
    proxy.restore();
    await until(() => watched(root), 'the waiter in line again', 10 * SESSION_MS);
    expect(taken).toBe(false);
    await other.release();
    const lock = await within(waiter, 10 * SESSION_MS, 'the waiter');
    expect(lock).not.toBeInstanceOf(Error);
    expect((lock as LockHandle).fence).toBeGreaterThan(other.fence);
    await (lock as LockHandle).release();
  });

  it('a waiter whose deadline passes while ZooKeeper does not answer fails with LockBackendError', async () => {
    const root = rootOf('outage-deadline');
    const proxy = await suite.proxy();
    const [a, c] = [await app(root, proxy.address), await app(root)];
    const held = await c.acquire('k');
    const waiter = a.acquire('k', { waitTimeout: 3 * SESSION_MS }).catch((error: unknown) => error);
    await until(() => watched(root), 'the waiter watches the hold');
    // Cut off until the deadline has passed: the server never answers the waiter again.
    proxy.cut();
    const error = await within(waiter, 20 * SESSION_MS, 'the waiter');
    expect(error).toBeInstanceOf(LockBackendError);
    expect((error as LockBackendError).cause).toBeInstanceOf(Error);
    proxy.restore();
    await held.release();
  });
});
