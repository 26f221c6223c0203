import type { INestApplication } from '@nestjs/common';
import type { ChainableCommander, Redis } from 'ioredis';
import { LockService } from 'nest-locked';
import { createLockApp, lockRedisKey, sleep, uniquePrefix, within } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { blockEventLoop, setNxFromAnotherProcess } from '../support/stalls';
import type { LockClient } from '../../lib/engine/lock-client';
import { GRANT_CLAIM_MS } from '../../lib/redis/script-constants';
import { LockClientRegistry } from '../../lib/module/lock-client.registry';

/**
 * A grant message carries the server's clock at the grant; a waiter with a bound on that clock
 * holds a fresh grant at once (its lease ending with the claim window) and sends the claim beside
 * it, while a grant read late is still claimed first (defect 14, engine-defects.spec). The grants
 * here are made by the test itself, as the release script makes them (the key set to the queued
 * token for the claim window, the token out of the queue, the message on its group's channel),
 * so the server time in the message is the test's to choose.
 */
jest.setTimeout(30_000);

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

let app: INestApplication;
let locks: LockService;
let prefix: string;
beforeAll(async () => {
  prefix = uniquePrefix('at-once');
  app = await createLockApp({ options: { clients: [server.url], keyPrefix: prefix, ttl: 5_000 } });
  locks = app.get(LockService);
});
afterAll(() => app?.close());

/** Records, in order, each reply to this app's EVALSHAs (the claim's among them). */
function onReplies(log: string[]): () => void {
  const node = (app.get(LockClientRegistry).get('default') as LockClient).nodes[0] as Redis;
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

/** The server's clock in ms. */
async function serverMs(): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** This app's waiter at the head of `rk`'s Redis queue, once it is there: its token. */
async function queuedToken(rk: string): Promise<string> {
  for (let i = 0; i < 400; i++) {
    const token = (await redis.zrange(`${rk}:q`, 0, 0))[0];
    if (token) return token;
    await sleep(5);
  }
  throw new Error('the waiter never queued');
}

/**
 * What a release script does to grant `rk` to the queued `token` (fence 42, the server's clock
 * `atServerMs` in the message): `set` what the grant sets, the token leaves the queue and the
 * message goes to its group's channel, in one MULTI.
 */
async function grantTo(
  rk: string,
  token: string,
  atServerMs: number,
  set: (m: ChainableCommander) => ChainableCommander = (m) => m,
): Promise<void> {
  const channel = `nest-locked:g:${token.slice(0, token.lastIndexOf('.'))}`;
  await set(redis.multi())
    .zrem(`${rk}:q`, token)
    .hdel(`${rk}:qm`, token)
    .publish(channel, `g ${token} 42 0:${atServerMs} ${rk}`)
    .exec();
}

/** Resolves when `signal` aborts, or after `ms`. */
function abortedOrAfter(signal: AbortSignal, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
    setTimeout(resolve, ms);
  });
}

/**
 * Another process holds `key`; this app's caller queues behind it. `token()` resolves with the
 * queued token once it is in the Redis queue, and `grant(atServerMs)` grants the key to it.
 */
async function queuedBehindAnother(key: string) {
  const rk = lockRedisKey(prefix, key);
  await redis.set(rk, 'another.1', 'PX', 10_000);
  let token = '';
  return {
    rk,
    token: async () => (token = await queuedToken(rk)),
    grant: (atServerMs: number) =>
      grantTo(rk, token, atServerMs, (m) => m.set(rk, token, 'PX', GRANT_CLAIM_MS)),
  };
}

/** A queued caller of this app: its token once queued, and the grant of its key to it. */
interface Queued {
  token(): Promise<string>;
  grant(atServerMs: number): Promise<void>;
}

/**
 * Grants `q`'s key at `atServerMs` (server clock) and waits for the granted `call`, recording in
 * `log` each reply to this app's EVALSHAs meanwhile (the claim's among them).
 */
async function grantRecordingReplies(
  q: Queued,
  atServerMs: () => Promise<number>,
  call: Promise<unknown>,
  log: string[],
): Promise<void> {
  const undo = onReplies(log);
  try {
    await q.grant(await atServerMs());
    await within(call, 5_000, 'the granted call');
  } finally {
    undo();
  }
}

/**
 * A grant read late (0.9 s into its 1 s window, as far as its message says) to `q`'s caller of
 * `key`: the order of its section and the replies to this app's EVALSHAs.
 */
async function lateGrantOrder(
  q: Queued,
  key: string,
  options: Parameters<LockService['using']>[2],
): Promise<string[]> {
  const log: string[] = [];
  const call = locks.using(key, () => void log.push('section'), options);
  await q.token();
  await grantRecordingReplies(q, async () => (await serverMs()) - 900, call, log);
  return log;
}

it('holds a fresh grant at once: the method runs before the claim is answered, the claim lands', async () => {
  const log: string[] = [];
  const key = 'job:fresh';
  const q = await queuedBehindAnother(key);
  let owner: string | null = null;
  const call = locks.using(
    key,
    async ({ fence, signal }) => {
      log.push('section');
      expect(fence).toBe(42);
      await sleep(50);
      owner = await redis.get(q.rk);
      log.push(`aborted:${signal.aborted}`);
    },
    { waitTimeout: 10_000 },
  );
  const token = await q.token();
  await grantRecordingReplies(q, serverMs, call, log);
  expect(log[0]).toBe('section');
  expect(log).toContain('reply');
  expect(log).toContain('aborted:false');
  expect(owner).toBe(token);
  expect(await redis.exists(q.rk)).toBe(0);
});

it('claims a grant first when less than half of its window is surely left (read late)', async () => {
  const key = 'job:late';
  // Granted (as far as the message says) 0.9 s ago: 0.1 s of the window left at most.
  const log = await lateGrantOrder(await queuedBehindAnother(key), key, { waitTimeout: 10_000 });
  expect(log.indexOf('reply')).toBeGreaterThanOrEqual(0);
  expect(log.indexOf('reply')).toBeLessThan(log.indexOf('section'));
});

it('a grantee held at once that stalls past the claim window keeps the key: its claim was sent first', async () => {
  const key = 'job:stall';
  const q = await queuedBehindAnother(key);
  let ownerAfterStall: string | null = null;
  const call = locks.using(
    key,
    async () => {
      // Longer than the claim window: with the claim not on its way yet, Redis would let the
      // key go meanwhile and the intruder would take it. (Its signal may still abort: the
      // watchdog's timer can run before the claim's answer is read, and a lease past its local
      // end with no answer read is reported expired, as after any stall.)
      blockEventLoop(GRANT_CLAIM_MS + 500);
      ownerAfterStall = await redis.get(q.rk);
    },
    { waitTimeout: 10_000 },
  );
  const token = await q.token();
  const intruder = setNxFromAnotherProcess(server.port, q.rk, 'intruder', {
    delayMs: GRANT_CLAIM_MS + 200,
    pxMs: 1_000,
  });
  await q.grant(await serverMs());
  await within(call, 10_000, 'the granted call');
  expect((await intruder).trim()).not.toBe('OK');
  expect(ownerAfterStall).toBe(token);
  expect(await redis.exists(q.rk)).toBe(0);
});

it('a grantee held at once whose claim finds the key not its token is told at once: its signal aborts when the claim answers', async () => {
  const q = await queuedBehindAnother('job:gone');
  let startedAt = 0;
  let abortedAfter = Infinity;
  let reason: unknown;
  const call = locks.using(
    'job:gone',
    async ({ signal }) => {
      startedAt = performance.now();
      await abortedOrAfter(signal, 3_000);
      abortedAfter = performance.now() - startedAt;
      reason = signal.reason;
    },
    { waitTimeout: 10_000 },
  );
  const token = await q.token();
  // A grant message whose key went to someone else before the claim (here: never granted).
  await grantTo(q.rk, token, await serverMs(), (m) => m.set(q.rk, 'someone-else.1', 'PX', 10_000));
  await within(call, 5_000, 'the granted call');
  expect((reason as { reason: string }).reason).toBe('lost');
  expect(abortedAfter).toBeLessThan(GRANT_CLAIM_MS / 2);
  expect(await redis.get(q.rk)).toBe('someone-else.1');
  await redis.del(q.rk);
});

describe('a permit granted by another process (shared grant)', () => {
  const permits = { permits: 2, waitTimeout: 10_000 };

  /**
   * Two holders of another process hold both permits of `key`; this app's caller queues for one.
   * `grant(atServerMs)` frees one of theirs and grants it, as the release script does.
   */
  async function queuedForPermit(key: string) {
    const rk = lockRedisKey(prefix, key);
    const until = (await serverMs()) + 10_000;
    await redis
      .multi()
      .set(rk, '\u00002', 'PX', 10_000)
      .zadd(`${rk}:h`, until, 'another.1', until, 'another.2')
      .pexpire(`${rk}:h`, 10_000)
      .exec();
    let token = '';
    return {
      rk,
      token: async () => (token = await queuedToken(rk)),
      grant: (atServerMs: number) =>
        grantTo(rk, token, atServerMs, (m) =>
          m.zrem(`${rk}:h`, 'another.1').zadd(`${rk}:h`, atServerMs + GRANT_CLAIM_MS, token),
        ),
    };
  }

  it('holds a fresh one at once: the method runs before the claim is answered, the claim lands', async () => {
    const log: string[] = [];
    const q = await queuedForPermit('p:fresh');
    let score: string | null = null;
    let grantedAt = 0;
    const call = locks.using(
      'p:fresh',
      async ({ fence, signal }) => {
        log.push('section');
        expect(fence).toBe(42);
        await sleep(50);
        score = await redis.zscore(`${q.rk}:h`, token);
        log.push(`aborted:${signal.aborted}`);
      },
      permits,
    );
    const token = await q.token();
    await grantRecordingReplies(q, async () => (grantedAt = await serverMs()), call, log);
    expect(log[0]).toBe('section');
    expect(log).toContain('reply');
    expect(log).toContain('aborted:false');
    // The claim renewed the share to the full lease (5 s), past the claim window.
    expect(Number(score)).toBeGreaterThan(grantedAt + GRANT_CLAIM_MS + 1_000);
    expect(await redis.zscore(`${q.rk}:h`, token)).toBeNull();
  });

  it('a permit held at once whose claim finds no share of its token is lost: its signal aborts when the claim answers, not at the end of the window', async () => {
    const q = await queuedForPermit('p:gone');
    let aborted = false;
    let reason: unknown;
    let startedAt = 0;
    let abortedAfter = Infinity;
    const call = locks.using(
      'p:gone',
      async ({ signal }) => {
        startedAt = performance.now();
        await abortedOrAfter(signal, 3_000);
        aborted = signal.aborted;
        abortedAfter = performance.now() - startedAt;
        reason = signal.reason;
      },
      permits,
    );
    const token = await q.token();
    // A grant message for a share Redis never gave (or that was lost before the claim).
    await grantTo(q.rk, token, await serverMs());
    await within(call, 5_000, 'the granted call');
    expect(aborted).toBe(true);
    expect((reason as Error).name).toBe('LockLostError');
    expect((reason as { reason: string }).reason).toBe('lost');
    // Told by the claim's answer (a round trip), not by the watchdog at the window's end.
    expect(abortedAfter).toBeLessThan(GRANT_CLAIM_MS / 2);
    expect(await redis.zscore(`${q.rk}:h`, token)).toBeNull();
  });

  it('claims one first when less than half of its window is surely left (read late)', async () => {
    const log = await lateGrantOrder(await queuedForPermit('p:late'), 'p:late', permits);
    expect(log.indexOf('reply')).toBeGreaterThanOrEqual(0);
    expect(log.indexOf('reply')).toBeLessThan(log.indexOf('section'));
  });

  it('a holder held at once that stalls past the claim window keeps its permit: its claim was sent first', async () => {
    const q = await queuedForPermit('p:stall');
    let scoreAfterStall: string | null = null;
    const call = locks.using(
      'p:stall',
      async () => {
        blockEventLoop(GRANT_CLAIM_MS + 500);
        scoreAfterStall = await redis.zscore(`${q.rk}:h`, token);
      },
      permits,
    );
    const token = await q.token();
    const grantedAt = await serverMs();
    await q.grant(grantedAt);
    await within(call, 10_000, 'the granted call');
    expect(Number(scoreAfterStall)).toBeGreaterThan(grantedAt + GRANT_CLAIM_MS + 1_000);
  });
});
