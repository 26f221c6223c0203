import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import { Redis, type RedisOptions } from 'ioredis';
import NodeRedlock from 'redlock';
import { LockConfigError } from '../errors';
import type { LockBackend } from '../core/lock-backend';
import type { LockBackendDefinition, Redlock } from '../interfaces';
import { policiesFromEnv } from '../redis/engine-policies';
import { RedisLockBackend } from '../redis/redis-lock-backend';
import { evictionPolicy } from '../redis/protocol/eviction-policy';
import type { LockGroups } from '../api/lock-groups';
import { explainAuthFailure } from '../redis/protocol/auth-failure';
import { closeConnection, reviveWhenEnded } from '../redis/protocol/redis-connection';
import { isCluster, isRedisInstance, type RedisNode } from '../redis/protocol/redis-node';
import type { ResolvedRedlockOptions } from '../options/redlock-options';
import { RESOLVED_OPTIONS } from '../redlock.constants';
import {
  BACKEND_UNREACHABLE_AT_START,
  EVICTION_POLICY_UNSAFE,
  REDIS_CONNECTION_BACK,
  REDIS_CONNECTION_LOST,
  REDIS_UNREACHABLE_AT_START,
  REDLOCK_WITHOUT_REDIS,
  UNKNOWN_CLIENT,
  APP_NOT_INITIALISED,
} from './module.messages';

/**
 * Builds the backend of a client group instead of the Redis engine (`nest-locked/testing`
 * provides one under `LOCK_BACKEND_FACTORY`). Without it the registry connects to Redis.
 * @internal
 */
export type LockBackendFactory = (group: string, options: ResolvedRedlockOptions) => LockBackend;

/** Token of the `LockBackendFactory` that replaces Redis. @internal */
export const LOCK_BACKEND_FACTORY = Symbol('nest-locked:backendFactory');

interface Group {
  client: LockBackend;
  /** `redis`, or the kind of the group's backend definition (`memory`, `postgres`...). */
  kind: string;
  /** The Redis nodes behind the group (none for a backend without Redis). */
  nodes: readonly RedisNode[];
  owned: RedisNode[];
  /** Connected by `onModuleInit` (owned connections, a backend with `start`): unusable before. */
  startsAtInit: boolean;
  redlock?: Redlock;
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
 * Owns the lock client groups: builds them from the options, hands them out by name, and closes
 * the connections it created (never the instances the user passed in) on shutdown.
 * @internal
 */
@Injectable()
export class LockGroupRegistry implements LockGroups, OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('nest-locked');
  private readonly groups = new Map<string, Group>();
  private closed = false;
  /** Told the group's name each time one of its Redis connections is ready again. */
  private readonly reconnected: ((group: string) => void)[] = [];
  /** The `ready` listeners put on connections, removed on shutdown (the user's are kept). */
  private readonly readyListeners: [RedisNode, () => void][] = [];
  /** Whether `onModuleInit` ran (the application was initialised). */
  private initialised = false;
  /** Owned connections: the last driver error, and whether it was up when last heard of. */
  private readonly lastError = new WeakMap<RedisNode, Error>();
  private readonly health = new WeakMap<RedisNode, 'up' | 'down'>();

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedRedlockOptions,
    @Optional() @Inject(LOCK_BACKEND_FACTORY) backend?: LockBackendFactory,
  ) {
    if (backend) {
      // nest-locked/testing: every group, whatever its backend, in memory.
      for (const name of [...Object.keys(options.groups), ...Object.keys(options.backends)]) {
        this.groups.set(name, {
          client: backend(name, options),
          kind: 'memory',
          nodes: [],
          owned: [],
          startsAtInit: false,
        });
      }
      return;
    }
    for (const [name, definition] of Object.entries(options.backends)) {
      const client = definition.create({
        group: name,
        keyPrefix: options.keyPrefix,
        driftFactor: options.driftFactor,
        commandTimeout: options.commandTimeout,
        logger: this.logger,
      });
      this.groups.set(name, {
        client,
        kind: definition.kind,
        nodes: [],
        owned: [],
        startsAtInit: client.start !== undefined,
      });
    }
    for (const [name, entries] of Object.entries(options.groups)) {
      const owned: RedisNode[] = [];
      const nodes = entries.map((entry) => {
        if (isRedisInstance(entry)) return entry;
        const redis = this.connect(name, entry);
        owned.push(redis);
        return redis;
      });
      const client = new RedisLockBackend(
        name,
        nodes,
        {
          keyPrefix: options.keyPrefix,
          driftFactor: options.driftFactor,
          localHandoffs: options.localHandoffs,
          commandTimeout: options.commandTimeout,
          ttl: options.ttl,
          policies: policiesFromEnv(),
          connectionError: (node) => this.connectionError(node),
        },
        (err) => this.logger.debug?.(`lock notifications (${name}): ${err.message}`),
      );
      this.groups.set(name, {
        client,
        kind: 'redis',
        nodes,
        owned,
        startsAtInit: owned.length > 0,
      });
      for (const node of nodes) {
        const listener = () => this.reconnected.forEach((tell) => tell(name));
        node.on('ready', listener);
        this.readyListeners.push([node, listener]);
      }
    }
  }

  /** Group names, for messages and validation. */
  get names(): string[] {
    return [...this.groups.keys()];
  }

  has(name: string): boolean {
    return this.groups.has(name);
  }

  /** Every Redis group's lock client, by name (for the health indicator). */
  clients(): ReadonlyMap<string, RedisLockBackend> {
    const clients = new Map<string, RedisLockBackend>();
    for (const [name, group] of this.groups) {
      if (group.client instanceof RedisLockBackend) clients.set(name, group.client);
    }
    return clients;
  }

  /**
   * What a group's backend supports, for a group of another backend than Redis (which supports
   * everything); undefined for Redis and unknown groups.
   */
  supports(name: string): LockBackendDefinition | undefined {
    return this.options.backends[name];
  }

  /** Every group that is not Redis: its backend and kind (for the health indicator). */
  backends(): ReadonlyMap<string, { client: LockBackend; kind: string }> {
    const backends = new Map<string, { client: LockBackend; kind: string }>();
    for (const [name, group] of this.groups) {
      if (!(group.client instanceof RedisLockBackend)) backends.set(name, group);
    }
    return backends;
  }

  /**
   * @throws LockConfigError for an unknown group, or one whose connections open at init when
   *   the application was not initialised (its calls would fail as if Redis were down)
   */
  get(name: string): LockBackend {
    const group = this.group(name);
    if (group.startsAtInit && !this.initialised) {
      throw new LockConfigError(APP_NOT_INITIALISED(name), 'app.init()');
    }
    return group.client;
  }

  /**
   * Why an owned connection that is not ready cannot be used: the driver's last error (a wrong
   * password, a refused connection, a TLS error), which says more than the command's own
   * ("Stream isn't writeable", "Connection is closed"). Undefined for a ready connection, one
   * with no error since it was last ready, and a connection the user passed in.
   */
  connectionError(node: RedisNode): Error | undefined {
    return node.status === 'ready' ? undefined : this.lastError.get(node);
  }

  /**
   * The `Redlock` instance of a group (escape hatch, built on first use over its nodes). For a
   * group this app does not configure (another app of the process asked for it), a stand-in
   * that fails with a clear `LockConfigError` as soon as it is used.
   */
  redlock(name: string): Redlock {
    const group = this.groups.get(name);
    if (!group) return missingRedlock(name, UNKNOWN_CLIENT(name, this.names));
    if (group.nodes.length === 0) return missingRedlock(name, REDLOCK_WITHOUT_REDIS(name));
    group.redlock ??= new NodeRedlock([...group.nodes]);
    return group.redlock;
  }

  async onModuleInit(): Promise<void> {
    this.initialised = true;
    // Open owned connections now so the first lock does not pay for it; a server that is down
    // is logged, not fatal: calls fail with LockBackendError until it comes back. Startup waits
    // a bounded time (a Sentinel setup whose sentinels are all unreachable never connects).
    const within = Math.max(1_000, 2 * this.options.commandTimeout);
    const pending: Promise<unknown>[] = [];
    for (const [name, group] of this.groups) {
      for (const redis of group.owned) {
        pending.push(
          this.connectWithin(redis, within).catch((err: Error) => {
            this.health.set(redis, 'down');
            this.logger.warn(REDIS_UNREACHABLE_AT_START(name, this.causeOf(redis, err)));
          }),
        );
      }
    }
    for (const [name, group] of this.groups) {
      const { client, kind } = group;
      if (!client.start) continue;
      pending.push(
        this.within(client.start(), client.startTimeout ?? within).catch((err: Error) =>
          this.logger.warn(BACKEND_UNREACHABLE_AT_START(name, kind, err.message)),
        ),
      );
    }
    await Promise.all(pending);
    // A quorum's nodes vote once their servers are read (Redlock's restart rule): the first
    // locks must not find them unread. Each read is bounded by commandTimeout.
    await Promise.all([...this.clients().values()].map((client) => client.nodesConfirmed()));
    await Promise.all(
      [...this.groups].flatMap(([name, group]) =>
        group.nodes.map((node) => this.warnIfEvicting(name, node)),
      ),
    );
  }

  /**
   * `listener` is told a group's name whenever one of its Redis connections is ready (again):
   * the holds on it may have been lost while it was away (a restart without persistence).
   */
  whenReady(listener: (group: string) => void): void {
    this.reconnected.push(listener);
  }

  /** Ends every wait in progress in every group (shutdown: waiting requests answer now). */
  abortWaits(): void {
    for (const group of this.groups.values()) group.client.abortWaits();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [node, listener] of this.readyListeners) node.off('ready', listener);
    await Promise.all(
      [...this.groups.values()].map(async (group) => {
        await group.client.close();
        await Promise.all(group.owned.map(closeConnection));
      }),
    );
  }

  private group(name: string): Group {
    const group = this.groups.get(name);
    if (!group) throw new LockConfigError(UNKNOWN_CLIENT(name, this.names), 'client');
    return group;
  }

  private connect(name: string, entry: string | RedisOptions): Redis {
    // Fail fast while disconnected (no offline queue), so a dead node turns into a quick
    // LockBackendError instead of a caller hanging on a queued command.
    const defaults: RedisOptions = { enableOfflineQueue: false, maxRetriesPerRequest: 1 };
    const redis =
      typeof entry === 'string'
        ? new Redis(entry, { ...defaults, lazyConnect: true })
        : new Redis({ ...defaults, ...entry, lazyConnect: true });
    // The real cause (a wrong password, a refused connection, a TLS error) is logged once per
    // change of state, not at every reconnect attempt; the lock calls report their own errors.
    redis.on('error', (driverError: Error) => {
      const err = explainAuthFailure(redis, driverError);
      this.lastError.set(redis, err);
      if (this.health.get(redis) === 'up') {
        this.health.set(redis, 'down');
        this.logger.warn(REDIS_CONNECTION_LOST(name, err.message));
      }
    });
    redis.on('ready', () => {
      this.lastError.delete(redis);
      if (this.health.get(redis) === 'down') this.logger.log(REDIS_CONNECTION_BACK(name));
      this.health.set(redis, 'up');
    });
    reviveWhenEnded(redis, () => this.closed);
    return redis;
  }

  /** Connects, or rejects after `ms` (the connection keeps trying in the background). */
  private connectWithin(redis: RedisNode, ms: number): Promise<void> {
    return this.within(redis.connect(), ms);
  }

  /** `work`, or a rejection after `ms` (the work goes on in the background). */
  private async within(work: Promise<void>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    work.catch(() => undefined);
    try {
      await Promise.race([
        work,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`not connected within ${ms} ms`)), ms);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The most telling reason a connection failed: the driver's last error, if any. */
  private causeOf(redis: RedisNode, fallback: Error): string {
    return this.lastError.get(redis)?.message ?? fallback.message;
  }

  /**
   * Warns when a node may evict keys under memory pressure: a held lock could vanish and be
   * taken by another caller.
   */
  private async warnIfEvicting(name: string, node: RedisNode): Promise<void> {
    const servers = isCluster(node) ? node.nodes('master') : [node];
    await Promise.all(
      servers.map(async (server) => {
        const policy = await evictionPolicy(server);
        if (policy !== undefined) this.logger.warn(EVICTION_POLICY_UNSAFE(name, policy));
      }),
    );
  }
}
