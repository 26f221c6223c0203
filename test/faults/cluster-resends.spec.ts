import { Cluster, type ClusterOptions } from 'ioredis';
import { type LockHandle, LockNotAcquiredError, LockService } from 'nest-locked';
import { FaultFrame, uid } from '../support/faults';
import { uniquePrefix } from '../support/lock-app';
import { type CommandArgs, type RedisProxy, startRedisProxy } from '../support/redis-proxy';
import {
  type RedisServerHandle,
  sendCommand,
  startRedisServer,
  waitForClusterOk,
} from '../support/redis-server';

/**
 * What a Redis Cluster client does on its own while a shard fails over: it re-sends a command
 * answered CLUSTERDOWN, TRYAGAIN or MOVED on its own timers, long after the lock's
 * `commandTimeout` stopped waiting for it. A one-node Cluster (every slot on one real
 * redis-server) behind a real loopback proxy that answers a chosen command TRYAGAIN (as a node
 * does while a slot moves) until the test lets it through, or holds back grant messages: each
 * test puts one such re-send, or one late message, exactly where a failover can.
 */
jest.setTimeout(60_000);

const frame = new FaultFrame();
let server: RedisServerHandle;
let proxy: RedisProxy;
const keyPrefix = uniquePrefix('cluster-resends');

beforeAll(async () => {
  // Its own address in CLUSTER SLOTS (a lone node names none), which the natMap points at the proxy.
  server = frame.track(
    await startRedisServer({ cluster: true, args: ['--cluster-announce-ip', '127.0.0.1'] }),
  );
  await sendCommand(server.host, server.port, ['CLUSTER', 'ADDSLOTSRANGE', '0', '16383'], 2_000);
  await waitForClusterOk([server]);
  proxy = await startRedisProxy(server.port);
  frame.stoppers.push(() => proxy.close());
});

afterAll(() => frame.stopAll());

/**
 * The LockService of an app whose group is a Cluster client of the server (through the proxy
 * when `proxied`), once the client is ready.
 */
async function lockService(
  proxied: boolean,
  commandTimeout: number,
  options: ClusterOptions = {},
): Promise<LockService> {
  const port = proxied ? proxy.port : server.port;
  const natMap = proxied ? { [`127.0.0.1:${server.port}`]: { host: '127.0.0.1', port } } : {};
  const client = new Cluster([{ host: '127.0.0.1', port }], { natMap, ...options });
  frame.stoppers.push(() => client.quit().then(() => undefined));
  await new Promise((ready) => client.once('ready', ready));
  return (await frame.app({ clients: [client], keyPrefix, commandTimeout })).get(LockService);
}

/** A lock script (EVALSHA or EVAL) on `key`. */
const lockCommandOf =
  (key: string) =>
  (args: CommandArgs): boolean =>
    /^eval/i.test(args[0] ?? '') && args.some((a) => a === `${keyPrefix}{${key}}`);

/**
 * `others` takes `key`, then `locks` waits for it: resolves once the waiter's first try and its
 * first attempt in line (which queued its token in Redis) were both answered busy.
 */
async function waiterBehind(locks: LockService, others: LockService, key: string) {
  const holder = await others.acquire(key, { ttl: 10_000 });
  const answered = proxy.answered(lockCommandOf(key), 2);
  const waiting = locks.acquire(key, { waitTimeout: 30_000 });
  await answered;
  return { holder, waiting };
}

it('an undo the Cluster client re-sends after commandTimeout never frees the hold its token took meanwhile', async () => {
  // Through the proxy: a waiter whose attempt fails and whose undo the client re-sends late.
  const locks = await lockService(true, 300, { retryDelayOnTryAgain: 100, maxRedirections: 16 });
  const others = await lockService(false, 300);
  const key = `undo:${uid()}`;
  const ofKey = lockCommandOf(key);

  const { holder, waiting } = await waiterBehind(locks, others, key);
  // Its next attempt is answered TRYAGAIN until the client gives it up: it fails after
  // commandTimeout, and the undo that follows is re-sent by the client too.
  const attempt = proxy.refuse(ofKey);
  await attempt.seen;
  const undo = proxy.refuse(ofKey);
  await undo.seen;
  // The key is free now: the waiter's token is granted it (it is still queued) or takes it.
  await holder.release();
  // The undo goes through once the waiter holds the key (the defect: its token's next round
  // did not wait for the undo), or once the client re-sent it 10 times (it waited).
  await Promise.race([waiting, undo.refused(10)]);
  await undo.end();
  const held = await waiting;

  // The undo ran: whatever it gave back, the key is the waiter's while its lease lasts.
  await expect(others.acquire(key, { waitTimeout: 0 })).rejects.toBeInstanceOf(
    LockNotAcquiredError,
  );
  expect(held.signal.aborted).toBe(false);
  await held.release();
});

it('a grant message read after the grant was made again: the hold gets the fence Redis recorded, above the previous holder', async () => {
  // Its own attempts are refused while the key changes hands: a long commandTimeout.
  const locks = await lockService(true, 8_000, { retryDelayOnTryAgain: 100, maxRedirections: 100 });
  const others = await lockService(false, 1_000);
  const key = `fence:${uid()}`;
  const ofKey = lockCommandOf(key);

  const { holder: first, waiting } = await waiterBehind(locks, others, key);
  const grants = proxy.holdMessages(
    (payload) => payload.startsWith('g ') && payload.endsWith(`${keyPrefix}{${key}}`),
  );
  // Its next attempt waits (refused) until the key has changed hands.
  const attempt = proxy.refuse(ofKey);
  // The release grants the key to the waiter's token; the grant message is held back, so the
  // grant's claim window runs out unclaimed and another caller takes the key.
  await first.release();
  await grants.held(1);
  const second: LockHandle = await others.acquire(key, { waitTimeout: 10_000 });
  // The waiter's attempt now queues its token behind that holder, whose release grants the key
  // to it again (the second grant message is held back too).
  await attempt.seen;
  await attempt.end();
  await second.release();
  await grants.held(2);
  // The FIRST grant's message reaches the waiter now: its claim finds the key its token's.
  grants.deliver(0);
  const held = await waiting;
  grants.deliverAll();

  expect(held.fence).toBeGreaterThan(second.fence);
  await held.release();
});
