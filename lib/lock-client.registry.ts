import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import Redlock from 'redlock';
import { LockConfigError } from './errors';
import type { RedlockClientEntry } from './interfaces';
import { LockClient, type RedisNode } from './lock-client';
import { closeConnection } from './redis-connection';
import type { ResolvedRedlockOptions } from './redlock-options';
import { RESOLVED_OPTIONS } from './redlock.constants';
import { UNKNOWN_CLIENT } from './redlock.messages';

interface Group {
  client: LockClient;
  owned: RedisNode[];
  redlock?: Redlock;
}

// Nest probes providers for lifecycle hooks; those reads must not throw.
const PROBED = new Set(['then', 'constructor', 'toJSON', 'inspect']);
function missingRedlock(name: string, known: string[]): Redlock {
  return new Proxy({} as Redlock, {
    get(_target, prop) {
      if (typeof prop === 'symbol' || PROBED.has(prop) || /^(on|before)[A-Z]/.test(prop)) {
        return undefined;
      }
      throw new LockConfigError(UNKNOWN_CLIENT(name, known), `@InjectRedlock('${name}')`);
    },
  });
}

const isInstance = (e: RedlockClientEntry): e is Redis | Cluster =>
  e instanceof Redis ||
  e instanceof Cluster ||
  // Another copy of ioredis (the user's) fails instanceof; recognise it by shape.
  (typeof (e as { evalsha?: unknown }).evalsha === 'function' &&
    typeof (e as { duplicate?: unknown }).duplicate === 'function');

/**
 * Owns the lock client groups: builds them from the options, hands them out by name, and closes
 * the connections it created (never the instances the user passed in) on shutdown.
 * @internal
 */
@Injectable()
export class LockClientRegistry implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('nest-locked');
  private readonly groups = new Map<string, Group>();
  private closed = false;

  constructor(@Inject(RESOLVED_OPTIONS) private readonly options: ResolvedRedlockOptions) {
    for (const [name, entries] of Object.entries(options.groups)) {
      const owned: RedisNode[] = [];
      const nodes = entries.map((entry) => {
        if (isInstance(entry)) return entry;
        const redis = this.connect(entry);
        owned.push(redis);
        return redis;
      });
      const client = new LockClient(
        name,
        nodes,
        {
          keyPrefix: options.keyPrefix,
          driftFactor: options.driftFactor,
          localHandoffs: options.localHandoffs,
          commandTimeout: options.commandTimeout,
        },
        (err) => this.logger.debug?.(`lock notifications (${name}): ${err.message}`),
      );
      this.groups.set(name, { client, owned });
    }
  }

  /** Group names, for messages and validation. */
  get names(): string[] {
    return [...this.groups.keys()];
  }

  has(name: string): boolean {
    return this.groups.has(name);
  }

  /** @throws LockConfigError for an unknown group */
  get(name: string): LockClient {
    return this.group(name).client;
  }

  /**
   * The `Redlock` instance of a group (escape hatch, built on first use over its nodes). For a
   * group this app does not configure (another app of the process asked for it), a stand-in
   * that fails with a clear `LockConfigError` as soon as it is used.
   */
  redlock(name: string): Redlock {
    const group = this.groups.get(name);
    if (!group) return missingRedlock(name, this.names);
    group.redlock ??= new Redlock([...group.client.nodes]);
    return group.redlock;
  }

  async onModuleInit(): Promise<void> {
    // Open owned connections now so the first lock does not pay for it; a server that is down
    // is logged, not fatal: calls fail with LockBackendError until it comes back.
    const pending: Promise<unknown>[] = [];
    for (const [name, group] of this.groups) {
      for (const redis of group.owned) {
        pending.push(
          redis.connect().catch((err: Error) => {
            this.logger.warn(`Lock group "${name}": cannot reach Redis yet (${err.message}).`);
          }),
        );
      }
    }
    await Promise.all(pending);
  }

  /** Ends every wait in progress in every group (shutdown: waiting requests answer now). */
  abortWaits(): void {
    for (const group of this.groups.values()) group.client.abortWaits();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
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

  private connect(entry: string | RedisOptions): Redis {
    // Fail fast while disconnected (no offline queue), so a dead node turns into a quick
    // LockBackendError instead of a caller hanging on a queued command.
    const defaults: RedisOptions = { enableOfflineQueue: false, maxRetriesPerRequest: 1 };
    const redis =
      typeof entry === 'string'
        ? new Redis(entry, { ...defaults, lazyConnect: true })
        : new Redis({ ...defaults, ...entry, lazyConnect: true });
    // Without a listener ioredis prints every reconnect error; the lock calls report them.
    redis.on('error', (err: Error) => this.logger.debug?.(`Redis: ${err.message}`));
    return redis;
  }
}
