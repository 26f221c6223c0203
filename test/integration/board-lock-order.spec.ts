import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockService, RedlockModule } from 'nest-locked';
import { LockBoardModule, lockBoardBasicAuth } from 'nest-locked/board';
import { redisForFile } from '../support/redis-for-file';
import type { RedisServerHandle } from '../support/redis-server';
import { uniquePrefix } from '../support/lock-app';

/**
 * The lock board's "Lock order" panel (PRODUCT 2.11): `GET <board>/api/lock-order` answers the
 * lock-order graph of the instance (classes, edges with their first site, cycles), and the page
 * ships the panel's script. On Redis, where the graph is shared.
 */
let server: RedisServerHandle;
redisForFile((s) => (server = s));

const guard = lockBoardBasicAuth({ user: 'ops', password: 'secret' });
const AUTH = `Basic ${Buffer.from('ops:secret').toString('base64')}`;

describe('lock board: lock order', () => {
  let app: INestApplication;
  afterEach(() => app?.close());

  async function start(lockOrder: 'warn' | 'off') {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedlockModule.forRoot({ clients: [server.url], keyPrefix: uniquePrefix('lo'), lockOrder }),
        LockBoardModule.forRoot({ guard, instance: 'i1' }),
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return app.get(LockService);
  }

  const graph = async () => {
    const res = await request(app.getHttpServer())
      .get('/locks/api/lock-order')
      .set('authorization', AUTH);
    expect(res.status).toBe(200);
    return res.body as {
      classes: string[];
      edges: { from: string; to: string; site: string; inCycle: boolean }[];
      cycles: unknown[][];
      off?: boolean;
    };
  };

  it('answers the classes, the edges with their first site, and the cycle in red', async () => {
    const locks = await start('warn');
    const nest = (outer: string, inner: string) =>
      locks.using(outer, () => locks.using(inner, () => 0, { lockClass: inner }), {
        lockClass: outer,
      });
    await nest('a:{id}', 'b:{id}');
    await nest('b:{id}', 'c:{id}');
    expect((await graph()).cycles).toEqual([]);
    await nest('c:{id}', 'a:{id}');
    const g = await graph();
    expect(g.classes).toEqual(['a:{}/exclusive', 'b:{}/exclusive', 'c:{}/exclusive']);
    expect(g.edges.map((e) => [e.from, e.to, e.inCycle])).toEqual(
      expect.arrayContaining([
        ['a:{}/exclusive', 'b:{}/exclusive', true],
        ['b:{}/exclusive', 'c:{}/exclusive', true],
        ['c:{}/exclusive', 'a:{}/exclusive', true],
      ]),
    );
    expect(g.edges[0].site).toMatch(/board-lock-order\.spec\.ts:\d+/);
    expect(g.cycles).toHaveLength(1);
    const script = await request(app.getHttpServer())
      .get('/locks/assets/lock-order-panel.mjs')
      .set('authorization', AUTH);
    expect(script.status).toBe(200);
    expect(script.text).toContain('export function mountLockOrderPanel');
  });

  it('says when checking is off', async () => {
    await start('off');
    expect(await graph()).toEqual({ classes: [], edges: [], cycles: [], off: true });
  });
});
