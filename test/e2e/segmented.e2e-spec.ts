import { burst, type BurstResult, get, type HttpResult, post } from '../../scripts/http';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';
import { type SampleCluster, startSampleCluster, tempDir } from './support/sample-app';

/**
 * The segmented strategy end to end (seeds 001, "another 10x"): one product's stock in ten lock
 * slices, bought by a crowd spread over three OS processes of the sample app, then restocked
 * while the processes keep running.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const body = (r: BurstResult) =>
  (r.status ? (r as HttpResult).body : undefined) as
    { code?: string; remaining?: number } | undefined;
const count = (results: BurstResult[], f: (r: BurstResult) => boolean) => results.filter(f).length;

describe('segmented purchases across three processes', () => {
  let redis: RedisServerHandle;
  let cluster: SampleCluster;
  let dir: ReturnType<typeof tempDir>;
  let urls: readonly string[];
  let id: number;

  beforeAll(async () => {
    redis = await startRedisServer();
    dir = tempDir('e2e-segmented');
    cluster = await startSampleCluster({
      instances: 3,
      redisUrls: [redis.url],
      dbPath: `${dir.path}/shop.sqlite`,
      latencyMs: 2,
      lockWaitMs: 60_000,
      namePrefix: 'seg',
    });
    urls = cluster.urls;
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
    await redis?.stop();
    dir?.remove();
  }, 30_000);

  it('sells exactly 1100 from ten slices to 1500 buyers; the other 400 hear "sold out"', async () => {
    const created = await post(`${urls[0]}/products`, { name: 'hot', stock: 1_100 });
    expect(created.status).toBe(201);
    id = created.body.id as number;
    const before = (await get(`${urls[1]}/products/${id}`)).body as { slices: number[] };
    expect(before.slices).toEqual(Array(10).fill(110));

    const results = await burst(1_500, (i) => ({
      method: 'POST',
      url: `${urls[i % urls.length]}/products/${id}/purchase?mode=segmented`,
      body: { quantity: 1 },
      timeoutMs: 90_000,
    }));

    const sold = count(results, (r) => r.status === 201);
    const soldOut = count(
      results,
      (r) => r.status === 409 && body(r)?.code === 'INSUFFICIENT_STOCK' && body(r)?.remaining === 0,
    );
    expect({ sold, soldOut, other: results.length - sold - soldOut }).toEqual({
      sold: 1_100,
      soldOut: 400,
      other: 0,
    });
    const view = (await get(`${urls[2]}/products/${id}`)).body as {
      stock: number;
      sold: number;
      slices: number[];
    };
    // No oversell: every slice at exactly zero, and the sales add up.
    expect(view).toMatchObject({ stock: 0, sold: 1_100, slices: Array(10).fill(0) });
  }, 120_000);

  it('sells again within a second of a restock, on every instance, without a restart', async () => {
    const pids = cluster.instances.map((i) => i.pid);
    // Every instance has just learned that the slices are exhausted.
    for (const url of urls) {
      const r = await post(`${url}/products/${id}/purchase?mode=segmented`, { quantity: 1 });
      expect(r.status).toBe(409);
    }
    const restocked = await post(`${urls[0]}/products`, { id, stock: 30 });
    expect(restocked.status).toBe(200);
    const restockedAt = Date.now();

    // Each instance sells again; the others forget their exhausted slices within 1 s.
    const firstSale = await Promise.all(
      urls.map(async (url) => {
        for (let attempt = 0; attempt < 100; attempt++) {
          const r = await post(`${url}/products/${id}/purchase?mode=segmented`, { quantity: 1 });
          if (r.status === 201) return Date.now() - restockedAt;
          expect(r.status).toBe(409);
          await sleep(50);
        }
        return Infinity;
      }),
    );
    expect(Math.max(...firstSale)).toBeLessThan(1_000 + 500);
    expect(cluster.instances.map((i) => i.pid)).toEqual(pids);
  }, 30_000);
});
