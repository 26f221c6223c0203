import { Module } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { RedlockHealthIndicator } from './redlock-health.indicator';

/**
 * Provides {@link RedlockHealthIndicator}. Import it beside `TerminusModule` in the module of
 * your health controller; `RedlockModule` must be global (its default).
 *
 * @example
 * ```ts
 * @Module({ imports: [TerminusModule, RedlockHealthModule], controllers: [HealthController] })
 * export class HealthModule {}
 * ```
 * @publicApi
 */
@Module({
  // Terminus's HealthIndicatorService is stateless: an instance of our own, rather than making
  // users import TerminusModule into this module.
  providers: [HealthIndicatorService, RedlockHealthIndicator],
  exports: [RedlockHealthIndicator],
})
export class RedlockHealthModule {}
