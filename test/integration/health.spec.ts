import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RedlockHealthIndicator } from 'nest-locked/health';
import { HealthModule } from '../support/health-app';
import { createLockApp, sleep, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, startRedisServers, stopAll } from '../support/redis-server';

jest.setTimeout(60_000);

describe('RedlockHealthIndicator against real redis-servers', () => {
  // servers[0]: the single-node group `default`; servers[1..3]: the quorum group `orders`.
  let servers: RedisServerHandle[] = [];
  let app: INestApplication;
  let indicator: RedlockHealthIndicator;
  const address = (s: RedisServerHandle) => `127.0.0.1:${s.port}`;

  beforeAll(async () => {
    servers = await startRedisServers(4);
    app = await createLockApp({
      options: {
        clients: { default: [servers[0].url], orders: servers.slice(1).map((s) => s.url) },
        keyPrefix: uniquePrefix('health'),
        commandTimeout: 500,
      },
      imports: [HealthModule],
    });
    indicator = app.get(RedlockHealthIndicator);
  });
  afterAll(async () => {
    await app?.close();
    await stopAll(servers);
  });

  it('is up with every node reachable: one node, and a quorum of 3, each with its latency', async () => {
    const result = await indicator.isHealthy();
    expect(result.redlock.status).toBe('up');
    const up = (s: RedisServerHandle) => ({
      node: address(s),
      status: 'up',
      latencyMs: expect.any(Number),
    });
    expect(result.redlock.groups).toEqual({
      default: { status: 'up', backend: 'redis', quorum: 1, reachable: 1, nodes: [up(servers[0])] },
      orders: {
        status: 'up',
        backend: 'redis',
        quorum: 2,
        reachable: 3,
        nodes: [up(servers[1]), up(servers[2]), up(servers[3])],
      },
    });
    const response = await request(app.getHttpServer()).get('/health');
    expect(response.status).toBe(200);
    expect(response.body.info.redlock.status).toBe('up');
  });

  it('stays up with one node of the quorum stopped, and shows that node down', async () => {
    await servers[2].stop();
    const result = await indicator.isHealthy('locks');
    expect(result.locks.status).toBe('up');
    const orders = result.locks.groups.orders;
    expect(orders).toMatchObject({ status: 'up', quorum: 2, reachable: 2 });
    expect(orders.nodes[1]).toEqual({
      node: address(servers[2]),
      status: 'down',
      error: expect.any(String),
    });
    expect(orders.nodes.map((n) => n.status)).toEqual(['up', 'down', 'up']);
    expect((await request(app.getHttpServer()).get('/health')).status).toBe(200);
  });

  it('is down when two of the three are stopped (no majority), the other group still up', async () => {
    await servers[3].stop();
    const result = await indicator.isHealthy();
    expect(result.redlock.status).toBe('down');
    expect(result.redlock.groups.orders).toMatchObject({ status: 'down', quorum: 2, reachable: 1 });
    expect(result.redlock.groups.default.status).toBe('up');

    // Through Terminus: 503, with the indicator's details under `error`.
    const response = await request(app.getHttpServer()).get('/health');
    expect(response.status).toBe(503);
    expect(response.body.status).toBe('error');
    expect(response.body.error.redlock.groups.orders.reachable).toBe(1);
  });

  it('is down when the single node of a group is stopped', async () => {
    await servers[0].stop();
    const result = await indicator.isHealthy();
    expect(result.redlock.groups.default).toEqual({
      status: 'down',
      backend: 'redis',
      quorum: 1,
      reachable: 0,
      nodes: [{ node: address(servers[0]), status: 'down', error: expect.any(String) }],
    });
  });

  it('is up again once the servers are back', async () => {
    await Promise.all([servers[0].restart(), servers[2].restart(), servers[3].restart()]);
    // The module's connections reconnect on their own (ioredis retries with back-off).
    let status = 'down';
    for (let i = 0; i < 100 && status !== 'up'; i++) {
      status = (await indicator.isHealthy()).redlock.status;
      if (status !== 'up') await sleep(100);
    }
    expect(status).toBe('up');
  });
});
