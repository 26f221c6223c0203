import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { LockConfigError, RedlockModule, type RedlockModuleOptions } from '../../lib';
import { RESOLVED_OPTIONS } from '../../lib/redlock.constants';
import { REDLOCK_MODULE_OPTIONS } from '../../lib/module/redlock.module-definition';
import type { ResolvedRedlockOptions } from '../../lib/options/redlock-options';

/**
 * What reaches the options provider under forRoot and forRootAsync, through Nest's own DI.
 * The client is an instance we own and never connect, so no Redis is needed.
 */
describe('RedlockModule options', () => {
  const redis = new Redis({ lazyConnect: true });
  afterAll(() => redis.disconnect());

  async function compile(module: ReturnType<typeof RedlockModule.forRoot>) {
    const ref = await Test.createTestingModule({ imports: [module] }).compile();
    const options = ref.get<ResolvedRedlockOptions>(RESOLVED_OPTIONS);
    await ref.close();
    return options;
  }

  async function compileError(module: ReturnType<typeof RedlockModule.forRoot>) {
    return Test.createTestingModule({ imports: [module] })
      .compile()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
  }

  it('forRoot: isGlobal is read by the module definition and never reaches the options', () => {
    const module = RedlockModule.forRoot({ isGlobal: false, ttl: 1_000, clients: [redis] });
    expect(module.global).toBe(false);
    const provider = module.providers?.find(
      (p) => typeof p === 'object' && 'provide' in p && p.provide === REDLOCK_MODULE_OPTIONS,
    ) as { useValue: object };
    expect(provider.useValue).toEqual({ ttl: 1_000, clients: [redis] });
  });

  it('forRootAsync validates what its factory returns', async () => {
    const options = await compile(
      RedlockModule.forRootAsync({ useFactory: () => ({ ttl: 1_000, clients: [redis] }) }),
    );
    expect(options.ttl).toBe(1_000);

    const error = await compileError(
      RedlockModule.forRootAsync({
        useFactory: () => ({ tll: 1_000, clients: [redis] }) as RedlockModuleOptions,
      }),
    );
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as Error).message).toBe(
      'Unknown option "tll" in the options returned by the RedlockModule.forRootAsync factory; ' +
        'did you mean "ttl"?',
    );
  });

  it('forRootAsync: isGlobal returned by the factory would be ignored, so it is refused', async () => {
    const module = RedlockModule.forRootAsync({
      useFactory: () => ({ isGlobal: false, clients: [redis] }) as RedlockModuleOptions,
    });
    expect(module.global).toBe(true);
    const error = await compileError(module);
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as LockConfigError).field).toBe('isGlobal');
  });

  it('forRootAsync: isGlobal beside the factory makes the module local', async () => {
    const module = RedlockModule.forRootAsync({
      isGlobal: false,
      useFactory: () => ({ clients: [redis] }),
    });
    expect(module.global).toBe(false);
    expect((await compile(module)).groups.default).toEqual([redis]);
  });
});

describe('RedlockModule.forRootAsync factory results that are not an object', () => {
  it.each([
    ['undefined (a factory without return)', undefined],
    ['null', null],
  ])('%s is a LockConfigError', async (_label, value) => {
    const error = await Test.createTestingModule({
      imports: [RedlockModule.forRootAsync({ useFactory: () => value as never })],
    })
      .compile()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(LockConfigError);
    expect((error as Error).message).toMatch(
      /^The options returned by the RedlockModule\.forRootAsync factory must be an object/,
    );
  });
});
