/**
 * ioredis is an optional peer: an app without it loads the library, and only a Redis group asks
 * for it, with a LockConfigError that says to install it. ioredis is made "not installed" here
 * the way Node reports it (MODULE_NOT_FOUND naming it); each case loads the library afresh.
 */
function withoutIoredis<T>(load: () => T): T {
  let loaded: T | undefined;
  jest.isolateModules(() => {
    for (const name of ['ioredis', 'ioredis/built/utils']) {
      jest.doMock(name, () => {
        throw Object.assign(new Error(`Cannot find module '${name}' from 'test'`), {
          code: 'MODULE_NOT_FOUND',
        });
      });
    }
    loaded = load();
  });
  return loaded as T;
}

/** A module of the library, loaded inside `withoutIoredis` (a static import would load it once). */
function fresh<T>(path: string): T {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(path) as T;
}

afterEach(() => jest.dontMock('ioredis'));

describe('without ioredis installed', () => {
  it('the library loads, and a group on another backend resolves', () => {
    const options = withoutIoredis(() => {
      const lib = fresh<typeof import('../../lib')>('../../lib');
      expect(typeof lib.RedlockModule).toBe('function');
      const { resolveRedlockOptions } = fresh<typeof import('../../lib/options/redlock-options')>(
        '../../lib/options/redlock-options',
      );
      return resolveRedlockOptions({ backend: 'memory' });
    });
    expect(options.backends.default.kind).toBe('memory');
  });

  it('a Redis node named by a URL fails with a LockConfigError that says to install it', () => {
    const error = withoutIoredis(() => {
      const { resolveRedlockOptions } = fresh<typeof import('../../lib/options/redlock-options')>(
        '../../lib/options/redlock-options',
      );
      try {
        resolveRedlockOptions({ clients: ['redis://127.0.0.1:6379'] });
      } catch (err) {
        return err as Error;
      }
      return undefined;
    });
    expect(error?.name).toBe('LockConfigError');
    expect(error?.message).toMatch(/clients\.default\[0\].*"ioredis" package.*npm install ioredis/);
  });

  it('a Redis node given as options fails the same way when its group is built', () => {
    const error = withoutIoredis(() => {
      const { redisBackend } = fresh<typeof import('../../lib/redis/redis-backend')>(
        '../../lib/redis/redis-backend',
      );
      const definition = redisBackend({ nodes: [{ host: '127.0.0.1' }], localHandoffs: 4, ttl: 1 });
      try {
        definition.create({
          group: 'default',
          keyPrefix: 'k:',
          driftFactor: 0.01,
          commandTimeout: 1_000,
          logger: { log: () => undefined, warn: () => undefined, error: () => undefined },
        });
      } catch (err) {
        return err as Error;
      }
      return undefined;
    });
    expect(error?.name).toBe('LockConfigError');
    expect(error?.message).toMatch(/"ioredis" package/);
  });
});
