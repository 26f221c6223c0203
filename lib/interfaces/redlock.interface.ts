// The public types use Node's (EventEmitter, AbortSignal): declared, so an app's compiler loads
// them even where `types` lists none (the default from TypeScript 6), as ioredis's did before.
/// <reference types="node" preserve="true" />
import type { EventEmitter } from 'node:events';
import type { RedisInstance } from './redlock-module-options.interface';

/*
 * The public surface of node-redlock 5.0.0-beta.2 (the version nest-locked pins), declared here
 * rather than re-exported: redlock's package.json `exports` has no `types` condition, so under
 * `moduleResolution` node16, nodenext or bundler TypeScript finds no types for 'redlock' at all,
 * and under pnpm's strict layout an app cannot import it. The registry returns the real instance
 * through these interfaces, so the build checks that they still match it.
 */

/** node-redlock's settings for one call or one instance. */
export interface RedlockSettings {
  readonly driftFactor: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly automaticExtensionThreshold: number;
}

/** How the nodes voted in one node-redlock round. */
export interface RedlockExecutionStats {
  readonly membershipSize: number;
  readonly quorumSize: number;
  readonly votesFor: Set<RedisInstance>;
  readonly votesAgainst: Map<RedisInstance, Error>;
}

/** The attempts of one node-redlock operation. */
export interface RedlockExecutionResult {
  attempts: ReadonlyArray<Promise<RedlockExecutionStats>>;
}

/** A lock taken through node-redlock directly (no fence, no watchdog, no reentrancy). */
export interface RedlockLock {
  readonly redlock: Redlock;
  readonly resources: string[];
  readonly value: string;
  readonly attempts: ReadonlyArray<Promise<RedlockExecutionStats>>;
  expiration: number;
  release(): Promise<RedlockExecutionResult>;
  extend(duration: number): Promise<RedlockLock>;
}

/** The signal `Redlock.using` passes to its routine: `error` says why it aborted. */
export type RedlockAbortSignal = AbortSignal & { error?: Error };

/**
 * A client group's node-redlock instance, as `@InjectRedlock()` injects it: the escape hatch for
 * what `@Locked` and `LockService` do not cover. Its locks bypass nest-locked's fencing,
 * reentrancy, waiting engine and watchdog, and do not exclude nest-locked's own locks on the same
 * name (the keys differ).
 *
 * @example
 * ```ts
 * import { InjectRedlock, type Redlock } from 'nest-locked';
 *
 * @Injectable()
 * export class Reports {
 *   constructor(@InjectRedlock() private readonly redlock: Redlock) {}
 *
 *   async rebuild() {
 *     await this.redlock.using(['report:rebuild'], 10_000, async (signal) => {
 *       if (signal.aborted) throw signal.error;
 *     });
 *   }
 * }
 * ```
 * @publicApi
 */
export interface Redlock extends EventEmitter {
  readonly clients: Set<RedisInstance>;
  readonly settings: RedlockSettings;
  /** Closes every connection of the group, the module's too: leave that to the app's shutdown. */
  quit(): Promise<void>;
  acquire(
    resources: string[],
    duration: number,
    settings?: Partial<RedlockSettings>,
  ): Promise<RedlockLock>;
  release(lock: RedlockLock, settings?: Partial<RedlockSettings>): Promise<RedlockExecutionResult>;
  extend(
    existing: RedlockLock,
    duration: number,
    settings?: Partial<RedlockSettings>,
  ): Promise<RedlockLock>;
  using<T>(
    resources: string[],
    duration: number,
    settings: Partial<RedlockSettings>,
    routine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  using<T>(
    resources: string[],
    duration: number,
    routine: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
}
