import type { RedlockModuleOptions } from './redlock-module-options.interface';

/**
 * A class that builds the module's options, for `RedlockModule.forRootAsync({ useClass })` or
 * `{ useExisting }`: Nest instantiates it (with its own injections) and calls
 * `createRedlockOptions()` once, at startup.
 *
 * @example
 * ```ts
 * @Injectable()
 * export class RedlockConfig implements RedlockOptionsFactory {
 *   constructor(private readonly config: ConfigService) {}
 *
 *   createRedlockOptions(): RedlockModuleOptions {
 *     return { clients: this.config.getOrThrow<string>('REDIS_URLS').split(','), ttl: 10_000 };
 *   }
 * }
 *
 * RedlockModule.forRootAsync({ imports: [ConfigModule], useClass: RedlockConfig });
 * ```
 * @publicApi
 */
export interface RedlockOptionsFactory {
  createRedlockOptions(): RedlockModuleOptions | Promise<RedlockModuleOptions>;
}
