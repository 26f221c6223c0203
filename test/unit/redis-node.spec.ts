import { Cluster, Redis } from 'ioredis';
import { isCluster, isRedisInstance } from '../../lib/redis/protocol/redis-node';

describe('redis-node', () => {
  const redis = new Redis({ lazyConnect: true });
  const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
  afterAll(() => {
    redis.disconnect();
    cluster.disconnect();
  });

  it('recognises Redis and Cluster instances', () => {
    expect(isRedisInstance(redis)).toBe(true);
    expect(isRedisInstance(cluster)).toBe(true);
  });

  it('recognises an instance of another ioredis copy by the commands the engine calls', () => {
    const foreign = { evalsha: () => undefined, duplicate: () => undefined, status: 'wait' };
    expect(isRedisInstance(foreign)).toBe(true);
  });

  it.each([
    ['a URL', 'redis://127.0.0.1:6379'],
    ['RedisOptions', { host: '127.0.0.1', port: 6379 }],
    ['Sentinel options', { sentinels: [{ host: 'a', port: 26379 }], name: 'mymaster' }],
    ['null', null],
    ['a function', () => undefined],
  ])('does not take %s for an instance', (_label, value) => {
    expect(isRedisInstance(value)).toBe(false);
  });

  it('tells a Cluster from a single node', () => {
    expect(isCluster(cluster)).toBe(true);
    expect(isCluster(redis)).toBe(false);
  });
});
