import { Controller, Get, Module } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { RedlockHealthIndicator, RedlockHealthModule } from 'nest-locked/health';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redlock: RedlockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.redlock.isHealthy('redlock')]);
  }
}

/** The module a user adds for health: Terminus, the indicator and a `/health` controller. */
@Module({ imports: [TerminusModule, RedlockHealthModule], controllers: [HealthController] })
export class HealthModule {}
