import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import Redis from 'ioredis';
import { LockService } from 'nest-locked';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import type { LockNotifier } from '../../lib/redis/protocol/lock-notifier';
import {
  createLockApp,
  lockRedisKey,
  sleep,
  uniquePrefix,
  until,
  within,
} from '../support/lock-app';
import { type RedisServerHandle, startRedisServers, stopAll } from '../support/redis-server';

/**
 * Release notifications of a quorum group (3 independent masters): every node's PUBLISH reaches
 * the waiters of this process, so a node that is down (or comes back) holds nobody up. Jest fails
 * a test in which a promise rejection goes unhandled, so these also check that a subscriber of a
 * node that is down leaves none.
 */
jest.setTimeout(60_000);

let servers: RedisServerHandle[] = [];
/** Plain connections to each server, for PUBLISH and PUBSUB CHANNELS. */
let direct: Redis[] = [];
const apps: INestApplication[] = [];

beforeAll(async () => {
  servers = await startRedisServers(3);
  direct = servers.map(
    (s) => new Redis(s.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 }),
  );
  for (const d of direct) d.on('error', () => undefined);
});

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  // Every test starts with the three servers up.
  await Promise.all(servers.map((s) => (s.pid === undefined ? s.restart() : undefined)));
  await Promise.all(direct.map((d) => until(() => d.status === 'ready', 'reconnect', 10_000)));
});

afterAll(async () => {
  for (const d of direct) d.disconnect();
  await stopAll(servers);
});

async function quorumApp(keyPrefix = uniquePrefix('notifier')): Promise<INestApplication> {
  const app = await createLockApp({
    options: { clients: servers.map((s) => s.url), keyPrefix, commandTimeout: 2_000 },
  });
  apps.push(app);
  return app;
}

const notifierOf = (app: INestApplication): LockNotifier =>
  (app.get(LockGroupRegistry).get('default') as RedisLockBackend).notifier;

const channelName = () => `t:notifier:${randomBytes(4).toString('hex')}:rel`;

/** Indexes of the nodes where `channel` has a subscriber right now. */
async function nodesSubscribedTo(channel: string): Promise<number[]> {
  const lists = await Promise.all(direct.map((d) => d.pubsub('CHANNELS', channel)));
  return lists.flatMap((list, i) => ((list as string[]).includes(channel) ? [i] : []));
}

/** ms until `promise` settles, or Infinity when it has not within `limit` ms. */
async function settleTime(promise: Promise<unknown>, limit: number): Promise<number> {
  const start = performance.now();
  const settled = await Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    sleep(limit).then(() => false),
  ]);
  return settled ? performance.now() - start : Infinity;
}

/**
 * Publishes `payload` on `channel` through node `i` until the listener reports it (a node that
 * was down is resubscribed after a reconnect backoff), for at most `ms`.
 */
async function heardFrom(
  i: number,
  channel: string,
  heard: string[],
  payload: string,
  ms: number,
): Promise<boolean> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    await direct[i].publish(channel, payload).catch(() => 0);
    await sleep(50);
    if (heard.includes(payload)) return true;
  }
  return false;
}

it('with node 0 down, a listener is ready at once and hears a PUBLISH sent to node 1', async () => {
  await servers[0].stop();
  const notifier = notifierOf(await quorumApp());
  const channel = channelName();
  let heardAt = 0;
  let readyMs: Promise<number> = Promise.resolve(Infinity);
  const heard = new Promise<void>((resolve) => {
    const sub = notifier.listen(channel, (message) => {
      if (message !== 'r') return;
      heardAt = performance.now();
      sub.stop();
      resolve();
    });
    readyMs = settleTime(sub.ready, 2_500);
  });
  expect(await readyMs).toBeLessThan(500);
  expect(await settleTime(notifier.ready(), 2_500)).toBeLessThan(500);

  // `ready` means some live node confirmed; wait for node 1's own confirmation before
  // publishing there (node 2 may have answered first).
  await until(
    async () => ((await direct[1].pubsub('CHANNELS', channel)) as string[]).includes(channel),
    'node 1',
    2_000,
  );
  const sentAt = performance.now();
  expect(await direct[1].publish(channel, 'r')).toBeGreaterThanOrEqual(1);
  expect(await settleTime(heard, 2_000)).toBeLessThan(500);
  expect(heardAt - sentAt).toBeLessThan(500);
});

it("with node 0 down, another app's waiter takes the key right after the release", async () => {
  await servers[0].stop();
  const keyPrefix = uniquePrefix('notifier-e2e');
  const [a, b] = await Promise.all([quorumApp(keyPrefix), quorumApp(keyPrefix)]);
  const holder = a.get(LockService);
  const waiter = b.get(LockService);
  const lock = await holder.acquire('k', { waitTimeout: 1_000 });
  let acquiredAt = 0;
  const waiting = waiter.acquire('k', { waitTimeout: 5_000 }).then((handle) => {
    acquiredAt = performance.now();
    return handle;
  });
  // The waiter has tried (the key flagged on the two nodes up) and listens.
  const flag = `${lockRedisKey(keyPrefix, 'k')}:wait`;
  const flagged = async () =>
    (await Promise.all([1, 2].map((i) => direct[i].exists(flag)))).every(Boolean);
  await until(flagged, 'the key flagged on nodes 1 and 2', 5_000);
  await until(async () => waiter.stats().subscriptions === 1, 'the waiter listening', 5_000);
  const releasedAt = performance.now();
  await lock.release();
  const handle = await within(waiting, 6_000, 'the waiter');
  expect(handle.fence).toBeGreaterThan(lock.fence);
  // Before: ~1,800 ms (the wake-up waited for commandTimeout on the dead node's subscriber).
  expect(acquiredAt - releasedAt).toBeLessThan(800);
  await handle.release();
});

it('subscribes a key channel on every node and unsubscribes it on every node when the last listener leaves', async () => {
  const notifier = notifierOf(await quorumApp());
  const channel = channelName();
  const first = notifier.listen(channel, () => undefined);
  const second = notifier.listen(channel, () => undefined);
  await within(first.ready, 2_000, 'the subscription');
  await until(
    async () => (await nodesSubscribedTo(channel)).length === 3,
    'subscribed',
    2_000,
  ).catch(() => undefined);
  expect(await nodesSubscribedTo(channel)).toEqual([0, 1, 2]);
  expect(notifier.size).toBe(1);

  first.stop();
  // A window, not a barrier: an unsubscribe sent wrongly now would show by then.
  await sleep(100);
  expect(await nodesSubscribedTo(channel)).toEqual([0, 1, 2]);
  second.stop();
  expect(notifier.size).toBe(0);
  await until(async () => (await nodesSubscribedTo(channel)).length === 0, 'left', 2_000).catch(
    () => undefined,
  );
  expect(await nodesSubscribedTo(channel)).toEqual([]);
});

it('hears a node again once it is restarted, and a node that was down from the start once it is up', async () => {
  await servers[0].stop();
  const notifier = notifierOf(await quorumApp());
  const channel = channelName();
  const heard: string[] = [];
  const sub = notifier.listen(channel, (message) => heard.push(message));
  await within(sub.ready, 2_000, 'the subscription');
  expect(await heardFrom(1, channel, heard, 'before', 2_000)).toBe(true);

  await servers[1].restart();
  expect(await heardFrom(1, channel, heard, 'after restart', 10_000)).toBe(true);

  await servers[0].restart();
  await until(() => direct[0].status === 'ready', 'reconnect', 10_000);
  expect(await heardFrom(0, channel, heard, 'node 0 up', 10_000)).toBe(true);
  sub.stop();
});

it('leaves nothing subscribed on a node that was down while the last listener left', async () => {
  const notifier = notifierOf(await quorumApp());
  const channel = channelName();
  const sub = notifier.listen(channel, () => undefined);
  await within(sub.ready, 2_000, 'the subscription');
  await until(async () => (await nodesSubscribedTo(channel)).length === 3, 'subscribed', 2_000);

  servers[1].kill();
  await until(
    () => servers[1].pid === undefined && direct[1].status !== 'ready',
    'node 1 down, its connections closed',
    5_000,
  );
  sub.stop();
  await servers[1].restart();
  await until(() => direct[1].status === 'ready', 'reconnect', 10_000);
  // The notifier is back on node 1 once its own (grant) channel is subscribed there again.
  await until(
    async () => ((await direct[1].pubsub('CHANNELS', 'nest-locked:g:*')) as string[]).length > 0,
    'the notifier resubscribed on node 1',
    10_000,
  );
  // A window, not a barrier: a stale subscription of the key channel would show by then.
  await sleep(100);
  expect(await nodesSubscribedTo(channel)).toEqual([]);
  expect(notifier.size).toBe(0);
});

it('wakes once for a release published on every node, and again for the next one', async () => {
  const notifier = notifierOf(await quorumApp());
  const channel = channelName();
  const heard: string[] = [];
  const sub = notifier.listen(channel, (message) => heard.push(message));
  await within(sub.ready, 2_000, 'the subscription');
  await until(async () => (await nodesSubscribedTo(channel)).length === 3, 'subscribed', 2_000);

  // What a quorum release does: the same message on each node at once.
  await Promise.all(direct.map((d) => d.publish(channel, 'r')));
  // A window, not a barrier: the copies from the other nodes, wrongly heard, would show by then.
  await sleep(100);
  expect(heard).toEqual(['r']);
  // A node heard twice is a new release, at once.
  await Promise.all(direct.map((d) => d.publish(channel, 'r')));
  await direct[1].publish(channel, 'r');
  await until(() => heard.length >= 3, 'the next two releases heard', 2_000);
  expect(heard).toEqual(['r', 'r', 'r']);
  sub.stop();
});
