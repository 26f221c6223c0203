/** @internal */
export const DEFAULT_CLIENT = 'default';

/** Where the module connects when `clients` is left out and REDIS_URL is unset. @internal */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * The longest delay a Node.js timer takes: 2^31-1 ms (about 24.8 days). A longer one fires after
 * 1 ms instead (with a TimeoutOverflowWarning), so every option that ends up in a timer is
 * capped here.
 * @internal
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The defaults of every option, in one frozen place, merged once in `resolveRedlockOptions` so
 * `forRoot` and `forRootAsync` agree.
 * @internal
 */
export const DEFAULT_OPTIONS = Object.freeze({
  keyPrefix: 'lock:',
  ttl: 30_000,
  watchdog: true,
  maxHold: Infinity,
  waitTimeout: 5_000,
  replicaAcks: 0,
  replicaAckTimeout: 1_000,
  busyStatus: 409,
  interceptor: true,
  driftFactor: 0.01,
  localHandoffs: 4,
  commandTimeout: 2_000,
  telemetry: 'auto' as boolean | 'auto',
  lockOrder: 'warn' as 'off' | 'warn' | 'throw',
  holderReportAfter: 10_000,
});

/** Metadata key written by `@Locked` on the wrapped method. @internal */
export const LOCKED_METADATA = 'nest-locked:locked';

/** Property under which `@Locked` injects the LockService into the host instance. @internal */
export const LOCK_SERVICE_PROPERTY = Symbol('nest-locked:lockService');

/** Token of the validated, defaults-merged options. @internal */
export const RESOLVED_OPTIONS = Symbol('nest-locked:resolvedOptions');

/** How long a slice that threw SegmentExhaustedError is skipped before being retried. @internal */
export const SEGMENT_EXHAUSTED_MS = 1_000;
