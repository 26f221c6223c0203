import * as net from 'node:net';
import Redis, { Cluster } from 'ioredis';
import {
  type RedisServerHandle,
  startRedisCluster,
  startRedisServer,
  startRedisServers,
  stopAll,
  useRedis,
} from '../support/redis-server';

jest.setTimeout(30_000);

/** Resolves with the connect error code, or 'connected'. */
function connectOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function ping(server: RedisServerHandle): Promise<string> {
  const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await client.connect();
    return await client.ping();
  } finally {
    client.disconnect();
  }
}

describe('redis-server test harness', () => {
  describe('startRedisServer', () => {
    it('serves commands, and after stop() its port refuses connections and its PID is gone', async () => {
      const server = await startRedisServer();
      const pid = server.pid;
      expect(pid).toEqual(expect.any(Number));
      expect(server).toMatchObject({ host: '127.0.0.1', external: false });
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);

      const client = new Redis(server.url);
      try {
        await client.set('harness:key', 'value');
        await expect(client.get('harness:key')).resolves.toBe('value');
      } finally {
        client.disconnect();
      }

      await server.stop();
      await server.stop();
      expect(server.pid).toBeUndefined();
      expect(processExists(pid as number)).toBe(false);
      await expect(connectOutcome(server.port)).resolves.toBe('ECONNREFUSED');
    });
  });

  describe('startRedisServers', () => {
    let servers: RedisServerHandle[] = [];

    afterAll(() => stopAll(servers));

    it('starts servers on distinct ports; restart() brings a killed one back on its port', async () => {
      servers = await startRedisServers(3);
      expect(new Set(servers.map((server) => server.port)).size).toBe(3);

      const [victim, ...survivors] = servers;
      const oldPid = victim.pid as number;
      victim.kill();
      await victim.stop();
      expect(processExists(oldPid)).toBe(false);
      await expect(connectOutcome(victim.port)).resolves.toBe('ECONNREFUSED');
      for (const survivor of survivors) await expect(ping(survivor)).resolves.toBe('PONG');

      await victim.restart();
      expect(victim.pid).toEqual(expect.any(Number));
      expect(victim.pid).not.toBe(oldPid);
      await expect(ping(victim)).resolves.toBe('PONG');
    });
  });

  describe('useRedis', () => {
    const savedUrl = process.env.REDIS_URL;

    afterEach(() => {
      if (savedUrl === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = savedUrl;
    });

    it('uses the server REDIS_URL names and will not kill or restart it', async () => {
      const server = await startRedisServer();
      try {
        process.env.REDIS_URL = `redis://localhost:${server.port}`;
        const external = await useRedis();
        expect(external).toMatchObject({ port: server.port, external: true, pid: undefined });
        await expect(ping(external)).resolves.toBe('PONG');
        expect(() => external.kill()).toThrow(/REDIS_URL/);
        await expect(external.restart()).rejects.toThrow(/REDIS_URL/);
        await external.stop();
        await expect(ping(server)).resolves.toBe('PONG');
      } finally {
        await server.stop();
      }
    });

    it('refuses a REDIS_URL that is not on the loopback interface', async () => {
      process.env.REDIS_URL = 'redis://redis.example.com:6379';
      await expect(useRedis()).rejects.toThrow(/loopback/);
    });
  });

  describe('startRedisCluster', () => {
    it('serves keys from every slot range through ioredis Cluster, also after a node restart', async () => {
      const cluster = await startRedisCluster(3);
      const client = new Cluster(cluster.startupNodes);
      try {
        // CLUSTER KEYSLOT: product:1 -> 0, product:3 -> 8258, product:2 -> 12387, one per master.
        const keys = ['product:1', 'product:2', 'product:3'];
        for (const key of keys) await client.set(key, `value of ${key}`);
        for (const key of keys) await expect(client.get(key)).resolves.toBe(`value of ${key}`);

        const perNode = await Promise.all(
          cluster.nodes.map(async (node) => {
            const nodeClient = new Redis(node.url);
            try {
              return await nodeClient.dbsize();
            } finally {
              nodeClient.disconnect();
            }
          }),
        );
        expect(perNode).toEqual([1, 1, 1]);

        // A restarted node keeps its slots but not its data (nothing is persisted).
        cluster.nodes[1].kill();
        await cluster.nodes[1].restart();
        await client.set('product:3', 'after restart');
        await expect(client.get('product:3')).resolves.toBe('after restart');
      } finally {
        client.disconnect();
        await cluster.stop();
      }
      for (const node of cluster.nodes) {
        await expect(connectOutcome(node.port)).resolves.toBe('ECONNREFUSED');
      }
    });
  });
});
