import { Injectable, type INestApplication } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { Redis } from 'ioredis';
import { LockContext, Locked, LockService } from 'nest-locked';
import { createLockApp, lockRedisKey, sleep, uniquePrefix, until } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import { type RedisServerHandle, startRedisServers, stopAll } from '../support/redis-server';

jest.setTimeout(60_000);

const MIN_HOLD = 1_000;

/**
 * A job every instance schedules on the same cron expression. Its scheduler is not started
 * here: the test calls `run` itself, as each instance's scheduler would at a tick.
 */
@Injectable()
class TickJob {
  /** Ticks this instance ran. */
  readonly ran: number[] = [];

  @Cron('* * * * * *')
  @Locked('tick:{0}', { waitTimeout: 0, onBusy: 'skip', minHold: MIN_HOLD })
  async run(tick: number): Promise<void> {
    this.ran.push(tick); // takes 0 ms
  }

  /** The same job without minHold (the control). */
  @Locked('tick-control:{0}', { waitTimeout: 0, onBusy: 'skip' })
  async runWithoutMinHold(tick: number): Promise<void> {
    this.ran.push(tick);
  }
}

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

describe('minHold: a 0 ms cron job on two instances, 1 ms apart', () => {
  const keyPrefix = uniquePrefix('minhold');
  let apps: INestApplication[] = [];
  let a: TickJob;
  let b: TickJob;

  beforeAll(async () => {
    const options = { clients: [server.url], keyPrefix };
    apps = await Promise.all([
      createLockApp({ options, providers: [TickJob] }),
      createLockApp({ options, providers: [TickJob] }),
    ]);
    [a, b] = apps.map((app) => app.get(TickJob));
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });

  const runsOf = (tick: number) => [...a.ran, ...b.ran].filter((t) => t === tick).length;

  it('runs once per tick with minHold, whichever instance comes first', async () => {
    for (let tick = 1; tick <= 6; tick++) {
      const [first, second] = tick % 2 ? [a, b] : [b, a];
      await first.run(tick); // done, released, before the other instance's scheduler fires
      await sleep(1);
      await second.run(tick);
      expect(runsOf(tick)).toBe(1);
    }
  });

  it('runs once when both instances fire at the same moment', async () => {
    await Promise.all([a.run(100), b.run(100), a.run(100), b.run(100)]);
    expect(runsOf(100)).toBe(1);
  });

  it('control: without minHold the late instance runs the same tick again', async () => {
    await a.runWithoutMinHold(200);
    await sleep(1);
    await b.runWithoutMinHold(200);
    expect(runsOf(200)).toBe(2);
  });

  it('leaves the key to expire at minHold (not deleted, not kept for the lease)', async () => {
    await a.run(300);
    const pttl = await redis.pttl(lockRedisKey(keyPrefix, 'tick:300'));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(MIN_HOLD);
    // Once it expired, the tick can be taken again: minHold is a floor, nothing more.
    await waitUntilGone(lockRedisKey(keyPrefix, 'tick:300'));
    await b.run(300);
    expect(runsOf(300)).toBe(2);
  });
});

describe('minHold: waiters of every process wait for the expiry', () => {
  const keyPrefix = uniquePrefix('minhold-wait');
  let apps: INestApplication[] = [];

  beforeAll(async () => {
    const options = { clients: [server.url], keyPrefix };
    apps = await Promise.all([createLockApp({ options }), createLockApp({ options })]);
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });

  it('a waiter in the holding process gets no handoff, nor does a waiter elsewhere, before minHold', async () => {
    const [here, there] = apps.map((app) => app.get(LockService));
    let takenAt = 0;
    const holder = here.using(
      'report',
      async () => {
        takenAt = LockContext.current()!.acquiredAt;
        await sleep(50);
      },
      { minHold: MIN_HOLD },
    );
    await until(() => takenAt > 0, 'the holder has the key'); // both waiters queue behind it
    const at = (locks: LockService) =>
      locks.using('report', () => LockContext.current()!.acquiredAt, { waitTimeout: 5_000 });
    const [local, remote] = await Promise.all([at(here), at(there), holder]);
    // acquiredAt is taken after the round trip that took the key: no earlier than the expiry
    // (5 ms for the millisecond rounding of two clocks).
    expect(local - takenAt).toBeGreaterThanOrEqual(MIN_HOLD - 5);
    expect(remote - takenAt).toBeGreaterThanOrEqual(MIN_HOLD - 5);
  });

  it('a call that ends after minHold releases at once', async () => {
    const locks = apps[0].get(LockService);
    await locks.using('slow', () => sleep(120), { minHold: 100 });
    expect(await redis.exists(lockRedisKey(keyPrefix, 'slow'))).toBe(0);
  });
});

describe('minHold on a quorum of 3 nodes', () => {
  let servers: RedisServerHandle[] = [];
  let app: INestApplication;
  const keyPrefix = uniquePrefix('minhold-quorum');

  beforeAll(async () => {
    servers = await startRedisServers(3);
    app = await createLockApp({
      options: { clients: servers.map((s) => s.url), keyPrefix },
      providers: [TickJob],
    });
  });
  afterAll(async () => {
    await app?.close();
    await stopAll(servers);
  });

  it('leaves the key to expire at minHold on every node, and skips the tick meanwhile', async () => {
    const job = app.get(TickJob);
    await job.run(7);
    await job.run(7);
    expect(job.ran).toEqual([7]);
    const key = lockRedisKey(keyPrefix, 'tick:7');
    for (const s of servers) {
      const node = new Redis(s.url);
      try {
        const pttl = await node.pttl(key);
        expect(pttl).toBeGreaterThan(0);
        expect(pttl).toBeLessThanOrEqual(MIN_HOLD);
      } finally {
        node.disconnect();
      }
    }
  });
});

function waitUntilGone(key: string): Promise<void> {
  return until(async () => (await redis.exists(key)) === 0, `${key} gone`);
}
