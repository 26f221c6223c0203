import { Redis } from 'ioredis';
import { type RedisServerHandle, useRedis } from './redis-server';
import { killWorkers } from './workers';

/**
 * The usual frame of a spec file: one redis-server (or the server REDIS_URL names) and a plain
 * client to inspect it, started before the file's tests; worker processes, the client and the
 * server stopped after them. `use` receives both once they are up.
 */
export function redisForFile(use: (server: RedisServerHandle, redis: Redis) => void): void {
  let server: RedisServerHandle | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    server = await useRedis();
    redis = new Redis(server.url);
    use(server, redis);
  });
  afterAll(async () => {
    await killWorkers();
    redis?.disconnect();
    await server?.stop();
  });
}
