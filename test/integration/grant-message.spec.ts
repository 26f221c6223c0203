import type { INestApplication } from '@nestjs/common';
import type { ChainableCommander, Redis } from 'ioredis';
import { LockNotAcquiredError, LockService } from 'nest-locked';
import { createLockApp, lockRedisKey, uniquePrefix, until, within } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { GRANT_CLAIM_MS } from '../../lib/redis/protocol/script-constants';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';

/**
 * A grant message is a hold only once its claim is confirmed: the claim (a renewal of the key
 * from its claim window to the full lease) is answered before the granted caller runs, and a
 * grant whose key or share Redis did not keep for the token is no hold at all. The grants here
 * are made by the test itself, as the release script makes them (the key set to the queued
 * token for the claim window, the token out of the queue, the message on its group's channel),
 * so that a grant Redis never kept can be sent too.
 */
jest.setTimeout(30_000);

let redis: Redis;
let server: RedisServerHandle;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

let app: INestApplication;
let locks: LockService;
let prefix: string;
beforeAll(async () => {
  prefix = uniquePrefix('grant-msg');
  app = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix, ttl: 5_000 } });
  locks = app.get(LockService);
});
afterAll(() => app?.close());

/** Records, in order, each reply to this app's EVALSHAs (the claim's among them). */
function onReplies(log: string[]): () => void {
  const node = (app.get(LockGroupRegistry).get('default') as RedisLockBackend).nodes[0] as Redis;
  const evalsha = node.evalsha.bind(node);
  node.evalsha = ((...args: Parameters<Redis['evalsha']>) => {
    const reply = evalsha(...args);
    void reply.then(
      () => log.push('reply'),
      () => log.push('reply'),
    );
    return reply;
  }) as Redis['evalsha'];
  return () => {
    node.evalsha = evalsha;
  };
}

/** This app's waiter at the head of `rk`'s Redis queue, once it is there: its token. */
async function queuedToken(rk: string): Promise<string> {
  let token: string | undefined;
  await until(
    async () => (token = (await redis.zrange(`${rk}:q`, 0, 0))[0]) !== undefined,
    'queued',
  );
  return token!;
}

/**
 * What a release script does to grant `rk` to the queued `token` (fence 42): `set` what the
 * grant sets, the token leaves the queue and the message goes to its group's channel, in one
 * MULTI.
 */
async function grantTo(
  rk: string,
  token: string,
  set: (m: ChainableCommander) => ChainableCommander,
): Promise<void> {
  const channel = `nest-locked:g:${token.slice(0, token.lastIndexOf('.'))}`;
  await set(redis.multi())
    .zrem(`${rk}:q`, token)
    .hdel(`${rk}:qm`, token)
    .publish(channel, `g ${token} 42 0 ${rk}`)
    .exec();
}

/** Another process holds `key`'s lock: a caller of this app queues behind it. */
async function heldByAnother(key: string): Promise<string> {
  const rk = lockRedisKey(prefix, key);
  await redis.set(rk, 'another.1', 'PX', 10_000);
  return rk;
}

/** Another process holds both permits of `key`: a caller of this app queues for one. */
async function permitsHeldByAnother(key: string): Promise<string> {
  const rk = lockRedisKey(prefix, key);
  const [s] = await redis.time();
  const end = Number(s) * 1000 + 10_000;
  await redis
    .multi()
    .set(rk, '\u00002', 'PX', 10_000)
    .zadd(`${rk}:h`, end, 'another.1', end, 'another.2')
    .pexpire(`${rk}:h`, 10_000)
    .exec();
  return rk;
}

/**
 * A caller of `key` (queued in `rk`) sent a grant whose key or share Redis did not keep for it
 * (`set`: what Redis holds instead): it never runs, and times out. Its token.
 */
async function expectNoHold(
  key: string,
  rk: string,
  options: Parameters<LockService['using']>[2],
  set: (m: ChainableCommander) => ChainableCommander,
): Promise<string> {
  let ran = false;
  const call = locks.using(
    key,
    () => {
      ran = true;
    },
    { ...options, waitTimeout: 1_500 },
  );
  const token = await queuedToken(rk);
  await grantTo(rk, token, set);
  await expect(within(call, 10_000, 'the call')).rejects.toBeInstanceOf(LockNotAcquiredError);
  expect(ran).toBe(false);
  return token;
}

describe('an exclusive grant', () => {
  it('holds once its claim is answered: the section runs after it, on the full lease', async () => {
    const rk = await heldByAnother('job:claimed');
    const log: string[] = [];
    let owner: string | null = null;
    let pttl = 0;
    let fence = 0;
    const call = locks.using(
      'job:claimed',
      async (ctx) => {
        log.push('section');
        fence = ctx.fence;
        [owner, pttl] = await Promise.all([redis.get(rk), redis.pttl(rk)]);
      },
      { waitTimeout: 10_000 },
    );
    const token = await queuedToken(rk);
    const undo = onReplies(log);
    try {
      await grantTo(rk, token, (m) => m.set(rk, token, 'PX', GRANT_CLAIM_MS));
      await within(call, 5_000, 'the granted call');
    } finally {
      undo();
    }
    expect(log.indexOf('reply')).toBeGreaterThanOrEqual(0);
    expect(log.indexOf('reply')).toBeLessThan(log.indexOf('section'));
    expect(fence).toBe(42);
    expect(owner).toBe(token);
    // Renewed by the claim from the 1 s window to the 5 s lease.
    expect(pttl).toBeGreaterThan(GRANT_CLAIM_MS);
    expect(await redis.exists(rk)).toBe(0);
  });

  it('whose key Redis gave someone else is no hold: the caller never runs and times out', async () => {
    const rk = await heldByAnother('job:gone');
    await expectNoHold('job:gone', rk, {}, (m) => m.set(rk, 'someone-else.1', 'PX', 10_000));
    expect(await redis.get(rk)).toBe('someone-else.1');
    await redis.del(rk);
  });
});

describe('a permit grant', () => {
  const permits = { permits: 2, waitTimeout: 10_000 };

  it('holds once its claim is answered: the section runs after it, the share on the full lease', async () => {
    const rk = await permitsHeldByAnother('p:claimed');
    const log: string[] = [];
    let score: string | null = null;
    const call = locks.using(
      'p:claimed',
      async () => {
        log.push('section');
        score = await redis.zscore(`${rk}:h`, token);
      },
      permits,
    );
    const token = await queuedToken(rk);
    const [s] = await redis.time();
    const grantedAt = Number(s) * 1000;
    const undo = onReplies(log);
    try {
      await grantTo(rk, token, (m) =>
        m.zrem(`${rk}:h`, 'another.1').zadd(`${rk}:h`, grantedAt + GRANT_CLAIM_MS, token),
      );
      await within(call, 5_000, 'the granted call');
    } finally {
      undo();
    }
    expect(log.indexOf('reply')).toBeGreaterThanOrEqual(0);
    expect(log.indexOf('reply')).toBeLessThan(log.indexOf('section'));
    // The claim renewed the share to the full lease (5 s), past the claim window.
    expect(Number(score)).toBeGreaterThan(grantedAt + GRANT_CLAIM_MS + 1_000);
    expect(await redis.zscore(`${rk}:h`, token)).toBeNull();
  });

  it('for a share Redis never gave is no hold: the caller never runs and times out', async () => {
    const rk = await permitsHeldByAnother('p:gone');
    const token = await expectNoHold('p:gone', rk, permits, (m) => m);
    expect(await redis.zscore(`${rk}:h`, token)).toBeNull();
  });
});
