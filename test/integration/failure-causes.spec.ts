import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  LockBackendError,
  LockConfigError,
  LockService,
  RedlockModule,
  type RedlockModuleOptions,
} from 'nest-locked';
import { RedlockHealthIndicator, RedlockHealthModule } from 'nest-locked/health';
import { createLockApp, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';

jest.setTimeout(30_000);

/** A lock call's error, whatever it is. */
const failure = (call: Promise<unknown>): Promise<unknown> =>
  call.then(
    () => {
      throw new Error('the call should have failed');
    },
    (error: unknown) => error,
  );

/** Issue 26, items 4-5: a failure names its cause, never "Stream isn't writeable". */
describe('what a failed lock call says', () => {
  let server: RedisServerHandle;
  let warn: jest.SpyInstance;
  beforeAll(async () => {
    server = await startRedisServer();
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterAll(async () => {
    warn.mockRestore();
    await server?.stop();
  });

  it('a testing module compiled but not initialised: "call app.init()", not a Redis failure', async () => {
    const options: RedlockModuleOptions = {
      clients: [server.url],
      keyPrefix: uniquePrefix('no-init'),
    };
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot(options)],
    }).compile();
    try {
      const locks = moduleRef.get(LockService);
      const error = await failure(locks.using('coupon:1', () => 'issued'));
      expect(error).toBeInstanceOf(LockConfigError);
      expect((error as Error).message).toContain('was not initialised');
      expect((error as Error).message).toContain('app.init()');
      expect((error as Error).message).not.toMatch(/Redis|writeable/);
      // Once initialised, the same module locks.
      await moduleRef.init();
      await expect(locks.using('coupon:1', () => 'issued')).resolves.toBe('issued');
    } finally {
      await moduleRef.close();
    }
  });

  describe('a wrong password', () => {
    beforeAll(async () => {
      // Set after start: the harness checks the server with a PING that has no password.
      const admin = new Redis(server.url);
      await admin.config('SET', 'requirepass', 'right');
      admin.disconnect();
    });

    it("every call's error, its failures and cause, and the health indicator name WRONGPASS", async () => {
      const url = `redis://:wrong@127.0.0.1:${server.port}`;
      const app = await createLockApp({
        options: { clients: [url], commandTimeout: 500 },
        imports: [RedlockHealthModule],
      });
      try {
        const locks = app.get(LockService);
        for (let i = 0; i < 2; i++) {
          const error = await failure(locks.using('coupon:1', () => 'issued'));
          expect(error).toBeInstanceOf(LockBackendError);
          const { message, failures, cause } = error as LockBackendError;
          expect(message).toMatch(/WRONGPASS|invalid password/);
          expect(message).toContain('refused the user or password');
          expect(message).toContain(
            'Check the user and password of the lock backend (its options or URL).',
          );
          expect(message).not.toContain('reachable');
          expect(message).not.toContain("Stream isn't writeable");
          expect(failures.map((f) => f.message).join()).toMatch(/WRONGPASS|invalid password/);
          expect(String((cause as Error).message)).toMatch(/WRONGPASS|invalid password/);
        }
        const health = await app.get(RedlockHealthIndicator).isHealthy();
        const node = health.redlock.groups.default.nodes[0];
        expect(node.status).toBe('down');
        expect(node.error).toMatch(/WRONGPASS|invalid password/);
        expect(node.error).toContain('refused the user or password');
      } finally {
        await app.close();
      }
    });
  });
});
