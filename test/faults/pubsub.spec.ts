import { Redis } from 'ioredis';
import { LockService } from 'nest-locked';
import {
  describeOutcome,
  eventually,
  FaultFrame,
  releaseIfHeld,
  settle,
  uid,
} from '../support/faults';
import { lockRedisKey, sleep, uniquePrefix, until } from '../support/lock-app';
import { type RedisServerHandle, startRedisServers } from '../support/redis-server';

/**
 * The subscriber connection killed by the server (`CLIENT KILL TYPE pubsub`, as a proxy, a
 * failover or an operator would) while callers wait. PRODUCT 5: "waiters are still woken".
 * README: a waiting head retries at least once a second in case a message was lost while its
 * subscriber reconnected; the subscriber resubscribes, so later wake-ups are pushes again.
 *
 * ttl and waitTimeout are 10 s: neither an expiry nor a deadline can stand in for the wake-up.
 */
jest.setTimeout(40_000);

const TTL = 10_000;
const WAIT = 10_000;
/** A lost message costs at most one poll (1 s), plus a loaded machine's slack. */
const LOST_MESSAGE_BOUND = 2_500;

const frame = new FaultFrame();
let servers: RedisServerHandle[];
let raws: Redis[];

beforeAll(async () => {
  servers = (await startRedisServers(3)).map((s) => frame.track(s));
  raws = servers.map((s) => frame.raw(s));
});

afterAll(() => frame.stopAll());

/** Channels and patterns subscribed on `node` (by anyone). */
async function subscriptions(node: Redis): Promise<number> {
  const channels = (await node.pubsub('CHANNELS')) as string[];
  return channels.length + Number(await node.pubsub('NUMPAT'));
}

/** Kills every pub/sub connection on `nodes`; resolves with how many were killed. */
async function killSubscribers(nodes: Redis[]): Promise<number> {
  const killed = await Promise.all(nodes.map((r) => r.client('KILL', 'TYPE', 'pubsub')));
  return killed.reduce<number>((sum, n) => sum + Number(n), 0);
}

describe.each([
  { group: 'single node (grants on the group channel)', nodes: 1 },
  { group: 'quorum of 3 (wake-ups on the key channel)', nodes: 3 },
])('$group: the subscriber connection killed while callers wait', ({ nodes }) => {
  let holder: LockService;
  let waiter: LockService;
  const keyPrefix = uniquePrefix('pubsub');

  beforeAll(async () => {
    const options = {
      clients: servers.slice(0, nodes).map((s) => s.url),
      keyPrefix,
      commandTimeout: 500,
    };
    holder = (await frame.app(options)).get(LockService);
    waiter = (await frame.app(options)).get(LockService);
  });

  /** `waiter` waits for `key` held by `holder`; resolves once it waits (queued or flagged). */
  async function waitBehind(key: string) {
    const held = await holder.acquire(key, { ttl: TTL });
    const waiting = settle(() => waiter.acquire(key, { ttl: TTL, waitTimeout: WAIT }));
    const rk = lockRedisKey(keyPrefix, key);
    const waits = await eventually(
      async () => (await raws[0].zcard(`${rk}:q`)) + (await raws[0].exists(`${rk}:wait`)) > 0,
      3_000,
    );
    expect(waits).toBe(true);
    // Its subscriber is up: the wait above needed it.
    await sleep(100);
    return { held, waiting };
  }

  it('a release right after the kill (its message lost) still reaches the waiter, within about one poll', async () => {
    const key = `lost:${uid()}`;
    const { held, waiting } = await waitBehind(key);
    expect(await killSubscribers(raws.slice(0, nodes))).toBeGreaterThanOrEqual(1);
    const releasedAt = performance.now();
    await held.release();
    const r = await waiting;
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toBe('acquired');
    expect(r.at - releasedAt).toBeLessThan(LOST_MESSAGE_BOUND);
  });

  it('once the subscriber is back, a release wakes the waiter by its message again', async () => {
    const key = `back:${uid()}`;
    const { held, waiting } = await waitBehind(key);
    const subscribed = () => Promise.all(raws.slice(0, nodes).map(subscriptions));
    const before = await subscribed();
    expect(await killSubscribers(raws.slice(0, nodes))).toBeGreaterThanOrEqual(1);
    // Reconnected and resubscribed: every node has its channels and patterns back.
    await until(
      async () => (await subscribed()).every((n, i) => n >= before[i]),
      'the subscribers back',
      10_000,
    );
    const stats = waiter.stats();
    const releasedAt = performance.now();
    await held.release();
    const r = await waiting;
    await releaseIfHeld(r);
    expect(describeOutcome(r)).toBe('acquired');
    expect(r.at - releasedAt).toBeLessThan(500);
    // Pushed by the release (a grant, or a notified wake-up), not found by a poll.
    const after = waiter.stats();
    expect(
      after.grants - stats.grants + (after.notifiedWakeups - stats.notifiedWakeups),
    ).toBeGreaterThanOrEqual(1);
  });
});
