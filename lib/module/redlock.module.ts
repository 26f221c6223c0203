import {
  type CallHandler,
  type DynamicModule,
  Module,
  type NestInterceptor,
  type Provider,
} from '@nestjs/common';
import { APP_INTERCEPTOR, DiscoveryModule, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { getRedlockToken, requestedRedlockNames } from './inject-redlock.decorator';
import { LockGroupRegistry } from './lock-group.registry';
import { LockExplorer } from './lock.explorer';
import { bindToMessageHandlers } from './message-handler-binding';
import { LockGroups } from '../api/lock-groups';
import { LockInterceptor } from '../api/error-mapping.interceptor';
import { LockService } from '../api/lock.service';
import {
  type ModuleOptionsOrigin,
  resolveRedlockOptions,
  type ResolvedRedlockOptions,
} from '../options/redlock-options';
import { RESOLVED_OPTIONS } from '../redlock.constants';
import {
  ASYNC_OPTIONS_TYPE,
  ConfigurableModuleClass,
  OPTIONS_TYPE,
  REDLOCK_MODULE_OPTIONS,
} from './redlock.module-definition';

const passThrough: NestInterceptor = { intercept: (_ctx, next: CallHandler) => next.handle() };

/**
 * Distributed locks on Redis for NestJS. Import once, in the root module; it is global unless
 * `isGlobal: false`.
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [
 *     RedlockModule.forRoot({ clients: ['redis://127.0.0.1:6379'], ttl: 10_000 }),
 *     // or: RedlockModule.forRootAsync({ inject: [ConfigService],
 *     //   useFactory: (c: ConfigService) => ({ clients: [c.get('REDIS_URL')] }) }),
 *   ],
 * })
 * export class AppModule {}
 * ```
 * @publicApi
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    LockGroupRegistry,
    { provide: LockGroups, useExisting: LockGroupRegistry },
    LockService,
    LockExplorer,
  ],
  // The registry for nest-locked/health (RedlockHealthIndicator); not part of the public API.
  exports: [LockService, RESOLVED_OPTIONS, LockGroupRegistry],
})
export class RedlockModule extends ConfigurableModuleClass {
  static override forRoot(options: typeof OPTIONS_TYPE = {}): DynamicModule {
    return RedlockModule.withProviders(super.forRoot(options), options.isGlobal, 'forRoot');
  }

  static override forRootAsync(options: typeof ASYNC_OPTIONS_TYPE): DynamicModule {
    return RedlockModule.withProviders(
      super.forRootAsync(options),
      options.isGlobal,
      'forRootAsync',
    );
  }

  private static withProviders(
    module: DynamicModule,
    isGlobal: boolean | undefined,
    origin: ModuleOptionsOrigin,
  ): DynamicModule {
    const redlocks: Provider[] = requestedRedlockNames().map((name) => ({
      provide: getRedlockToken(name),
      useFactory: (registry: LockGroupRegistry) => registry.redlock(name),
      inject: [LockGroupRegistry],
    }));
    return {
      ...module,
      // Applied here rather than trusted to the builder's extras, which older Nest versions
      // mixed up under forRootAsync (nestjs/nest#13372, #15661).
      global: isGlobal ?? true,
      providers: [
        ...(module.providers ?? []),
        {
          provide: RESOLVED_OPTIONS,
          useFactory: (options: unknown) => resolveRedlockOptions(options, origin),
          inject: [REDLOCK_MODULE_OPTIONS],
        },
        {
          provide: APP_INTERCEPTOR,
          useFactory: (
            options: ResolvedRedlockOptions,
            discovery: DiscoveryService,
            scanner: MetadataScanner,
          ) => {
            const interceptor = options.interceptor ? new LockInterceptor(options) : undefined;
            // Gateways and a hybrid app's microservice: global interceptors reach neither.
            bindToMessageHandlers(interceptor, discovery, scanner, LockInterceptor);
            return interceptor ?? passThrough;
          },
          inject: [RESOLVED_OPTIONS, DiscoveryService, MetadataScanner],
        },
        ...redlocks,
      ],
      exports: [
        ...(module.exports ?? []),
        ...redlocks.map((p) => (p as { provide: string }).provide),
      ],
    };
  }
}
