import type { LockBackend } from '../core/lock-backend';
import type { LockBackendDefinition } from '../core/lock-backend-definition';

/**
 * The lock client groups `LockService` calls, by name: what `api/` needs of the module's
 * `LockGroupRegistry`, which provides it. It lives here so that `module/` depends on `api/`
 * and not the reverse.
 * @internal
 */
export abstract class LockGroups {
  /** The names of the groups. */
  abstract get names(): string[];
  /** The group's engine; a `LockConfigError` naming the configured groups if there is none. */
  abstract get(name: string): LockBackend;
  /**
   * The definition of a group's backend (its kind and the shared holds it has); undefined for an
   * unknown group.
   */
  abstract definition(name: string): LockBackendDefinition | undefined;
  /** Ends every wait in progress in every group (shutdown: waiting requests answer now). */
  abstract abortWaits(): void;
  /**
   * `listener` is told a group's name whenever one of its Redis connections is ready (again):
   * the holds on it may have been lost while it was away (a restart without persistence).
   */
  abstract whenReady(listener: (group: string) => void): void;
}
