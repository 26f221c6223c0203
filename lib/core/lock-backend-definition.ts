import type { LoggerService } from '@nestjs/common';
import type { LockBackend } from './lock-backend';

/** What the module gives a backend when it builds the lock engine of one group. */
export interface LockBackendContext {
  /** The group's name (`default`, or a key of `groups`). */
  readonly group: string;
  /** The module's `keyPrefix`: every name the backend writes starts with it. */
  readonly keyPrefix: string;
  /** The module's `driftFactor`: a lease counts as held for `ttl - (ttl * driftFactor + 2)` ms. */
  readonly driftFactor: number;
  /** The module's `commandTimeout`: the longest one round trip to the backend may take, in ms. */
  readonly commandTimeout: number;
  /** The module's logger (context `nest-locked`). */
  readonly logger: LoggerService;
}

/** Shared holds a backend can give (PRODUCT 2.7); asking another one is a `LockConfigError`. */
export interface LockBackendSupports {
  /** `mode: 'read'`. */
  readonly read: boolean;
  /** `permits: N` with N >= 2. */
  readonly permits: boolean;
}

/**
 * A lock backend, as a backend factory builds it (`postgresBackend(...)` from
 * `nest-locked/postgres`, `mysqlBackend(...)`, `etcdBackend(...)`, `zookeeperBackend(...)`), or
 * the module's own `'memory'`; Redis groups (`clients`) are built into one too. Give it as a
 * group's `backend`:
 *
 * @example
 * ```ts
 * import { postgresBackend } from 'nest-locked/postgres';
 *
 * RedlockModule.forRoot({ backend: postgresBackend({ connectionString: process.env.DATABASE_URL }) });
 * ```
 */
export interface LockBackendDefinition {
  /** The system's name, for logs, health and errors: `postgres`, `mysql`, `etcd`, ... */
  readonly kind: string;
  readonly supports: LockBackendSupports;
  /**
   * Builds the lock engine of one group; called once per group when the module starts.
   * @internal
   */
  create(context: LockBackendContext): LockBackend;
}
