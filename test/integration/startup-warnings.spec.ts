import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { etcdBackend } from 'nest-locked/etcd';
import { postgresBackend } from 'nest-locked/postgres';
import { createLockApp, uniquePrefix, within } from '../support/lock-app';
import { closedPort, type RedisServerHandle, startRedisServer } from '../support/redis-server';

jest.setTimeout(30_000);

describe('what startup tells about the lock servers', () => {
  let warn: jest.SpyInstance;
  const warnings = (): string[] => warn.mock.calls.map((c: unknown[]) => String(c[0]));

  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => warn.mockRestore());

  describe('a backend nobody listens for', () => {
    it('names the refused address and what to check, no lock, no doubled period', async () => {
      const port = await closedPort();
      const backends = [
        postgresBackend({ host: '127.0.0.1', port, user: 'u', password: 'p', database: 'd' }),
        etcdBackend({ hosts: `127.0.0.1:${port}` }),
      ];
      for (const backend of backends) {
        warn.mockClear();
        const app = await createLockApp({ options: { backend, keyPrefix: uniquePrefix('down') } });
        await app.close();
        const [found] = warnings().filter((w) => w.includes('not reachable at startup'));
        expect(found).toContain(`127.0.0.1:${port}`);
        expect(found).toMatch(/ECONNREFUSED/);
        expect(found).toMatch(/running and listening at that address\. Locks fail/);
        expect(found).not.toMatch(/lock\s*:/);
        expect(found).not.toMatch(/[.?!]\./);
      }
    });
  });

  describe('a server that can evict keys', () => {
    let server: RedisServerHandle;
    beforeAll(async () => {
      server = await startRedisServer({
        args: ['--maxmemory', '100mb', '--maxmemory-policy', 'allkeys-lru'],
      });
    });
    afterAll(() => server?.stop());

    it('warns once at startup, naming the policy and the safe one', async () => {
      const app = await createLockApp({
        options: { clients: [server.url], keyPrefix: uniquePrefix('evict') },
      });
      await app.close();
      const found = warnings().filter((w) => w.includes('maxmemory-policy allkeys-lru'));
      expect(found).toHaveLength(1);
      expect(found[0]).toContain('noeviction');
    });
  });

  describe('a server that cannot evict', () => {
    let server: RedisServerHandle;
    beforeAll(async () => {
      server = await startRedisServer({
        args: ['--maxmemory', '100mb', '--maxmemory-policy', 'noeviction'],
      });
    });
    afterAll(() => server?.stop());

    it('says nothing about eviction', async () => {
      const app = await createLockApp({
        options: { clients: [server.url], keyPrefix: uniquePrefix('noevict') },
      });
      await app.close();
      expect(warnings().filter((w) => w.includes('maxmemory'))).toEqual([]);
    });
  });

  it('every sentinel unreachable: startup goes on within a bounded time, the cause logged', async () => {
    const port = await closedPort();
    const app = await within(
      createLockApp({
        options: {
          clients: [{ sentinels: [{ host: '127.0.0.1', port }], name: 'mymaster' }],
          commandTimeout: 1_000,
        },
      }),
      10_000,
      'startup with every sentinel unreachable',
    );
    await app.close();
    expect(
      warnings().some((w) => /not connected to Redis yet: .*(ECONNREFUSED|sentinel)/i.test(w)),
    ).toBe(true);
  });

  describe('a wrong password', () => {
    let server: RedisServerHandle;
    beforeAll(async () => {
      server = await startRedisServer();
      // Set after start: the harness checks the server with a PING that has no password.
      const admin = new Redis(server.url);
      await admin.config('SET', 'requirepass', 'right');
      admin.disconnect();
    });
    afterAll(() => server?.stop());

    it('logs the real cause at WARN with what to fix, not "Connection is closed" or "cannot reach"', async () => {
      const url = `redis://:wrong@127.0.0.1:${server.port}`;
      const app = await createLockApp({ options: { clients: [url], commandTimeout: 500 } });
      await app.close();
      const found = warnings().filter((w) => w.includes('Lock group "default"'));
      expect(found).toHaveLength(1);
      expect(found[0]).toContain(`Redis at 127.0.0.1:${server.port} refused the user or password`);
      expect(found[0]).toMatch(/WRONGPASS/);
      expect(found[0]).toContain(
        'Check the user and password of the lock backend (its options or URL).',
      );
      expect(found[0]).not.toMatch(/cannot reach|\.\./);
    });

    it('no password given: the warning says the server wants one and where to put it', async () => {
      const url = `redis://127.0.0.1:${server.port}`;
      const app = await createLockApp({ options: { clients: [url], commandTimeout: 500 } });
      await app.close();
      const found = warnings().filter((w) => w.includes('Lock group "default"'));
      expect(found).toHaveLength(1);
      expect(found[0]).toContain(
        `Redis at 127.0.0.1:${server.port} requires a password and none was given`,
      );
      expect(found[0]).toMatch(/NOAUTH/);
      expect(found[0]).toContain('redis://:password@host:port');
      expect(found[0]).not.toMatch(/cannot reach|\.\./);
    });
  });
});
