import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import { LockConfigError } from '../errors';
import type { LockBackend } from '../core/lock-backend';
import type { LockBackendDefinition, Redlock } from '../interfaces';
import type { LockGroups } from '../api/lock-groups';
import type { ResolvedRedlockOptions } from '../options/redlock-options';
import { redisBackend } from '../redis/redis-backend';
import type { RedisLockBackend } from '../redis/redis-lock-backend';
import { RESOLVED_OPTIONS } from '../redlock.constants';
import { within } from '../within';
import {
  BACKEND_UNREACHABLE_AT_START,
  REDLOCK_WITHOUT_REDIS,
  UNKNOWN_CLIENT,
  APP_NOT_INITIALISED,
} from './module.messages';

/**
 * Builds the backend of a lock group instead of its definition (`nest-locked/testing`
 * provides one under `LOCK_BACKEND_FACTORY`, which builds every group in memory).
 * @internal
 */
export type LockBackendFactory = (group: string, options: ResolvedRedlockOptions) => LockBackend;

/** Token of the `LockBackendFactory` that replaces every group's definition. @internal */
export const LOCK_BACKEND_FACTORY = Symbol('nest-locked:backendFactory');

/** One lock group: its backend, and the definition it was built by. */
export interface LockGroup {
  readonly backend: LockBackend;
  /** The kind of its backend (`redis`, `postgres`, `memory`...). */
  readonly kind: string;
  /** Its definition (undefined for a group `nest-locked/testing` built). */
  readonly definition?: LockBackendDefinition;
  /** Connected by `onModuleInit` (a backend with `start`): unusable before. */
  readonly startsAtInit: boolean;
}

// Nest probes providers for lifecycle hooks; those reads must not throw.
const PROBED = new Set(['then', 'constructor', 'toJSON', 'inspect']);
function missingRedlock(name: string, why: string): Redlock {
  return new Proxy({} as Redlock, {
    get(_target, prop) {
      if (typeof prop === 'symbol' || PROBED.has(prop) || /^(on|before)[A-Z]/.test(prop)) {
        return undefined;
      }
      // Scanners of every provider's methods (@nestjs/schedule) read Object.prototype's names.
      if (prop in Object.prototype) return undefined;
      throw new LockConfigError(why, `@InjectRedlock('${name}')`);
    },
  });
}

/**
 * Owns the lock groups: builds each group's backend from its definition (a Redis group's from
 * its `clients`), hands them out by name, starts them when the module starts and closes them on
 * shutdown. Every group is treated alike, whatever its backend.
 * @internal
 */
@Injectable()
export class LockGroupRegistry implements LockGroups, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('nest-locked');
  private readonly groups = new Map<string, LockGroup>();
  private closed = false;
  /** Told the group's name each time one of its connections is ready again. */
  private readonly reconnected: ((group: string) => void)[] = [];
  /** Whether `onModuleInit` ran (the application was initialised). */
  private initialised = false;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedRedlockOptions,
    @Optional() @Inject(LOCK_BACKEND_FACTORY) backend?: LockBackendFactory,
  ) {
    if (backend) {
      // nest-locked/testing: every group, whatever its backend, in memory.
      for (const name of [...Object.keys(options.groups), ...Object.keys(options.backends)]) {
        this.groups.set(name, {
          backend: backend(name, options),
          kind: 'memory',
          startsAtInit: false,
        });
      }
      return;
    }
    for (const [name, definition] of Object.entries(definitions(options))) {
      const built = definition.create({
        group: name,
        keyPrefix: options.keyPrefix,
        driftFactor: options.driftFactor,
        commandTimeout: options.commandTimeout,
        logger: this.logger,
      });
      this.groups.set(name, {
        backend: built,
        kind: definition.kind,
        definition,
        startsAtInit: built.start !== undefined && !built.usableBeforeStart,
      });
      built.onReconnect?.(() => this.reconnected.forEach((tell) => tell(name)));
    }
  }

  /** Group names, for messages and validation. */
  get names(): string[] {
    return [...this.groups.keys()];
  }

  has(name: string): boolean {
    return this.groups.has(name);
  }

  /** Every group, by name (for the health indicator and the lock board). */
  all(): ReadonlyMap<string, LockGroup> {
    return this.groups;
  }

  /** The definition a group was built by (what it supports, its kind); undefined if unknown. */
  definition(name: string): LockBackendDefinition | undefined {
    return this.groups.get(name)?.definition;
  }

  /** Tells a group a lease length its methods declare (see `LockBackend.leaseInUse`). */
  leaseInUse(name: string, ttl: number): void {
    this.groups.get(name)?.backend.leaseInUse?.(ttl);
  }

  /**
   * @throws LockConfigError for an unknown group, or one whose connections open at init when
   *   the application was not initialised (its calls would fail as if its server were down)
   */
  get(name: string): LockBackend {
    const group = this.group(name);
    if (group.startsAtInit && !this.initialised) {
      throw new LockConfigError(APP_NOT_INITIALISED(name), 'app.init()');
    }
    return group.backend;
  }

  /**
   * The `Redlock` instance of a group (escape hatch, built on first use over its nodes). For a
   * group this app does not configure (another app of the process asked for it), or one not on
   * Redis, a stand-in that fails with a clear `LockConfigError` as soon as it is used.
   */
  redlock(name: string): Redlock {
    const group = this.groups.get(name);
    if (!group) return missingRedlock(name, UNKNOWN_CLIENT(name, this.names));
    const redis = group.backend as Partial<Pick<RedisLockBackend, 'redlock'>>;
    if (group.kind !== 'redis' || !redis.redlock) {
      return missingRedlock(name, REDLOCK_WITHOUT_REDIS(name));
    }
    return redis.redlock();
  }

  async onModuleInit(): Promise<void> {
    this.initialised = true;
    // Connect now so the first lock does not pay for it; a server that is down is logged, not
    // fatal: calls fail with LockBackendError until it comes back. Startup waits a bounded time
    // (the backend's own bound when it has one).
    const bound = Math.max(1_000, 2 * this.options.commandTimeout);
    await Promise.all(
      [...this.groups].map(([name, { backend, kind }]) => {
        if (!backend.start) return undefined;
        const timeout = backend.startTimeout ?? bound;
        const started = Number.isFinite(timeout)
          ? within(backend.start(), timeout)
          : backend.start();
        return started.catch((err: Error) =>
          this.logger.warn(BACKEND_UNREACHABLE_AT_START(name, kind, err.message)),
        );
      }),
    );
  }

  /**
   * `listener` is told a group's name whenever one of its connections is ready (again): the
   * holds on it may have been lost while it was away (a restart without persistence).
   */
  whenReady(listener: (group: string) => void): void {
    this.reconnected.push(listener);
  }

  /** Ends every wait in progress in every group (shutdown: waiting requests answer now). */
  abortWaits(): void {
    for (const group of this.groups.values()) group.backend.abortWaits();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.groups.values()].map((group) => group.backend.close()));
  }

  private group(name: string): LockGroup {
    const group = this.groups.get(name);
    if (!group) throw new LockConfigError(UNKNOWN_CLIENT(name, this.names), 'client');
    return group;
  }
}

/**
 * Every group's definition: the groups of other backends, then the Redis groups (the `clients`
 * shorthand, and named groups with `clients`), each a `redisBackend`.
 */
function definitions(options: ResolvedRedlockOptions): Record<string, LockBackendDefinition> {
  const all: Record<string, LockBackendDefinition> = { ...options.backends };
  const { localHandoffs, ttl } = options;
  for (const [name, nodes] of Object.entries(options.groups)) {
    all[name] = redisBackend({ nodes, localHandoffs, ttl });
  }
  return all;
}
