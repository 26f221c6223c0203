import { Controller, type INestApplication, Param, Post, Query } from '@nestjs/common';
import { Locked, LockNotAcquiredError, LockService } from 'nest-locked';
import request from 'supertest';
import { createLockApp, sleep, uniquePrefix, until } from '../support/lock-app';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';

jest.setTimeout(60_000);

@Controller('reports')
class ReportsController {
  /** Holds `report:<id>` for `ms` (the lease is the module's 30 s, kept up by the watchdog). */
  @Post(':id')
  @Locked('report:{id}', { waitTimeout: 0 })
  async build(@Param('id') id: string, @Query('ms') ms: string) {
    await sleep(Number(ms));
    return { built: id };
  }
}

let server: RedisServerHandle;
redisForFile((s) => (server = s));

/** Two instances of one app behind a load balancer. */
describe('Retry-After: the usual hold of the key, not the 30 s lease', () => {
  const keyPrefix = uniquePrefix('retry-after');
  let apps: INestApplication[] = [];

  beforeAll(async () => {
    const options = { clients: [server.url], keyPrefix };
    apps = await Promise.all([
      createLockApp({ options, controllers: [ReportsController] }),
      createLockApp({ options, controllers: [ReportsController] }),
    ]);
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });

  const build = (app: INestApplication, id: string, ms: number) =>
    request(app.getHttpServer()).post(`/reports/${id}?ms=${ms}`);

  it('a key held ~300 ms at a time answers busy with Retry-After 1, on either instance', async () => {
    const [a, b] = apps;
    // The key's history: held ~300 ms at a time, by both instances.
    for (const app of [a, b, a, b]) expect((await build(app, 'daily', 300)).status).toBe(201);

    const running = build(a, 'daily', 300).then((r) => r);
    await until(() => a.get(LockService).isLocked('report:daily'), 'the key held');
    for (const app of [b, a]) {
      const busy = await build(app, 'daily', 0);
      expect(busy.status).toBe(409);
      expect(busy.headers['retry-after']).toBe('1');
      expect(busy.body).toMatchObject({ code: 'LOCK_NOT_ACQUIRED', retryAfter: 1 });
    }
    expect((await running).status).toBe(201);
  });

  it('a key no instance released lately answers Retry-After 1, not the holder’s 30 s lease', async () => {
    const holder = await apps[0].get(LockService).acquire('report:weekly');
    try {
      const busy = await build(apps[1], 'weekly', 0);
      expect(busy.status).toBe(409);
      expect(busy.headers['retry-after']).toBe('1');
      expect(busy.body).toMatchObject({ code: 'LOCK_NOT_ACQUIRED', retryAfter: 1 });
    } finally {
      await holder.release();
    }
  });

  it('a key kept for minHold says so: the estimate counts the minimum hold', async () => {
    const locks = apps[0].get(LockService);
    await locks.using('report:monthly', () => 'done', { minHold: 3_000 });
    await locks
      .using('report:monthly', () => 'done', { waitTimeout: 0 })
      .then(
        () => {
          throw new Error('the key should still be held');
        },
        (error: unknown) => {
          expect(error).toBeInstanceOf(LockNotAcquiredError);
          const { retryAfterMs } = error as LockNotAcquiredError;
          expect(retryAfterMs).toBeGreaterThan(2_000);
          expect(retryAfterMs).toBeLessThanOrEqual(3_000);
        },
      );
  });
});
