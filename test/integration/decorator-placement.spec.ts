import {
  Body,
  Controller,
  Get,
  HttpCode,
  Injectable,
  type INestApplication,
  Param,
  Post,
  RequestMethod,
} from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { Cron, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import {
  SCHEDULE_CRON_OPTIONS,
  SCHEDULER_NAME,
  SCHEDULER_TYPE,
} from '@nestjs/schedule/dist/schedule.constants';
import { LockContext, Locked, LockService } from 'nest-locked';
import request from 'supertest';
import { createLockApp, sleep, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, useRedis } from '../support/redis-server';

jest.setTimeout(60_000);

/** What a handler saw of its own lock. */
async function proof(locks: LockService) {
  const ctx = LockContext.current();
  return {
    fence: ctx?.fence,
    keys: ctx?.keys,
    // Asked of Redis from inside the call: the key really is held right now.
    lockedInRedis: ctx ? await locks.isLocked(ctx.keys[0]) : false,
  };
}

@Controller('place')
class PlacementController {
  constructor(private readonly locks: LockService) {}

  @Locked('place:{id}')
  @Get('above/:id')
  async getAbove(@Param('id') id: string) {
    return { route: 'getAbove', id, ...(await proof(this.locks)) };
  }

  @Get('below/:id')
  @Locked('place:{id}')
  async getBelow(@Param('id') id: string) {
    return { route: 'getBelow', id, ...(await proof(this.locks)) };
  }

  @Locked('place:{id}')
  @Post('above/:id')
  async postAbove(@Param('id') id: string, @Body() body: { qty: number }) {
    return { route: 'postAbove', id, qty: body.qty, ...(await proof(this.locks)) };
  }

  @Post('below/:id')
  @HttpCode(202)
  @Locked('place:{id}')
  async postBelow(@Param('id') id: string, @Body() body: { qty: number }) {
    return { route: 'postBelow', id, qty: body.qty, ...(await proof(this.locks)) };
  }
}

interface Tick {
  fence?: number;
  keys?: readonly string[];
}

@Injectable()
class TickService {
  readonly above: Tick[] = [];
  readonly below: Tick[] = [];

  @Locked('cron:above', { waitTimeout: 0 })
  @Cron('* * * * * *', { name: 'tick-above' })
  async tickAbove() {
    const ctx = LockContext.current();
    this.above.push({ fence: ctx?.fence, keys: ctx?.keys });
  }

  @Cron('* * * * * *', { name: 'tick-below' })
  @Locked('cron:below', { waitTimeout: 0 })
  async tickBelow() {
    const ctx = LockContext.current();
    this.below.push({ fence: ctx?.fence, keys: ctx?.keys });
  }
}

describe('@Locked above and below other decorators', () => {
  let server: RedisServerHandle;
  let app: INestApplication;

  beforeAll(async () => {
    server = await useRedis();
    app = await createLockApp({
      options: { clients: [server.url], keyPrefix: uniquePrefix('place') },
      imports: [ScheduleModule.forRoot()],
      controllers: [PlacementController],
      providers: [TickService],
    });
    await app.listen(0, '127.0.0.1');
  });
  afterAll(async () => {
    await app?.close();
    await server?.stop();
  });

  describe('routes (@Get / @Post)', () => {
    it.each([
      ['get', 'above', 'getAbove', 200],
      ['get', 'below', 'getBelow', 200],
      ['post', 'above', 'postAbove', 201],
      ['post', 'below', 'postBelow', 202],
    ] as const)(
      '%s %s: answers with the right status and body, under the lock',
      async (verb, where, route, status) => {
        const http = request(app.getHttpServer());
        const res = await (verb === 'get'
          ? http.get(`/place/${where}/42`)
          : http.post(`/place/${where}/42`).send({ qty: 3 }));
        expect(res.status).toBe(status);
        expect(res.body).toEqual({
          route,
          id: '42',
          ...(verb === 'post' ? { qty: 3 } : {}),
          fence: expect.any(Number),
          keys: ['place:42'],
          lockedInRedis: true,
        });
        expect(res.body.fence).toBeGreaterThan(0);
        // Released once the response was sent.
        expect(await app.get(LockService).isLocked('place:42')).toBe(false);
      },
    );

    it('keeps route metadata, the method name and its length', () => {
      const proto = PlacementController.prototype as unknown as Record<
        string,
        (...a: unknown[]) => unknown
      >;
      const expected: [string, string, RequestMethod, number][] = [
        ['getAbove', 'above/:id', RequestMethod.GET, 1],
        ['getBelow', 'below/:id', RequestMethod.GET, 1],
        ['postAbove', 'above/:id', RequestMethod.POST, 2],
        ['postBelow', 'below/:id', RequestMethod.POST, 2],
      ];
      for (const [name, path, method, length] of expected) {
        const fn = proto[name];
        expect(fn.name).toBe(name);
        expect(fn.length).toBe(length);
        expect(Reflect.getMetadata(PATH_METADATA, fn)).toBe(path);
        expect(Reflect.getMetadata(METHOD_METADATA, fn)).toBe(method);
        expect(Reflect.getMetadataKeys(fn)).toEqual(
          expect.arrayContaining([PATH_METADATA, METHOD_METADATA]),
        );
      }
      expect(Reflect.getMetadata('__httpCode__', proto.postBelow)).toBe(202);
    });
  });

  describe('@Cron jobs', () => {
    it('fire on schedule and run under the lock, with @Locked above or below @Cron', async () => {
      const ticks = app.get(TickService);
      for (let i = 0; i < 100 && (ticks.above.length < 2 || ticks.below.length < 2); i++) {
        await sleep(100);
      }
      expect(ticks.above.length).toBeGreaterThanOrEqual(2);
      expect(ticks.below.length).toBeGreaterThanOrEqual(2);
      for (const t of ticks.above)
        expect(t).toEqual({ fence: expect.any(Number), keys: ['cron:above'] });
      for (const t of ticks.below)
        expect(t).toEqual({ fence: expect.any(Number), keys: ['cron:below'] });
      // A new hold each tick.
      expect(ticks.above[1].fence).toBeGreaterThan(ticks.above[0].fence!);
      expect(ticks.below[1].fence).toBeGreaterThan(ticks.below[0].fence!);
    });

    it('keeps cron metadata and the method name', () => {
      const registry = app.get(SchedulerRegistry);
      expect(registry.getCronJob('tick-above')).toBeDefined();
      expect(registry.getCronJob('tick-below')).toBeDefined();
      const proto = TickService.prototype as unknown as Record<
        string,
        (...a: unknown[]) => unknown
      >;
      for (const [name, job] of [
        ['tickAbove', 'tick-above'],
        ['tickBelow', 'tick-below'],
      ]) {
        const fn = proto[name];
        expect(fn.name).toBe(name);
        expect(Reflect.getMetadata(SCHEDULER_NAME, fn)).toBe(job);
        expect(Reflect.getMetadata(SCHEDULER_TYPE, fn)).toBeDefined();
        expect(Reflect.getMetadata(SCHEDULE_CRON_OPTIONS, fn)).toMatchObject({
          cronTime: '* * * * * *',
        });
      }
    });
  });
});
