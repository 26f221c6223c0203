export { RedlockModule } from './module/redlock.module';
export { Locked } from './api/locked.decorator';
export { LockService, type LockStats } from './api/lock.service';
export {
  LOCK_NEST_EVENTS,
  type LockAcquiredEvent,
  type LockBusyEvent,
  type LockErrorEvent,
  type LockEventBase,
  type LockEventName,
  type LockHoldEvent,
  type LockLostEvent,
  type LockOrderEvent,
  type LockReleasedEvent,
  type LockServiceEvents,
} from './api/lock-events';
export { LOCK_METRICS } from './api/lock-metrics';
export { LockContext } from './api/lock-context';
export { InjectRedlock, getRedlockToken } from './module/inject-redlock.decorator';
export {
  LockInterceptor,
  type LockErrorBody,
  type LockErrorMapping,
} from './api/error-mapping.interceptor';
export type { KeySource } from './keys';
export * from './errors';
export * from './interfaces';
