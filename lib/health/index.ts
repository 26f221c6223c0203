// The `nest-locked/health` entry point: only this file loads @nestjs/terminus.
export {
  RedlockHealthIndicator,
  type RedlockGroupHealth,
  type RedlockHealthCheckOptions,
  type RedlockHealthDetails,
  type RedlockNodeHealth,
} from './redlock-health.indicator';
export { RedlockHealthModule } from './redlock-health.module';
