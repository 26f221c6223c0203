import {
  Controller,
  Get,
  Injectable,
  type INestApplication,
  Param,
  Post,
  Query,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  LockBackendError,
  LockConfigError,
  LockContext,
  Locked,
  LockError,
  LockKeyError,
  LockNotAcquiredError,
  LockService,
  RedlockModule,
  type RedlockModuleOptions,
} from 'nest-locked';
import request from 'supertest';
import { uid } from '../support/faults';
import { LockGroupRegistry } from '../../lib/module/lock-group.registry';
import { createLockApp, lockRedisKey, timed, uniquePrefix, until } from '../support/lock-app';
import {
  type RedisServerHandle,
  startRedisServer,
  stopAll,
  useRedis,
} from '../support/redis-server';

jest.setTimeout(60_000);

let server: RedisServerHandle;
let redis: Redis;
/** Servers this file stops on purpose (never the shared one). */
const doomed: RedisServerHandle[] = [];

beforeAll(async () => {
  server = await useRedis();
  redis = new Redis(server.url);
});

afterAll(async () => {
  redis?.disconnect();
  await stopAll([server, ...doomed]);
});

@Injectable()
class JobService {
  calls = 0;

  @Locked('job:{id}', { waitTimeout: 0 })
  async now(id: string): Promise<string> {
    this.calls++;
    return id;
  }

  @Locked('job:{id}', { waitTimeout: 2_000 })
  async patient(id: string): Promise<string> {
    this.calls++;
    return id;
  }
}

describe('LockNotAcquiredError: waitTimeout 0 on a held key', () => {
  const keyPrefix = uniquePrefix('busy');
  let app: INestApplication;
  let holderApp: INestApplication;
  let jobs: JobService;

  beforeAll(async () => {
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix },
      providers: [JobService],
    });
    holderApp = await createLockApp({ options: { clients: [server.url], keyPrefix } });
    jobs = app.get(JobService);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), holderApp?.close()]);
  });

  it('rejects at once when another instance holds the key', async () => {
    const id = uid();
    const holder = await holderApp.get(LockService).acquire(`job:${id}`);
    try {
      const calls = jobs.calls;
      const r = await timed(jobs.now(id));
      expect(r.ok).toBe(false);
      if (r.ok) return;
      expect(r.error).toBeInstanceOf(LockNotAcquiredError);
      expect(r.error).toMatchObject({ name: 'LockNotAcquiredError', keys: [`job:${id}`] });
      expect((r.error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
      expect(r.ms).toBeLessThan(1_000);
      expect(jobs.calls).toBe(calls); // the method never ran
    } finally {
      await holder.release();
    }
    await expect(jobs.now(id)).resolves.toBe(id);
  });

  it('rejects at once when the key is held by a foreign writer (raw SET), with its lease as retryAfter', async () => {
    const id = uid();
    await redis.set(lockRedisKey(keyPrefix, `job:${id}`), 'someone-else', 'PX', 5_000);
    const r = await timed(jobs.now(id));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error).toBeInstanceOf(LockNotAcquiredError);
    expect(r.ms).toBeLessThan(1_000);
    const retryAfterMs = (r.error as LockNotAcquiredError).retryAfterMs;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(5_000);
  });
});

describe('LockBackendError: Redis stopped', () => {
  const WAIT = 2_000;
  let lonely: RedisServerHandle;
  let app: INestApplication;
  let holderApp: INestApplication;
  let jobs: JobService;
  let locks: LockService;

  beforeAll(async () => {
    lonely = await startRedisServer();
    doomed.push(lonely);
    const options = { clients: [lonely.url], keyPrefix: uniquePrefix('down'), waitTimeout: WAIT };
    app = await createLockApp({ options, providers: [JobService] });
    holderApp = await createLockApp({ options });
    jobs = app.get(JobService);
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), holderApp?.close()]);
  });

  it('fails a waiting caller, and every later call, within waitTimeout plus a margin (no hang)', async () => {
    await expect(jobs.patient('warm-up')).resolves.toBe('warm-up');

    // A caller is waiting for a key held elsewhere when the server goes away.
    const id = uid();
    const holder = await holderApp.get(LockService).acquire(`job:${id}`);
    const waiting = timed(jobs.patient(id));
    const client = app.get(LockGroupRegistry).get('default');
    await until(() => client.queued(`job:${id}`) === 1, 'the caller waiting');
    await lonely.stop();
    const w = await waiting;
    expect(w.ok).toBe(false);
    if (!w.ok) expect(w.error).toBeInstanceOf(LockBackendError);
    expect(w.ms).toBeLessThan(WAIT + 1_000);
    await holder.release(); // never throws: a failed release is logged

    // New calls: a backend failure, fast, never mistaken for contention.
    const calls = jobs.calls;
    const attempts: (() => Promise<unknown>)[] = [
      () => jobs.patient(uid()),
      () => jobs.now(uid()),
      () => locks.acquire(`job:${uid()}`),
      () => locks.using(`job:${uid()}`, () => 'never'),
      () => locks.isLocked(`job:${uid()}`),
    ];
    for (const call of attempts) {
      const r = await timed(call());
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error).toBeInstanceOf(LockBackendError);
        expect(r.error).toBeInstanceOf(LockError);
        expect((r.error as LockBackendError).failures.length).toBeGreaterThan(0);
        expect((r.error as Error).cause).toBeDefined();
      }
      expect(r.ms).toBeLessThan(WAIT + 1_000);
    }
    expect(jobs.calls).toBe(calls);
  });
});

@Controller('orders')
class OrdersController {
  @Post(':id/pay')
  @Locked('order:{id}', { waitTimeout: 0 })
  async pay(@Param('id') id: string) {
    return { paid: id, fence: LockContext.current()?.fence };
  }

  @Get('lookup')
  @Locked('order:{id}', { waitTimeout: 0 })
  async lookup(@Query('id') id?: string) {
    return { found: id };
  }

  @Get(':id/flaky')
  @Locked('order:{id}', { client: 'flaky', waitTimeout: 2_000 })
  async flaky(@Param('id') id: string) {
    return { flaky: id };
  }
}

describe('over HTTP (LockInterceptor, registered globally)', () => {
  const keyPrefix = uniquePrefix('http');
  let flakyServer: RedisServerHandle;
  let app: INestApplication;
  let holderApp: INestApplication;

  beforeAll(async () => {
    flakyServer = await startRedisServer();
    doomed.push(flakyServer);
    app = await createLockApp({
      options: { clients: { default: [server.url], flaky: [flakyServer.url] }, keyPrefix },
      controllers: [OrdersController],
    });
    await app.listen(0, '127.0.0.1');
    holderApp = await createLockApp({ options: { clients: [server.url], keyPrefix } });
  });
  afterAll(async () => {
    await Promise.all([app?.close(), holderApp?.close()]);
  });

  it('answers 409 with Retry-After while the lock is busy, and 201 once it is free', async () => {
    const id = uid();
    const holder = await holderApp.get(LockService).acquire(`order:${id}`);
    try {
      const busy = await request(app.getHttpServer()).post(`/orders/${id}/pay`);
      expect(busy.status).toBe(409);
      expect(busy.headers['retry-after']).toMatch(/^\d+$/);
      expect(Number(busy.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(busy.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: 'The resource is busy; retry later.',
        code: 'LOCK_NOT_ACQUIRED',
        retryAfter: Number(busy.headers['retry-after']),
      });
      expect(JSON.stringify(busy.body)).not.toContain(id); // nor the key
    } finally {
      await holder.release();
    }
    const ok = await request(app.getHttpServer()).post(`/orders/${id}/pay`);
    expect(ok.status).toBe(201);
    expect(ok.body).toEqual({ paid: id, fence: expect.any(Number) });
  });

  it('answers 400 when the key cannot be built (missing query parameter)', async () => {
    const bad = await request(app.getHttpServer()).get('/orders/lookup');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ statusCode: 400, code: 'LOCK_KEY_INVALID' });
    // The placeholder it lacks, not the template.
    expect(bad.body.message).toBe('Invalid request: no valid value for "id".');
    const empty = await request(app.getHttpServer()).get('/orders/lookup?id=');
    expect(empty.status).toBe(400);
    const ok = await request(app.getHttpServer()).get('/orders/lookup?id=7');
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ found: '7' });
  });

  it('answers 503 when Redis is down', async () => {
    const up = await request(app.getHttpServer()).get('/orders/1/flaky');
    expect(up.status).toBe(200);
    await flakyServer.stop();
    const start = performance.now();
    const down = await request(app.getHttpServer()).get('/orders/1/flaky');
    expect(down.status).toBe(503);
    expect(down.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'The service is temporarily unavailable.',
      code: 'LOCK_BACKEND_UNAVAILABLE',
    });
    expect(performance.now() - start).toBeLessThan(3_000);
  });
});

@Injectable()
class ItemService {
  calls = 0;

  @Locked('item:{id}')
  async take(id: unknown): Promise<void> {
    this.calls++;
    void id;
  }

  @Locked('order:{dto.customer.id}')
  async order(dto: unknown): Promise<void> {
    this.calls++;
    void dto;
  }
}

describe('LockKeyError: bad key values, at call time, before anything is locked', () => {
  const keyPrefix = uniquePrefix('badkey');
  let app: INestApplication;
  let items: ItemService;
  let locks: LockService;

  beforeAll(async () => {
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix },
      providers: [ItemService],
    });
    items = app.get(ItemService);
    locks = app.get(LockService);
  });
  afterAll(async () => {
    await app?.close();
  });

  const bad: [string, unknown][] = [
    ['undefined', undefined],
    ['null', null],
    ["''", ''],
    ['NaN', NaN],
    ['an object', { id: 1 }],
    ['an array', [1, 2]],
    ['a function', () => 1],
  ];

  it.each(bad)('rejects %s naming the template and the placeholder', async (_label, value) => {
    const error = await items.take(value).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockKeyError);
    expect(error).toMatchObject({ name: 'LockKeyError', template: 'item:{id}', placeholder: 'id' });
    expect((error as Error).message).toContain('"item:{id}"');
    expect((error as Error).message).toContain('{id}');
  });

  it('rejects a broken property path naming the placeholder', async () => {
    for (const dto of [
      {},
      { customer: {} },
      { customer: { id: null } },
      { customer: { id: '' } },
    ]) {
      const error = await items.order(dto).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockKeyError);
      expect(error).toMatchObject({
        template: 'order:{dto.customer.id}',
        placeholder: 'dto.customer.id',
      });
    }
  });

  it('rejects bad raw keys of the programmatic API', async () => {
    await expect(locks.using('', () => 1)).rejects.toBeInstanceOf(LockKeyError);
    await expect(locks.acquire('x'.repeat(2_000))).rejects.toBeInstanceOf(LockKeyError);
  });

  it("rejects a handle's extend(ms) outside 10 ms .. 2^31-1 ms, and keeps the lock", async () => {
    const handle = await locks.acquire('extend:bad');
    try {
      for (const ms of [2 ** 31, 0, 1.5, Number.NaN]) {
        await expect(handle.extend(ms)).rejects.toBeInstanceOf(LockConfigError);
      }
      await expect(handle.extend(5_000)).resolves.toBeUndefined();
    } finally {
      await handle.release();
    }
    await redis.del(`${lockRedisKey(keyPrefix, 'extend:bad')}:fence`);
  });

  it('never ran a method nor wrote a key for any of them; good values still lock', async () => {
    expect(items.calls).toBe(0);
    expect(await redis.keys(`${keyPrefix}*`)).toEqual([]);
    // The same methods work with good values (a string, a number, a bigint, a boolean).
    for (const value of ['a', 42, 10n, true]) await items.take(value);
    await items.order({ customer: { id: 'c-1' } });
    expect(items.calls).toBe(5);
    const locked = await redis.keys(`${keyPrefix}*`);
    // Only fence counters stay behind; every lock was released.
    expect(locked.sort()).toEqual(
      ['item:a', 'item:42', 'item:10', 'item:true', 'order:c-1']
        .map((k) => `${lockRedisKey(keyPrefix, k)}:fence`)
        .sort(),
    );
  });
});

describe('LockKeyError at decoration time', () => {
  it('names the template and the unknown placeholder', () => {
    const error = (() => {
      try {
        class Broken {
          @Locked('item:{itemId}')
          async take(id: string) {
            return id;
          }
        }
        return Broken;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(LockKeyError);
    expect(error).toMatchObject({ template: 'item:{itemId}', placeholder: 'itemId' });
    expect((error as Error).message).toContain('{itemId}');
    expect((error as Error).message).toContain('(id)');
  });

  it('rejects an argument index past the parameters', () => {
    expect(() => {
      class Broken {
        // @ts-expect-error: the compiler sees the index past the parameters too; this test is
        // about the check at decoration time, which also covers untyped callers.
        @Locked('item:{2}')
        async take(id: string) {
          return id;
        }
      }
      return Broken;
    }).toThrow(LockKeyError);
  });

  it('rejects bad per-call options with LockConfigError naming the field', () => {
    const error = (() => {
      try {
        class Broken {
          @Locked('item:{id}', { ttl: 0 })
          async take(id: string) {
            return id;
          }
        }
        return Broken;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toMatch(/ttl$/);
  });
});

describe('LockConfigError: bad module options fail startup', () => {
  async function startupError(options: RedlockModuleOptions, providers: unknown[] = []) {
    let app: INestApplication | undefined;
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [RedlockModule.forRoot(options)],
        providers: providers as never[],
      }).compile();
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();
      return undefined;
    } catch (e) {
      return e;
    } finally {
      await app?.close();
    }
  }

  it.each<[string, RedlockModuleOptions, string, string]>([
    ['ttl 0', { ttl: 0 }, 'ttl', 'got 0'],
    ['a negative ttl', { ttl: -5 }, 'ttl', 'got -5'],
    ['a negative waitTimeout', { waitTimeout: -1 }, 'waitTimeout', 'got -1'],
    ['an empty group', { clients: { default: [] } }, 'clients.default', 'an array'],
    ['an empty client array', { clients: [] }, 'clients.default', 'an array'],
    ['clients: {}', { clients: {} }, 'clients', 'an object'],
  ])('%s', async (_label, options, field, shown) => {
    const error = await startupError({ keyPrefix: uniquePrefix('cfg'), ...options });
    expect(error).toBeInstanceOf(LockConfigError);
    expect(error).toMatchObject({ name: 'LockConfigError', field });
    expect((error as Error).message).toContain(`"${field}"`);
    expect((error as Error).message).toContain(shown);
  });

  it('an unknown client group in @Locked({ client }) fails at app init', async () => {
    @Injectable()
    class OrphanService {
      @Locked('orphan:{id}', { client: 'nope' })
      async run(id: string) {
        return id;
      }
    }
    const error = await startupError({ clients: [server.url], keyPrefix: uniquePrefix('cfg') }, [
      OrphanService,
    ]);
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toContain('client');
    expect((error as Error).message).toContain('"nope"');
    expect((error as Error).message).toContain('OrphanService.run');
  });
});
