export { RedlockModule } from './redlock.module';
export { Locked } from './locked.decorator';
export {
  LockService,
  type LockLostEvent,
  type LockServiceEvents,
  type LockStats,
} from './lock.service';
export { LockContext } from './lock-context';
export { InjectRedlock, getRedlockToken } from './inject-redlock.decorator';
export { LockInterceptor, type LockErrorMapping } from './lock.interceptor';
export type { KeySource } from './key-template';
export * from './errors';
export * from './interfaces';
