import { Cluster, Redis } from 'ioredis';
import { LockConfigError, type RedlockClientEntry, type RedlockModuleOptions } from '../../lib';
import { resolveRedlockOptions } from '../../lib/options/redlock-options';

describe('resolveRedlockOptions', () => {
  it('applies the documented defaults', () => {
    const o = resolveRedlockOptions({ clients: ['redis://127.0.0.1:1'] });
    expect(o).toMatchObject({
      keyPrefix: 'lock:',
      ttl: 30_000,
      watchdog: true,
      maxHold: Infinity,
      waitTimeout: 5_000,
      busyStatus: 409,
      interceptor: true,
    });
    expect(o.groups).toEqual({ default: ['redis://127.0.0.1:1'] });
  });

  it('falls back to REDIS_URL, then to the local default server', () => {
    const saved = process.env.REDIS_URL;
    try {
      process.env.REDIS_URL = 'redis://127.0.0.1:7777';
      expect(resolveRedlockOptions().groups.default).toEqual(['redis://127.0.0.1:7777']);
      delete process.env.REDIS_URL;
      expect(resolveRedlockOptions().groups.default).toEqual(['redis://127.0.0.1:6379']);
    } finally {
      if (saved === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = saved;
    }
  });

  it('accepts named groups', () => {
    const o = resolveRedlockOptions({ clients: { default: ['redis://a'], orders: ['redis://b'] } });
    expect(Object.keys(o.groups)).toEqual(['default', 'orders']);
  });

  it.each([
    [{ ttl: 0 }, 'ttl'],
    [{ ttl: -1 }, 'ttl'],
    [{ ttl: Number.NaN }, 'ttl'],
    [{ waitTimeout: -1 }, 'waitTimeout'],
    [{ maxHold: -3 }, 'maxHold'],
    [{ busyStatus: 200 }, 'busyStatus'],
    [{ keyPrefix: 5 }, 'keyPrefix'],
    [{ clients: {} }, 'clients'],
    [{ clients: { orders: [] } }, 'clients.orders'],
    [{ clients: [''] }, 'clients.default[0]'],
    [{ driftFactor: 2 }, 'driftFactor'],
    [{ localHandoffs: -1 }, 'localHandoffs'],
  ])('rejects %j with LockConfigError naming %s and the value', (options, field) => {
    let error: unknown;
    try {
      resolveRedlockOptions(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toBe(field);
    expect((error as Error).message).toContain(`"${field}"`);
  });

  it('refuses driftFactor 0.5, and its message does not name 0.5 as accepted', () => {
    expect(() => resolveRedlockOptions({ driftFactor: 0.5 })).toThrow(
      /"driftFactor": got 0\.5, expected a number from 0 to less than 0\.5/,
    );
  });
});

describe('resolveRedlockOptions: unknown keys', () => {
  // The origin names where the options came from (forRoot, or a forRootAsync factory).
  const resolve = resolveRedlockOptions as (options: unknown, origin?: string) => unknown;
  function error(options: unknown, origin?: 'forRoot' | 'forRootAsync'): LockConfigError {
    try {
      resolve(options, origin);
    } catch (e) {
      expect(e).toBeInstanceOf(LockConfigError);
      return e as LockConfigError;
    }
    throw new Error(`accepted ${JSON.stringify(options)}`);
  }

  it('names the key and the nearest valid one', () => {
    const e = error({ tll: 5_000 });
    expect(e.field).toBe('tll');
    expect(e.message).toBe(
      'Unknown option "tll" in RedlockModule.forRoot options; did you mean "ttl"?',
    );
    expect(error({ waitTimout: 1 }).message).toContain('did you mean "waitTimeout"?');
    expect(error({ keyprefix: 'x' }).message).toContain('did you mean "keyPrefix"?');
    expect(error({ client: ['redis://a'] }).message).toContain('did you mean "clients"?');
  });

  it('names forRootAsync when the options came from its factory', () => {
    expect(error({ tll: 5_000 }, 'forRootAsync').message).toBe(
      'Unknown option "tll" in the options returned by the RedlockModule.forRootAsync factory; ' +
        'did you mean "ttl"?',
    );
  });

  it('says that a per-call option goes on @Locked or LockService.using', () => {
    const e = error({ segments: 4 });
    expect(e.field).toBe('segments');
    expect(e.message).toMatch(/"segments" is a per-call option.*@Locked.*LockService\.using/);
    expect(error({ onBusy: 'skip' }).message).toMatch(/per-call option/);
    // Not taken for its look-alike maxHold, which the module does take.
    expect(error({ minHold: 1_000 }).message).toMatch(/^"minHold" is a per-call option/);
  });

  it('takes isGlobal beside forRoot options (the module definition reads it), not from a factory', () => {
    const o = resolveRedlockOptions({ isGlobal: false, clients: ['redis://a'] } as never);
    expect(o).not.toHaveProperty('isGlobal');
    const e = error({ isGlobal: false }, 'forRootAsync');
    expect(e.field).toBe('isGlobal');
    expect(e.message).toMatch(/RedlockModule\.forRootAsync\(\{ isGlobal: false, useFactory/);
  });

  it('accepts every documented module key', () => {
    expect(() =>
      resolveRedlockOptions({
        clients: ['redis://a'],
        keyPrefix: 'l:',
        ttl: 1_000,
        watchdog: false,
        maxHold: 10_000,
        waitTimeout: 0,
        busyStatus: 423,
        interceptor: false,
        driftFactor: 0.02,
        localHandoffs: 0,
        commandTimeout: 500,
      }),
    ).not.toThrow();
  });
});

describe('resolveRedlockOptions: the longest Node.js timer', () => {
  const MAX = 2 ** 31 - 1;

  it.each(['ttl', 'waitTimeout', 'maxHold', 'commandTimeout'])(
    '%s: 2^31-1 passes, 2^31 is refused naming the maximum',
    (key) => {
      expect(resolveRedlockOptions({ [key]: MAX })[key as 'ttl']).toBe(MAX);
      let error: unknown;
      try {
        resolveRedlockOptions({ [key]: MAX + 1 });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(LockConfigError);
      expect((error as LockConfigError).field).toBe(key);
      expect((error as Error).message).toContain('got 2147483648');
      expect((error as Error).message).toContain('2147483647');
    },
  );

  it('maxHold: Infinity stays the default', () => {
    expect(resolveRedlockOptions({ maxHold: Infinity }).maxHold).toBe(Infinity);
  });
});

describe('resolveRedlockOptions: options that are not an object', () => {
  it.each([
    ['null', null],
    ['an array', []],
    ['a string', 'redis://a'],
  ])('module options that are %s are a LockConfigError', (_label, options) => {
    expect(() => resolveRedlockOptions(options as never)).toThrow(
      /^RedlockModule\.forRoot options must be an object/,
    );
  });
});

describe('resolveRedlockOptions: clients', () => {
  function error(options: RedlockModuleOptions): LockConfigError {
    try {
      resolveRedlockOptions(options);
    } catch (e) {
      expect(e).toBeInstanceOf(LockConfigError);
      return e as LockConfigError;
    }
    throw new Error(`accepted ${JSON.stringify(options)}`);
  }
  const entry = (value: unknown) => error({ clients: [value as RedlockClientEntry] });

  it('clients: null is an error; only a missing clients falls back to the local server', () => {
    const e = error({ clients: null as never });
    expect(e.field).toBe('clients');
    expect(e.message).toContain('got null');
    expect(e.message).toContain('REDIS_URL');
    expect(resolveRedlockOptions({ clients: undefined }).groups.default).toHaveLength(1);
  });

  it('a Redis instance given as clients (not in an array) says to wrap it', () => {
    const redis = new Redis({ lazyConnect: true });
    try {
      expect(error({ clients: redis as never }).message).toContain('clients: [redis]');
    } finally {
      redis.disconnect();
    }
  });

  // Each form accepted here is one ioredis reads as the node it names: checked on ioredis's own
  // parse of the string (no connection is made).
  it.each<[string, Record<string, unknown>]>([
    ['redis://127.0.0.1:6390', { host: '127.0.0.1', port: 6390, db: 0 }],
    ['redis://127.0.0.1:6390/2', { host: '127.0.0.1', port: 6390, db: 2 }],
    ['redis://127.0.0.1:6390/', { host: '127.0.0.1', port: 6390, db: 0 }],
    [
      'redis://user:p%40ss@db.example:6390/3',
      { host: 'db.example', username: 'user', password: 'p@ss', db: 3 },
    ],
    ['redis://:secret@db.example', { host: 'db.example', port: 6379, password: 'secret' }],
    ['redis://db.example:6390?family=6', { host: 'db.example', port: 6390, family: 6 }],
    ['redis://[::1]:6390', { host: '::1', port: 6390 }],
    ['rediss://db.example:6390', { host: 'db.example', port: 6390, tls: true }],
    ['db.example:6390', { host: 'db.example', port: 6390 }],
    ['db.example', { host: 'db.example', port: 6379 }],
    [
      'user:pw@db.example:6390',
      { host: 'db.example', port: 6390, username: 'user', password: 'pw' },
    ],
    ['[::1]:6390', { host: '::1', port: 6390 }],
    ['db.example:6390?db=3', { host: 'db.example', port: 6390, db: 3 }],
    ['6390', { host: 'localhost', port: 6390 }],
    ['/run/redis/redis.sock', { path: '/run/redis/redis.sock' }],
    ['/run/redis/redis.sock?db=2', { path: '/run/redis/redis.sock', db: 2 }],
    // Read by ioredis as the node they name, though written loosely.
    ['REDIS://db.example:6390', { host: 'db.example', port: 6390 }],
    ['//db.example:6390', { host: 'db.example', port: 6390 }],
    ['redis://db.example:6390\n', { host: 'db.example', port: 6390 }],
  ])('accepts %j', (url, expected) => {
    expect(resolveRedlockOptions({ clients: [url] }).groups.default).toEqual([url]);
    const redis = new Redis(url, { lazyConnect: true });
    try {
      expect(redis.options).toMatchObject(expected);
      if (!('path' in expected)) expect(redis.options).not.toHaveProperty('path');
      if (!('tls' in expected)) expect(redis.options.tls).toBeUndefined();
    } finally {
      redis.disconnect();
    }
  });

  // What ioredis does with each: throws TypeError: Invalid URL at construction, or connects
  // somewhere the string does not say.
  it.each<[string, RegExp]>([
    ['not a url', /not a Redis URL/], // TypeError: Invalid URL
    ['redis://db.example:abc', /not a Redis URL/], // TypeError: Invalid URL
    ['redis://db.example:70000', /not a Redis URL/], // TypeError: Invalid URL
    ['redis://db.example:0', /port/], // port 0
    ['redis://', /no host/], // localhost:6379
    ['redis:///2', /no host/], // localhost:6379, db 2
    ['redis://db.example/abc', /not a number/], // db null: database 0
    ['redis://db.example/1/2', /not a number/], // db "1/2" read as 1
    ['redis://db.example:6390?db=x', /not a number/], // db "x": SELECT fails
    ['REDISS://db.example:6390', /lower case/], // TLS silently off
    ['http://db.example:6390', /"http:\/\/"/], // host "http", unix socket "//db.example:6390"
    ['unix:///run/redis.sock', /\/run\/redis\.sock/], // host "unix" and socket "///run/redis.sock"
    ['db.example:6390/2', /redis:\/\/db\.example:6390\/2/], // unix socket "/2"
    [' redis://db.example:6390', /spaces/], // TypeError: Invalid URL
    ['::1', /not a Redis URL/], // TypeError: Invalid URL
    ['0', /port/], // port 0
    ['70000', /port/], // port 70000
  ])('rejects %j, naming the entry and the valid forms', (url, reason) => {
    const e = entry(url);
    expect(e.field).toBe('clients.default[0]');
    expect(e.message).toContain(JSON.stringify(url));
    expect(e.message).toMatch(reason);
    expect(e.message).toContain('redis://[user:password@]host[:port][/db]');
  });

  it('names the entry in a named group', () => {
    const e = error({ clients: { default: ['redis://a'], orders: ['redis://b', 'bad url'] } });
    expect(e.field).toBe('clients.orders[1]');
  });

  it('a bad REDIS_URL is named as such', () => {
    const saved = process.env.REDIS_URL;
    try {
      process.env.REDIS_URL = 'localhost:6379/0';
      const e = error({});
      expect(e.field).toBe('clients.default[0]');
      expect(e.message).toContain('REDIS_URL');
    } finally {
      if (saved === undefined) delete process.env.REDIS_URL;
      else process.env.REDIS_URL = saved;
    }
  });

  it.each<[string, unknown]>([
    ['RedisOptions', { host: 'db.example', port: 6390, password: 'x' }],
    ['a port given as a string', { port: '6390' }],
    ['Sentinel options', { sentinels: [{ host: 's1', port: 26379 }], name: 'mymaster' }],
    ['a Unix socket', { path: '/run/redis.sock' }],
    ['empty options (localhost:6379)', {}],
  ])('accepts %s', (_label, options) => {
    expect(() => resolveRedlockOptions({ clients: [options as RedlockClientEntry] })).not.toThrow();
  });

  it('accepts Redis and Cluster instances, also of another ioredis copy', () => {
    const redis = new Redis({ lazyConnect: true });
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    const foreign = { evalsha: () => undefined, duplicate: () => undefined };
    try {
      expect(() =>
        resolveRedlockOptions({ clients: [redis, cluster, foreign as never] }),
      ).not.toThrow();
    } finally {
      redis.disconnect();
      cluster.disconnect();
    }
  });

  it.each<[string, unknown, RegExp]>([
    ['an array (a nested group)', ['redis://a', 'redis://b'], /array/],
    ['a Promise', Promise.resolve({ host: 'a' }), /await/],
    ['a URL object', new URL('redis://db.example:6390'), /href/],
    ['a Map', new Map([['host', 'a']]), /RedisOptions/],
    [
      'a client of another library',
      { duplicate: () => undefined, sendCommand: () => undefined },
      /ioredis/,
    ],
    ['Sentinel options without name', { sentinels: [{ host: 's1', port: 26379 }] }, /name/],
    ['Sentinel options with no sentinel', { sentinels: [], name: 'mymaster' }, /sentinels/],
    ['a host that is not a string', { host: 5 }, /host/],
    ['a port that is not a port', { port: 'abc' }, /port/],
    ['a port out of range', { port: 70_000 }, /port/],
    ['a function', () => ({ host: 'a' }), /function/],
  ])('rejects %s', (_label, value, reason) => {
    const e = entry(value);
    expect(e.field).toMatch(/^clients\.default\[0\]/);
    expect(e.message).toMatch(reason);
  });
});
