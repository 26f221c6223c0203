import { Redis } from 'ioredis';
import { LockBackendError, type LockHandle, LockService } from 'nest-locked';
import { FaultFrame, releaseIfHeld, settle, uid } from '../support/faults';
import { until, within } from '../support/lock-app';
import { type RedisServerHandle, startRedisServers } from '../support/redis-server';

/**
 * Redlock's restart rule (issue 34): a node restarted without persistence forgot the locks it
 * granted, so it counts toward no new acquire's majority until the longest lease in use has
 * passed since its start. A holds on nodes 1-3 of 5 (cut off from 4 and 5 while it acquires),
 * node 3 restarts empty, A reaches 4 and 5 again: B (connected throughout) and C (an app started
 * after the restart) are refused until A's lease could have run out; B gets the key after.
 */
jest.setTimeout(60_000);

/** Long enough that the restart and the reconnections all fit well inside A's lease. */
const TTL = 5_000;
const COMMAND_TIMEOUT = 500;

const frame = new FaultFrame();
let servers: RedisServerHandle[];
/** The connections A's and B's apps lock through (passed in: the test cuts and restores them). */
let aNodes: Redis[];
let bNodes: Redis[];
let a: LockService;
let b: LockService;
const keyPrefix = `restartvote:${uid()}:`;

/** A connection as the module opens its own: no offline queue, so a cut node fails at once. */
function connection(server: RedisServerHandle): Redis {
  const redis = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  frame.clients.push(redis);
  return redis;
}

const uptime = async (redis: Redis): Promise<number> =>
  Number(/uptime_in_seconds:(\d+)/.exec(await redis.info('server'))?.[1] ?? 0);

beforeAll(async () => {
  servers = (await startRedisServers(5)).map((s) => frame.track(s));
  aNodes = servers.map(connection);
  bNodes = servers.map(connection);
  await Promise.all([...aNodes, ...bNodes].map((r) => until(() => r.status === 'ready', 'ready')));
  const options = { ttl: TTL, commandTimeout: COMMAND_TIMEOUT, keyPrefix };
  a = (await frame.app({ ...options, clients: aNodes })).get(LockService);
  b = (await frame.app({ ...options, clients: bNodes })).get(LockService);
});

afterAll(() => frame.stopAll());

describe('a node restarted without persistence votes for no new lock until the longest lease has passed', () => {
  const key = `restart:${uid()}`;
  let held: LockHandle;
  let heldSince: number;

  beforeAll(async () => {
    // The group ran a whole lease before node 3 restarts (what an app started later sees).
    await until(async () => (await uptime(bNodes[0])) * 1_000 >= TTL + 1_000, 'uptime', 15_000);
    // A is cut off from nodes 4 and 5 (a partition: a SIGSTOPped node would run A's queued
    // acquire when it resumes and hold the key for A there too) and takes 1, 2 and 3.
    aNodes[3].disconnect();
    aNodes[4].disconnect();
    heldSince = performance.now();
    held = await a.acquire(key, { watchdog: false, waitTimeout: 0 });
    // Node 3 restarts empty on the same port; A reaches 4 and 5 again.
    await servers[2].restart();
    await Promise.all([aNodes[3].connect(), aNodes[4].connect()]);
    await until(() => bNodes[2].status === 'ready', "B's connection to node 3 is back");
  });

  afterAll(() => held?.release());

  /** `locks` asks once, without waiting, while A's lease is still valid: refused by the rule. */
  async function expectRefused(locks: LockService): Promise<void> {
    const probe = await settle(() => locks.acquire(key, { waitTimeout: 0 }));
    await releaseIfHeld(probe);
    expect(performance.now() - heldSince).toBeLessThan(TTL);
    expect(probe.error).toBeInstanceOf(LockBackendError);
    expect((probe.error as LockBackendError).message).toContain(`:${servers[2].port} restarted`);
  }

  it('B, connected throughout, is refused while A holds: the restarted node cannot complete its majority', async () => {
    await expectRefused(b);
  });

  it('C, an app started after the restart, is refused too', async () => {
    const options = { clients: servers.map((s) => s.url), ttl: TTL, keyPrefix };
    await expectRefused((await frame.app(options)).get(LockService));
  });

  it("B, waiting, gets the key only once A's lease could have run out", async () => {
    const got = await within(b.acquire(key, { waitTimeout: 4 * TTL }), 5 * TTL, "B's wait");
    const at = performance.now();
    await got.release();
    expect(at - heldSince).toBeGreaterThanOrEqual(TTL);
  });
});
