import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { LockConfigError, LockService, RedlockModule } from 'nest-locked';
import {
  type BoardOverview,
  LockBoardModule,
  type LockBoardOptions,
  lockBoardBasicAuth,
} from 'nest-locked/board';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { RedisBoardSource } from '../../lib/redis/redis-board-source';
import { holdUntilReleased, lockRedisKey, uniquePrefix } from '../support/lock-app';

let server: RedisServerHandle;
let redis: Redis;
redisForFile((s, r) => {
  server = s;
  redis = r;
});

const guard = lockBoardBasicAuth({ user: 'ops', password: 'secret' });
const AUTH = `Basic ${Buffer.from('ops:secret').toString('base64')}`;

/** The root module of an instance: the lock module and the board, on this test's Redis. */
function moduleOf(prefix: string, instance: string, board: Partial<LockBoardOptions> = {}) {
  @Module({
    imports: [
      RedlockModule.forRoot({ clients: [server.url], keyPrefix: prefix, waitTimeout: 10_000 }),
      LockBoardModule.forRoot({ guard, instance, ...board }),
    ],
  })
  class InstanceModule {}
  return InstanceModule;
}

async function boardApp(
  prefix: string,
  instance: string,
  platform: 'express' | 'fastify',
  extra: { actions?: boolean } = {},
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedlockModule.forRoot({ clients: [server.url], keyPrefix: prefix, waitTimeout: 10_000 }),
      LockBoardModule.forRoot({ guard, instance, publishInterval: 200, expiry: 2_000, ...extra }),
    ],
  }).compile();
  const app =
    platform === 'fastify'
      ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
          logger: false,
        })
      : moduleRef.createNestApplication({ logger: false });
  await app.init();
  if (platform === 'fastify')
    await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

/** Polls the overview until `check` passes, or fails with the last one seen. */
async function overviewUntil(
  app: INestApplication,
  check: (o: BoardOverview) => boolean,
  query = '',
): Promise<BoardOverview> {
  const deadline = Date.now() + 10_000;
  let last: BoardOverview | undefined;
  while (Date.now() < deadline) {
    const res = await request(app.getHttpServer())
      .get(`/locks/api/overview${query}`)
      .set('authorization', AUTH);
    expect(res.status).toBe(200);
    last = res.body as BoardOverview;
    if (check(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`overview never matched; last: ${JSON.stringify(last, null, 1)}`);
}

/** Each instance's published view of the default group: its name and its waits. */
async function publishedWaits(prefix: string): Promise<unknown[]> {
  const base = `${prefix}board:{default}`;
  const ids = await redis.zrange(`${base}:instances`, 0, -1);
  const views = await Promise.all(ids.map((id) => redis.get(`${base}:i:${id}`)));
  return views.flatMap((json) => {
    if (json === null) return [];
    const view = JSON.parse(json) as { name: string; at: number; waiting: unknown[] };
    return [{ name: view.name, at: view.at, waiting: view.waiting }];
  });
}

jest.setTimeout(40_000);

describe('lock board', () => {
  it('refuses to mount without a guard unless public, and force release without a guard', () => {
    expect(() => LockBoardModule.forRoot({})).toThrow(LockConfigError);
    expect(() => LockBoardModule.forRoot({ public: true, actions: true })).toThrow(
      /needs a `guard`/,
    );
    expect(() => LockBoardModule.forRoot({ public: true })).not.toThrow();
  });

  it.each(['express', 'fastify'] as const)(
    'on %s: the guard refuses without credentials; the page, held rows, lines and events across two instances',
    async (platform) => {
      const prefix = uniquePrefix(`board-${platform}`);
      const a = await boardApp(prefix, 'alpha', platform, { actions: true });
      const b = await boardApp(prefix, 'beta', platform);
      const c = await boardApp(prefix, 'gamma', platform);
      const release: Array<() => void> = [];
      try {
        const http = a.getHttpServer();
        const refused = await request(http).get('/locks/api/overview');
        expect(refused.status).toBe(401);
        expect(refused.headers['www-authenticate']).toMatch(/^Basic/);
        const page = await request(http).get('/locks/').set('authorization', AUTH);
        expect(page.status).toBe(200);
        expect(page.text).toContain('assets/board.mjs');
        const chart = await request(http).get('/locks/assets/uPlot.mjs').set('authorization', AUTH);
        expect(chart.status).toBe(200);

        // beta holds product:1; alpha and then gamma wait for it.
        const locksA = a.get(LockService);
        const locksB = b.get(LockService);
        const locksC = c.get(LockService);
        const held = new Promise<void>(
          (resolve) =>
            void locksB.using('product:1', () => {
              resolve();
              return new Promise<void>((done) => release.push(done));
            }),
        );
        await held;
        const waiting = [
          locksA.using('product:1', () => undefined),
          new Promise((r) => setTimeout(r, 150)).then(() =>
            locksC.using('product:1', () => undefined),
          ),
        ].map((p) => p.catch((err: Error) => err));
        const o = await overviewUntil(
          a,
          (o) =>
            o.held.rows.some((r) => r.key === 'product:1' && r.fence !== null) &&
            o.lines.some((l) => l.key === 'product:1' && l.waiters.length === 2),
        );
        const row = o.held.rows.find((r) => r.key === 'product:1')!;
        expect(row).toMatchObject({ instance: 'beta', mode: 'exclusive' });
        expect(row.token).not.toMatch(/^[A-Za-z0-9_-]{12}\.\w+$/);
        const line = o.lines.find((l) => l.key === 'product:1')!;
        expect(line.waiters.map((w) => w.instance)).toEqual(['alpha', 'gamma']);
        expect(line.waiters[0].deadlineInMs).toBeGreaterThan(0);
        expect(o.instances.map((i) => i.name)).toEqual(['alpha', 'beta', 'gamma']);
        expect(o.nodes[0]).toMatchObject({ status: 'up', role: 'master' });

        // Force release: confirmed, recorded with who did it.
        const unconfirmed = await request(http)
          .post('/locks/api/release?group=default&key=product:1')
          .set('authorization', AUTH)
          .set('x-lock-board', 'release');
        expect(unconfirmed.status).toBe(400);
        const forced = await request(http)
          .post('/locks/api/release?group=default&key=product:1&confirm=product:1')
          .set('authorization', AUTH)
          .set('x-lock-board', 'release');
        expect(forced.body).toEqual({ released: true });
        release.forEach((done) => done());
        await Promise.all(waiting);
        const after = await overviewUntil(a, (o) =>
          o.events.some((e) => e.type === 'forced' && e.key === 'product:1'),
        );
        expect(after.events.find((e) => e.type === 'forced')!.detail).toMatch(
          /^by ops, held by beta/,
        );
        const hot = await overviewUntil(a, (o) => o.hot.keys.some((k) => k.key === 'product:1'));
        expect(hot.hot.series.t.length).toBeGreaterThan(0);
      } finally {
        release.forEach((done) => done());
        await Promise.all([a.close(), b.close(), c.close()]);
      }
    },
  );

  it("a force release grants the key to its next queued waiter, as the holder's release would", async () => {
    const prefix = uniquePrefix('board-force');
    const a = await boardApp(prefix, 'alpha', 'express', { actions: true });
    const b = await boardApp(prefix, 'beta', 'express');
    const release: Array<() => void> = [];
    try {
      // beta holds the key with a long lease; alpha queues for it in Redis.
      release.push(await holdUntilReleased(b.get(LockService), 'job:force'));
      const locks = a.get(LockService);
      const before = locks.stats();
      const taken = locks.acquire('job:force', { waitTimeout: 20_000 });
      await overviewUntil(a, (o) =>
        o.lines.some((l) => l.key === 'job:force' && l.waiters.some((w) => !w.inProcess)),
      );
      const forced = await request(a.getHttpServer())
        .post('/locks/api/release?group=default&key=job:force&confirm=job:force')
        .set('authorization', AUTH)
        .set('x-lock-board', 'release');
      expect(forced.body).toEqual({ released: true });
      const lock = await taken;
      const after = locks.stats();
      await lock.release();
      // The key came to the queued waiter by a grant, not by its fallback timer.
      expect(after.grants - before.grants).toBe(1);
      expect(after.timerWakeups - before.timerWakeups).toBe(0);
    } finally {
      release.forEach((done) => done());
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('counts every caller waiting for a key, those waiting inside their process too', async () => {
    const prefix = uniquePrefix('board-count');
    const a = await boardApp(prefix, 'alpha', 'express');
    const b = await boardApp(prefix, 'beta', 'express');
    const release: Array<() => void> = [];
    try {
      // beta holds product:2; two callers of alpha and one more of beta wait for it: Redis
      // queues alpha's first caller only (and none of beta's, whose process holds the key).
      const [locksA, locksB] = [a.get(LockService), b.get(LockService)];
      release.push(await holdUntilReleased(locksB, 'product:2'));
      const waiting = [locksA, locksA, locksB].map((locks) =>
        locks.using('product:2', () => undefined),
      );
      const o = await overviewUntil(a, (o) =>
        o.lines.some((l) => l.key === 'product:2' && l.length === 3),
      );
      const line = o.lines.find((l) => l.key === 'product:2')!;
      expect(line.complete).toBe(true);
      // Who waits, not where: under load the line may be read before alpha's first caller is
      // queued in Redis (its try still on its way), all three then waiting in their process.
      const waiters = line.waiters.map((w) => w.instance).sort();
      const expected = ['alpha', 'alpha', 'beta'];
      if (waiters.join('|') !== expected.join('|')) {
        // With what the line was built from, so that a wrong count explains itself: the key's
        // Redis queue (token, queued at in µs) and each instance's published waits.
        const queue = await redis.zrange(
          `${lockRedisKey(prefix, 'product:2')}:q`,
          0,
          -1,
          'WITHSCORES',
        );
        const views = await publishedWaits(prefix);
        throw new Error(
          `waiters ${JSON.stringify(waiters)}, expected ${JSON.stringify(expected)}; ` +
            `the line ${JSON.stringify(line)}; Redis queue ${JSON.stringify(queue)}; ` +
            `published ${JSON.stringify(views)}`,
        );
      }
      const page = await request(a.getHttpServer())
        .get('/locks/api/key?group=default&key=product:2')
        .set('authorization', AUTH);
      expect(page.body.line).toMatchObject({ length: 3, complete: true });
      release.forEach((done) => done());
      await Promise.all(waiting);
    } finally {
      release.forEach((done) => done());
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a worker without HTTP publishes its holds: another instance shows its name and fence', async () => {
    const prefix = uniquePrefix('board-worker');
    const worker = await NestFactory.createApplicationContext(
      moduleOf(prefix, 'worker', { publishInterval: 200, expiry: 2_000 }),
      { logger: false },
    );
    const web = await boardApp(prefix, 'web', 'express');
    const release: Array<() => void> = [];
    try {
      const locks = worker.get(LockService);
      release.push(await holdUntilReleased(locks, 'job:7'));
      const o = await overviewUntil(web, (o) =>
        o.held.rows.some((r) => r.key === 'job:7' && r.fence !== null),
      );
      expect(o.held.rows.find((r) => r.key === 'job:7')).toMatchObject({
        instance: 'worker',
        fence: expect.any(Number),
      });
      expect(o.instances.map((i) => i.name)).toEqual(['web', 'worker']);
    } finally {
      release.forEach((done) => done());
      await Promise.all([worker.close(), web.close()]);
    }
  });

  it('a hold this instance takes while the board reads the server shows its fence in that read', async () => {
    const prefix = uniquePrefix('board-young');
    const app = await boardApp(prefix, 'solo', 'express');
    const release: Array<() => void> = [];
    const scan = RedisBoardSource.prototype.scan;
    // The hold is taken after the overview began, before it reads the server's keys.
    const spy = jest.spyOn(RedisBoardSource.prototype, 'scan').mockImplementation(async function (
      this: RedisBoardSource,
      ...args
    ) {
      if (release.length === 0) release.push(await holdUntilReleased(locks, 'young:1'));
      return scan.apply(this, args);
    });
    const locks = app.get(LockService);
    try {
      const res = await request(app.getHttpServer())
        .get('/locks/api/overview')
        .set('authorization', AUTH);
      const rows = (res.body as BoardOverview).held.rows;
      expect(rows).toMatchObject([{ key: 'young:1', instance: 'solo' }]);
      expect(rows[0].fence).toEqual(expect.any(Number));
    } finally {
      spy.mockRestore();
      release.forEach((done) => done());
      await app.close();
    }
  });

  it('a group on another backend shows what this instance holds and waits for', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedlockModule.forRoot({ backend: 'memory' }),
        LockBoardModule.forRoot({ public: true, instance: 'solo' }),
      ],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    const release: Array<() => void> = [];
    try {
      const locks = app.get(LockService);
      release.push(await holdUntilReleased(locks, 'job:1'));
      const waiting = locks.using('job:1', () => undefined, { waitTimeout: 20_000 });
      const o = await overviewUntil(app, (o) => o.lines.some((l) => l.key === 'job:1'));
      expect(o.groups).toEqual([{ name: 'default', backend: 'memory' }]);
      expect(o.held.rows).toMatchObject([{ key: 'job:1', instance: 'solo', mode: 'exclusive' }]);
      expect(o.held.rows[0].fence).toEqual(expect.any(Number));
      expect(o.lines[0].waiters).toMatchObject([{ instance: 'solo', mode: 'exclusive' }]);
      // The memory backend lives in this process: its waiters are all there is.
      expect(o.lines[0]).toMatchObject({ length: 1, complete: true });
      expect(o.lines[0].waiters[0].deadlineInMs).toBeGreaterThan(0);
      release.forEach((done) => done());
      await waiting;
    } finally {
      release.forEach((done) => done());
      await app.close();
    }
  });

  it('an instance that stops disappears; search and pages bound what is read', async () => {
    const prefix = uniquePrefix('board-gone');
    const a = await boardApp(prefix, 'stays', 'express');
    const b = await boardApp(prefix, 'goes', 'express');
    try {
      await overviewUntil(a, (o) => o.instances.length === 2);
      // 10,000 held keys (written straight into Redis as holders would): pages and a search.
      const multi = redis.multi();
      for (let i = 0; i < 10_000; i++) multi.set(`${prefix}{bulk:${i}}`, `x.${i}`, 'PX', 60_000);
      await multi.exec();
      const page2 = await overviewUntil(a, (o) => o.held.total === 10_000, '?q=bulk:&page=2');
      expect(page2.held.rows).toHaveLength(50);
      expect(page2.held.page).toBe(2);
      expect(page2.held.pages).toBe(200);
      const one = await overviewUntil(a, (o) => o.held.total === 1, '?q=bulk:9999');
      expect(one.held.rows[0].key).toBe('bulk:9999');
      await b.close();
      await overviewUntil(a, (o) => o.instances.map((i) => i.name).join() === 'stays');
    } finally {
      await a.close();
      await b.close();
    }
  });
});
