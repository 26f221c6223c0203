import type { Redis } from 'ioredis';
import type {
  BoardHeldKey,
  BoardHolder,
  BoardKeyLine,
  BoardMode,
  BoardNodeState,
  BoardScan,
  BoardSource,
} from '../core/board-source';
import { type KeySpace, SHARED_MARKER, TOKEN_SEPARATOR } from './protocol/key-space';
import { evictionPolicy } from './protocol/eviction-policy';
import { pingNode } from './protocol/node-ping';
import { RedisBoardStore } from './redis-board-store';
import { isCluster, type RedisNode } from './protocol/redis-node';

/** Keys a SCAN round asks for. */
const SCAN_COUNT = 1_000;
/** Shared holders read per key at most. */
const SHARES_READ = 100;

/** What the board's source needs of the Redis backend of one group. */
export interface RedisBoardBackend {
  readonly name: string;
  readonly nodes: readonly RedisNode[];
  readonly space: KeySpace;
  /** The prefix of this process's tokens in the group. */
  owner(): string;
  /** The backend's force release (FORCE_RELEASE, as a release grants). */
  forceRelease(key: string, token: string): Promise<boolean>;
}

/**
 * The lock board's reads on a Redis group (its first node; every master of a Cluster for the
 * scan): the lock keys with their holder token and `PTTL`, the shared holders, each key's queue
 * with its waiters' lease and deadline, found with a bounded `SCAN` (never `KEYS`). The
 * instances publish their views beside them (`RedisBoardStore`).
 * @internal
 */
export class RedisBoardSource implements BoardSource {
  readonly everyCaller = false;
  readonly queued: boolean;
  readonly views: RedisBoardStore;
  private readonly node: RedisNode;

  constructor(private readonly backend: RedisBoardBackend) {
    this.node = backend.nodes[0];
    // One node queues its waiters in Redis; a quorum races, and a Cluster's lines are read
    // from the views (as before the sources).
    this.queued = backend.nodes.length === 1 && !isCluster(this.node);
    this.views = new RedisBoardStore(backend.name, this.node, backend.space);
  }

  owner(): string {
    return this.backend.owner();
  }

  async serverTime(): Promise<number> {
    const [s, us] = await this.servers()[0].time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  async scan(search: string, maxScan: number): Promise<BoardScan> {
    const { space } = this.backend;
    const pattern = space.scanPattern(search);
    const held: string[] = [];
    const waited: string[] = [];
    let examined = 0;
    let complete = true;
    for (const server of this.servers()) {
      let cursor = '0';
      do {
        if (examined >= maxScan) {
          complete = false;
          break;
        }
        const [next, keys] = await server.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
        cursor = next;
        examined += SCAN_COUNT;
        for (const redisKey of keys) {
          const lock = space.keyOf(redisKey);
          const queued = lock === undefined ? space.keyOfQueue(redisKey) : undefined;
          if (lock !== undefined) held.push(lock);
          else if (queued !== undefined) waited.push(queued);
        }
      } while (cursor !== '0');
    }
    return { held: unique(held), waited: unique(waited), complete };
  }

  async held(keys: readonly string[]): Promise<BoardHeldKey[]> {
    const { space } = this.backend;
    const [now, rows] = await Promise.all([
      this.serverTime(),
      Promise.all(
        keys.map(async (key) => {
          const lockKey = space.lockKey(key);
          const [value, pttl] = await Promise.all([
            this.node.get(lockKey),
            this.node.pttl(lockKey),
          ]);
          let shares: Array<[string, string]> = [];
          if (value?.startsWith(SHARED_MARKER)) {
            const shared = space.lineKeys(key).shared;
            shares = pairs(await this.node.zrange(shared, 0, SHARES_READ - 1, 'WITHSCORES'));
          }
          return { key, value, pttl, shares };
        }),
      ),
    ]);
    return rows.flatMap(({ key, value, pttl, shares }): BoardHeldKey[] => {
      if (value === null) return [];
      const leaseLeftMs = pttl >= 0 ? pttl : null;
      if (!value.startsWith(SHARED_MARKER)) {
        return [{ key, mode: 'exclusive', leaseLeftMs, holders: [this.holder(value)] }];
      }
      const live = shares.filter(([, end]) => Number(end) > now);
      const mode = modeOf(value.slice(SHARED_MARKER.length));
      return [{ key, mode, leaseLeftMs, holders: live.map(([token]) => this.holder(token)) }];
    });
  }

  async lines(keys: readonly string[], limit: number): Promise<BoardKeyLine[]> {
    const { space } = this.backend;
    const lines = await Promise.all(
      keys.map(async (key): Promise<BoardKeyLine> => {
        const { queue, meta } = space.lineKeys(key);
        const [length, flat] = await Promise.all([
          this.node.zcard(queue),
          this.node.zrange(queue, 0, limit - 1, 'WITHSCORES'),
        ]);
        const entries = pairs(flat);
        const metas = entries.length
          ? await this.node.hmget(meta, ...entries.map(([token]) => token))
          : [];
        const waiters = entries.map(([token, us], i) => {
          // Meta: "<lease ms>:<deadline ms>[:r|:<N>]".
          const [, deadline, kind] = (metas[i] ?? '').split(':');
          const deadlineMs = Number(deadline);
          return {
            owner: ownerOf(token),
            token,
            mode: kind ? modeOf(kind) : ('exclusive' as const),
            since: Math.floor(Number(us) / 1000),
            ...(deadline && Number.isFinite(deadlineMs) && { deadline: deadlineMs }),
          };
        });
        return { key, length, waiters };
      }),
    );
    return lines.filter((line) => line.length > 0);
  }

  async forceRelease(key: string, holder: BoardHolder): Promise<boolean> {
    if (holder.token === undefined) return false;
    return this.backend.forceRelease(key, holder.token);
  }

  async nodes(timeout: number): Promise<BoardNodeState[]> {
    return Promise.all(
      this.backend.nodes.map(async (node): Promise<BoardNodeState> => {
        const health = await pingNode(node, timeout);
        if (health.status === 'down' || isCluster(node)) return health;
        const [role, policy] = await Promise.all([roleOf(node), evictionPolicy(node)]);
        const warning = policy && `maxmemory-policy ${policy}: held locks may be evicted`;
        return { ...health, role, ...(warning && { warning }) };
      }),
    );
  }

  private holder(token: string): BoardHolder {
    return { owner: ownerOf(token), token };
  }

  /** The servers to scan: the node, or every master of a Cluster. */
  private servers(): Redis[] {
    return isCluster(this.node) ? this.node.nodes('master') : [this.node];
  }
}

/** The process prefix of a token (what names its process). */
function ownerOf(token: string): string {
  const at = token.lastIndexOf(TOKEN_SEPARATOR);
  return at < 0 ? token : token.slice(0, at);
}

/** The mode of a shared kind as the scripts write it (`r`, or N). */
function modeOf(kind: string): BoardMode {
  return kind === 'r' ? 'read' : `permits ${Number(kind)}`;
}

/** `master` or `replica` (INFO replication), undefined when not told. */
async function roleOf(node: Redis): Promise<string | undefined> {
  try {
    const info = await node.info('replication');
    return /^role:(\w+)/m.exec(info)?.[1];
  } catch {
    return undefined;
  }
}

function pairs(flat: readonly string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
}

function unique(keys: string[]): string[] {
  return [...new Set(keys)].sort();
}
