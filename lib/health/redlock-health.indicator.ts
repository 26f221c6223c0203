import { Inject, Injectable } from '@nestjs/common';
import { type HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import type { LockBackend } from '../core/lock-backend';
import { LockGroupRegistry } from '../module/lock-group.registry';
import type { ResolvedRedlockOptions } from '../options/redlock-options';
import { RESOLVED_OPTIONS } from '../redlock.constants';

/** One server (node) of a group, as the health check found it. */
export interface RedlockNodeHealth {
  /** `host:port`, the socket path, `sentinel:<master name>` or `cluster` (no credentials). */
  readonly node: string;
  readonly status: 'up' | 'down';
  /** Round trip of its PING, in ms (when up). */
  readonly latencyMs?: number;
  /** Why it is down: the driver's error, or no answer in time. */
  readonly error?: string;
  /** Its role in its ensemble when the backend can tell (`leader`, `follower`, `standalone`). */
  readonly role?: string;
}

/** One client group: up when a majority of its nodes (its quorum) answered. */
export interface RedlockGroupHealth {
  readonly status: 'up' | 'down';
  /** The group's backend: `redis`, `postgres`, `mysql`, `etcd`, `zookeeper` or `memory`. */
  readonly backend: string;
  /** Nodes that must answer for locks to work: 1 for a single node, a majority of a quorum. */
  readonly quorum: number;
  /** Nodes that answered. */
  readonly reachable: number;
  /** In the order of the group's configuration. */
  readonly nodes: readonly RedlockNodeHealth[];
}

/** What the indicator reports under its key, besides `status`. */
export interface RedlockHealthDetails {
  readonly groups: Readonly<Record<string, RedlockGroupHealth>>;
  [detail: string]: unknown;
}

/** Options of one check. */
export interface RedlockHealthCheckOptions {
  /** How long a node may take to answer PING, in ms. @default the module's `commandTimeout` */
  timeout?: number;
}

/**
 * A `@nestjs/terminus` health indicator for the lock servers: every client group, each node's
 * reachability (PING) and latency, and whether a quorum of it answers. Down when any group
 * cannot reach a majority of its nodes (its locks then fail with `LockBackendError`).
 *
 * @example
 * ```ts
 * import { RedlockHealthIndicator, RedlockHealthModule } from 'nest-locked/health';
 *
 * @Controller('health')
 * class HealthController {
 *   constructor(
 *     private readonly health: HealthCheckService,
 *     private readonly redlock: RedlockHealthIndicator,
 *   ) {}
 *
 *   @Get()
 *   @HealthCheck()
 *   check() {
 *     return this.health.check([() => this.redlock.isHealthy('redlock')]);
 *   }
 * }
 *
 * @Module({ imports: [TerminusModule, RedlockHealthModule], controllers: [HealthController] })
 * export class HealthModule {}
 * ```
 * @publicApi
 */
@Injectable()
export class RedlockHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly registry: LockGroupRegistry,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedRedlockOptions,
  ) {}

  /** Pings every node of every group at once and reports under `key`. */
  async isHealthy<const Key extends string = 'redlock'>(
    key: Key = 'redlock' as Key,
    options: RedlockHealthCheckOptions = {},
  ): Promise<HealthIndicatorResult<Key, 'up' | 'down', RedlockHealthDetails>> {
    const session = this.indicators.check(key);
    const timeout = options.timeout ?? this.options.commandTimeout;
    const checked = await Promise.all(
      [...this.registry.all()].map(
        async ([name, { backend, kind }]) =>
          [name, await checkGroup(backend, kind, timeout)] as const,
      ),
    );
    const details: RedlockHealthDetails = { groups: Object.fromEntries(checked) };
    return checked.every(([, group]) => group.status === 'up')
      ? session.up(details)
      : session.down(details);
  }
}

/** A group: its backend's own check (the memory backend has no server: always up). */
async function checkGroup(
  client: LockBackend,
  backend: string,
  timeout: number,
): Promise<RedlockGroupHealth> {
  const { quorum, nodes } = (await client.health?.(timeout)) ?? { quorum: 0, nodes: [] };
  const reachable = nodes.filter((n) => n.status === 'up').length;
  return { status: reachable >= quorum ? 'up' : 'down', backend, quorum, reachable, nodes };
}
