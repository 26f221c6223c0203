import type { Redis } from 'ioredis';
import { KeySpace } from './key-space';
import { isCluster, type RedisNode } from './redis-node';
import type { BoardEvent } from '../board/board-recorder';
import type { InstanceView } from '../board/instance-view';

/** Waiters read and listed per line at most. */
export const LINE_LIMIT = 50;

/** Keys a SCAN round asks for. */
const SCAN_COUNT = 1_000;

/**
 * Frees a key a token holds, and wakes its racing waiters; queued waiters retry on their
 * fallback timers and take it in order. The holder's watchdog finds it lost at its next renewal.
 * KEYS[1] lock, KEYS[2] release channel. ARGV[1] the holder's token (read just before: a key
 * taken by someone else meanwhile is left alone). Reply: 1 freed, 0 not that token's.
 */
const FORCE_RELEASE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 'r')
return 1`;

/** A lock key as found in Redis. */
export interface StoredLock {
  readonly key: string;
  /** The holder's token, or a shared marker (`\0r`, `\0<N>`). */
  readonly value: string | null;
  /** Lease left, ms (-2: gone, -1: no expiry). */
  readonly pttl: number;
  /** Shared holders: token and lease end (server ms). */
  readonly shares: Array<[string, number]>;
}

/** A key's queue as found in Redis, in order. */
export interface StoredLine {
  readonly key: string;
  readonly length: number;
  readonly waiters: Array<{ token: string; queuedUs: number; meta: string | null }>;
}

/** The lock keys and queues a bounded scan found. */
export interface ScanResult {
  readonly locks: string[];
  readonly queues: string[];
  /** false when `maxScan` keys were examined before the scan ended. */
  readonly complete: boolean;
}

/**
 * The board's reads and writes on one Redis group (its first node): the instances' views and
 * events it publishes, and the protocol's own keys it reads (never `KEYS`: bounded `SCAN`).
 * @internal
 */
export class RedisBoardStore {
  private readonly names: ReturnType<KeySpace['boardKeys']>;

  constructor(
    readonly group: string,
    private readonly node: RedisNode,
    private readonly space: KeySpace,
  ) {
    this.names = space.boardKeys(group);
  }

  /**
   * Publishes this instance's view (living `expiry` ms) and its new events; answers whether a
   * page of the board is open (read in the same round trip).
   */
  async publish(
    view: InstanceView,
    events: readonly BoardEvent[],
    expiry: number,
    eventsKept: number,
  ): Promise<boolean> {
    const now = Date.now();
    const multi = this.node.multi();
    multi.set(this.names.instance(view.id), JSON.stringify(view), 'PX', expiry);
    multi.zadd(this.names.instances, now + expiry, view.id);
    multi.zremrangebyscore(this.names.instances, '-inf', now);
    const streams = new Set<string>();
    for (const e of events) {
      const stream = e.type === 'busy' ? this.names.busy : this.names.events;
      streams.add(stream);
      multi.xadd(stream, 'MAXLEN', '~', eventsKept, '*', 'e', JSON.stringify(e));
    }
    // Events outlive the instance that wrote them (a lost lease last night), not the group.
    for (const stream of streams) multi.pexpire(stream, 24 * 3_600_000);
    multi.exists(this.names.watched);
    const replies = await multi.exec();
    return replies?.[replies.length - 1]?.[1] === 1;
  }

  /** Tells the instances a page is open for the next `ms`. */
  async watch(ms: number): Promise<void> {
    await this.node.set(this.names.watched, '1', 'PX', ms);
  }

  /** Drops this instance's view at once (a clean shutdown). */
  async withdraw(id: string): Promise<void> {
    await Promise.all([
      this.node.del(this.names.instance(id)),
      this.node.zrem(this.names.instances, id),
    ]);
  }

  /** Every live instance's view of this group. */
  async instances(): Promise<InstanceView[]> {
    const ids = await this.node.zrangebyscore(this.names.instances, Date.now(), '+inf');
    if (ids.length === 0) return [];
    const raw = await Promise.all(ids.map((id) => this.node.get(this.names.instance(id))));
    return raw.flatMap((r) => (r ? [JSON.parse(r) as InstanceView] : []));
  }

  /** The group's last `count` events of each stream asked for, newest first. */
  async events(count: number, streams: ReadonlyArray<'events' | 'busy'>): Promise<BoardEvent[]> {
    const read = await Promise.all(
      streams.map((s) => this.node.xrevrange(this.names[s], '+', '-', 'COUNT', count)),
    );
    return read.flat().flatMap(([, fields]) => {
      const at = fields.indexOf('e');
      return at < 0 ? [] : [JSON.parse(fields[at + 1]) as BoardEvent];
    });
  }

  /** Lock keys and queues whose key contains `search`, examining at most `maxScan` keys. */
  async scan(search: string, maxScan: number): Promise<ScanResult> {
    const pattern = this.space.scanPattern(search);
    const locks: string[] = [];
    const queues: string[] = [];
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
          const lock = this.space.keyOf(redisKey);
          if (lock !== undefined) locks.push(lock);
          else if (redisKey.endsWith('}:q')) {
            const key = this.space.keyOf(redisKey.slice(0, -2));
            if (key !== undefined) queues.push(key);
          }
        }
      } while (cursor !== '0');
    }
    return { locks: unique(locks), queues: unique(queues), complete };
  }

  /** The holder and lease of each key. */
  async locks(keys: readonly string[]): Promise<StoredLock[]> {
    return Promise.all(
      keys.map(async (key) => {
        const lockKey = this.space.lockKey(key);
        const [value, pttl] = await Promise.all([this.node.get(lockKey), this.node.pttl(lockKey)]);
        let shares: Array<[string, number]> = [];
        if (value?.startsWith('\0')) {
          const flat = await this.node.zrange(this.space.lineKeys(key).shared, 0, 99, 'WITHSCORES');
          shares = pairs(flat).map(([token, end]) => [token, Number(end)]);
        }
        return { key, value, pttl, shares };
      }),
    );
  }

  /** The queue of each key, in order (its first `LINE_LIMIT` waiters). */
  async lines(keys: readonly string[]): Promise<StoredLine[]> {
    const lines = await Promise.all(
      keys.map(async (key) => {
        const { queue, meta } = this.space.lineKeys(key);
        const [length, flat] = await Promise.all([
          this.node.zcard(queue),
          this.node.zrange(queue, 0, LINE_LIMIT - 1, 'WITHSCORES'),
        ]);
        const entries = pairs(flat);
        const metas = entries.length
          ? await this.node.hmget(meta, ...entries.map(([token]) => token))
          : [];
        const waiters = entries.map(([token, us], i) => ({
          token,
          queuedUs: Number(us),
          meta: metas[i] ?? null,
        }));
        return { key, length, waiters };
      }),
    );
    return lines.filter((line) => line.length > 0);
  }

  /** The server's clock, ms (queue times and shared lease ends are on it). */
  async serverTime(): Promise<number> {
    const [s, us] = await this.servers()[0].time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  /** Frees `key` if `token` still holds it; true if it did. */
  async forceRelease(key: string, token: string): Promise<boolean> {
    const freed = await this.node.eval(
      FORCE_RELEASE,
      2,
      this.space.lockKey(key),
      this.space.releaseChannel(key),
      token,
    );
    return freed === 1;
  }

  /** The servers to scan: the node, or every master of a Cluster. */
  private servers(): Redis[] {
    return isCluster(this.node) ? this.node.nodes('master') : [this.node];
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
