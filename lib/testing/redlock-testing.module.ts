import { type DynamicModule, Module } from '@nestjs/common';
import { LOCK_BACKEND_FACTORY } from '../module/lock-group.registry';
import { RedlockModule } from '../module/redlock.module';
import { InMemoryBackends, RedlockTestingController } from './redlock-testing.controller';
import { redlockOptionsForTest, type RedlockTestingModuleOptions } from './redlock-testing.options';

/**
 * `RedlockModule` for unit tests, with the locks in this process's memory: no Redis, no
 * connection. The real `@Locked` decorator, key templates, reentrancy, `LockContext`,
 * `LockService` and `LockInterceptor` run over an in-memory backend with the semantics of the
 * Redis engine (exclusion per key, `waitTimeout` with FIFO waiters, fences increasing per key,
 * several keys all or nothing, leases with `ttl` renewed by the watchdog, segmented keys).
 * `RedlockTestingController` makes a key busy, the backend down, or a held lock lost.
 *
 * For users' unit tests: it proves the code's use of the locks, not Redis. Global, like
 * `RedlockModule`, unless `isGlobal: false`.
 *
 * @example
 * ```ts
 * import { RedlockTestingModule, RedlockTestingController } from 'nest-locked/testing';
 *
 * const moduleRef = await Test.createTestingModule({
 *   imports: [RedlockTestingModule.forRoot({ waitTimeout: 100 })],
 *   providers: [ProductService],
 * }).compile();
 * await moduleRef.init();
 * ```
 * @publicApi
 */
@Module({})
export class RedlockTestingModule {
  static forRoot(options: RedlockTestingModuleOptions = {}): DynamicModule {
    // RedlockModule itself, so the providers are the production ones; only the backend each
    // group gets differs.
    const base = RedlockModule.forRoot(redlockOptionsForTest(options));
    return {
      ...base,
      providers: [
        ...(base.providers ?? []),
        InMemoryBackends,
        {
          provide: LOCK_BACKEND_FACTORY,
          useFactory: (backends: InMemoryBackends) => backends.factory,
          inject: [InMemoryBackends],
        },
        RedlockTestingController,
      ],
      exports: [...(base.exports ?? []), RedlockTestingController],
    };
  }
}
