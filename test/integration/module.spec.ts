import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import type Redlock from 'redlock';
import {
  getRedlockToken,
  InjectRedlock,
  LockContext,
  Locked,
  LockLostError,
  LockService,
  RedlockModule,
} from 'nest-locked';
import type { RedisLockBackend } from '../../lib/redis/redis-lock-backend';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { lockRedisKey, sleep, uniquePrefix, until } from '../support/lock-app';
import { type RedisServerHandle, useRedis } from '../support/redis-server';

/**
 * Module wiring: forRootAsync, named groups, @InjectRedlock, connection ownership and graceful
 * shutdown (signals aborted, locks released, owned connections closed, user instances kept).
 */
jest.setTimeout(30_000);

let server: RedisServerHandle;
let probe: Redis;

beforeAll(async () => {
  server = await useRedis();
  probe = new Redis(server.url);
});

afterAll(async () => {
  probe?.disconnect();
  await server?.stop();
});

@Injectable()
class Jobs {
  signal?: AbortSignal;
  constructor(@InjectRedlock('reports') readonly redlock: Redlock) {}

  @Locked('job:{id}', { client: 'reports' })
  async long(id: string): Promise<string> {
    this.signal = LockContext.current()!.signal;
    await sleep(1_500);
    return id;
  }
}

it('forRootAsync with named groups; shutdown releases held locks and closes only owned connections', async () => {
  const prefix = uniquePrefix('module');
  const mine = new Redis(server.url);

  @Module({ providers: [{ provide: 'URL', useValue: server.url }], exports: ['URL'] })
  class ConfigModule {}

  @Module({
    imports: [
      RedlockModule.forRootAsync({
        imports: [ConfigModule],
        inject: ['URL'],
        useFactory: (url: string) => ({
          clients: { default: [mine], reports: [url] },
          keyPrefix: prefix,
        }),
      }),
    ],
    providers: [Jobs],
  })
  class AppModule {}

  const app: INestApplicationContext = await NestFactory.createApplicationContext(AppModule, {
    logger: false,
  });
  const jobs = app.get(Jobs);
  expect(app.get(getRedlockToken('reports'))).toBe(jobs.redlock);
  expect(typeof jobs.redlock.acquire).toBe('function');

  const registry = app.get(LockGroupRegistry);
  const owned = (registry.get('reports') as RedisLockBackend).nodes[0] as Redis;
  expect((registry.get('default') as RedisLockBackend).nodes[0]).toBe(mine);

  const running = jobs.long('7');
  await until(async () => (await probe.exists(lockRedisKey(prefix, 'job:7'))) === 1, 'job 7 held');
  expect(await app.get(LockService).isLocked('job:7', { client: 'reports' })).toBe(true);

  await app.close();
  // The hold was told, released at once (not left to expire), and the module's own connection
  // closed; the instance we passed in is still ours to use.
  expect(jobs.signal?.aborted).toBe(true);
  expect(jobs.signal?.reason).toBeInstanceOf(LockLostError);
  expect((jobs.signal?.reason as LockLostError).reason).toBe('shutdown');
  expect(await probe.exists(lockRedisKey(prefix, 'job:7'))).toBe(0);
  expect(owned.status).toBe('end');
  expect(await mine.ping()).toBe('PONG');
  await expect(running).resolves.toBe('7');
  mine.disconnect();
});

it('is global by default and can be made local', async () => {
  @Injectable()
  class Uses {
    constructor(readonly locks: LockService) {}
  }
  @Module({ providers: [Uses] })
  class Feature {}
  @Module({ imports: [RedlockModule.forRoot({ clients: [server.url] }), Feature] })
  class GlobalApp {}
  const app = await NestFactory.createApplicationContext(GlobalApp, {
    logger: false,
    abortOnError: false,
  });
  expect(app.get(Uses).locks).toBeInstanceOf(LockService);
  await app.close();

  @Module({ imports: [RedlockModule.forRoot({ clients: [server.url], isGlobal: false }), Feature] })
  class LocalApp {}
  await expect(
    NestFactory.createApplicationContext(LocalApp, { logger: false, abortOnError: false }),
  ).rejects.toThrow(/LockService/);
});

it('ends waits in progress at shutdown instead of holding it up until waitTimeout', async () => {
  const prefix = uniquePrefix('shutdown-wait');
  @Module({ imports: [RedlockModule.forRoot({ clients: [server.url], keyPrefix: prefix })] })
  class App {}
  const holder = await NestFactory.createApplicationContext(App, { logger: false });
  const waiter = await NestFactory.createApplicationContext(App, { logger: false });
  try {
    const held = await holder.get(LockService).acquire('busy');
    const single = waiter.get(LockService).using('busy', () => 1, { waitTimeout: 30_000 });
    // Behind the head of the same line (no listener or timer of its own: its line tells it).
    const behind = waiter.get(LockService).using('busy', () => 1, { waitTimeout: 30_000 });
    const multi = waiter
      .get(LockService)
      .using(['busy', 'other'], () => 1, { waitTimeout: 30_000 });
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'ran',
        (e: Error) => e.name,
      );
    const settled = Promise.all([outcome(single), outcome(behind), outcome(multi)]);
    // All three wait: the single ones in the waiter's line, its head in the Redis queue; the
    // multi-key one racing, subscribed to its keys' channels.
    const waiting = waiter.get(LockGroupRegistry).get('default');
    await until(
      async () =>
        waiting.queued('busy') >= 2 &&
        waiter.get(LockService).stats().subscriptions >= 1 &&
        (await probe.zcard(`${lockRedisKey(prefix, 'busy')}:q`)) >= 1,
      'the three callers waiting',
    );
    const start = Date.now();
    await waiter.close();
    expect(await settled).toEqual(['LockBackendError', 'LockBackendError', 'LockBackendError']);
    expect(Date.now() - start).toBeLessThan(5_000);
    await held.release();
  } finally {
    await holder.close();
  }
});
