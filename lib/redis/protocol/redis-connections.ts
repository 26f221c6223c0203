import type { LoggerService } from '@nestjs/common';
import type { RedisOptions } from 'ioredis';
import type { RedlockClientEntry } from '../../interfaces/redlock-module-options.interface';
import { explainAuthFailure } from './auth-failure';
import { evictionPolicy } from './eviction-policy';
import { closeConnection, reviveWhenEnded } from './redis-connection';
import { within } from '../../within';
import { loadRedisDriver } from './redis-driver';
import { isCluster, isRedisInstance, type RedisNode } from './redis-node';
import {
  EVICTION_POLICY_UNSAFE,
  REDIS_CONNECTION_BACK,
  REDIS_CONNECTION_LOST,
  REDIS_UNREACHABLE_AT_START,
} from './redis.messages';

/**
 * The connections of one Redis group: the instances the app passed in, and the ones opened here
 * from strings and options (owned: connected at start, closed at the end; never the app's own).
 * It logs each owned connection's losses and returns once per change of state, and keeps its
 * last driver error, which says more than a command's own.
 * @internal
 */
export class RedisConnections {
  readonly nodes: readonly RedisNode[];
  private readonly owned: RedisNode[] = [];
  /** The `ready` listeners put on connections, removed at close (the app's are kept). */
  private readonly readyListeners: [RedisNode, () => void][] = [];
  /** Owned connections: the last driver error, and whether it was up when last heard of. */
  private readonly lastError = new WeakMap<RedisNode, Error>();
  private readonly state = new WeakMap<RedisNode, 'up' | 'down'>();
  private closed = false;

  constructor(
    private readonly group: string,
    entries: readonly RedlockClientEntry[],
    private readonly logger: LoggerService,
  ) {
    this.nodes = entries.map((entry) => {
      if (isRedisInstance(entry)) return entry;
      const redis = this.connect(entry as string | RedisOptions);
      this.owned.push(redis);
      return redis;
    });
  }

  /** Whether some connections are opened here (then none is usable before `open`). */
  get ownsAny(): boolean {
    return this.owned.length > 0;
  }

  /**
   * Why an owned connection that is not ready cannot be used: the driver's last error (a wrong
   * password, a refused connection, a TLS error), which says more than the command's own
   * ("Stream isn't writeable", "Connection is closed"). Undefined for a ready connection, one
   * with no error since it was last ready, and a connection the app passed in.
   */
  connectionError(node: RedisNode): Error | undefined {
    return node.status === 'ready' ? undefined : this.lastError.get(node);
  }

  /** `listener` is told each time a connection of the group is ready (again). */
  onReady(listener: () => void): void {
    for (const node of this.nodes) {
      node.on('ready', listener);
      this.readyListeners.push([node, listener]);
    }
  }

  /**
   * Opens the owned connections, each within `ms` (a Sentinel setup whose sentinels are all
   * unreachable never connects); one that does not is logged, not fatal: calls fail with
   * LockBackendError until it comes back, and it keeps trying in the background.
   */
  async open(ms: number): Promise<void> {
    await Promise.all(
      this.owned.map((redis) =>
        within(redis.connect(), ms).catch((err: Error) => {
          this.state.set(redis, 'down');
          const cause = this.lastError.get(redis)?.message ?? err.message;
          this.logger.warn(REDIS_UNREACHABLE_AT_START(this.group, cause));
        }),
      ),
    );
  }

  /**
   * Warns when a node may evict keys under memory pressure: a held lock could vanish and be
   * taken by another caller.
   */
  async warnIfEvicting(): Promise<void> {
    const servers = this.nodes.flatMap((node) => (isCluster(node) ? node.nodes('master') : [node]));
    await Promise.all(
      servers.map(async (server) => {
        const policy = await evictionPolicy(server);
        if (policy !== undefined) this.logger.warn(EVICTION_POLICY_UNSAFE(this.group, policy));
      }),
    );
  }

  /** The group closes: no connection is revived or listened to any more. */
  closing(): void {
    this.closed = true;
    for (const [node, listener] of this.readyListeners) node.off('ready', listener);
    this.readyListeners.length = 0;
  }

  /** Closes the owned connections (after `closing`). */
  async close(): Promise<void> {
    this.closing();
    await Promise.all(this.owned.map(closeConnection));
  }

  private connect(entry: string | RedisOptions): RedisNode {
    const { Redis } = loadRedisDriver('clients');
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
      if (this.state.get(redis) === 'up') {
        this.state.set(redis, 'down');
        this.logger.warn(REDIS_CONNECTION_LOST(this.group, err.message));
      }
    });
    redis.on('ready', () => {
      this.lastError.delete(redis);
      if (this.state.get(redis) === 'down') this.logger.log(REDIS_CONNECTION_BACK(this.group));
      this.state.set(redis, 'up');
    });
    reviveWhenEnded(redis, () => this.closed);
    return redis;
  }
}
