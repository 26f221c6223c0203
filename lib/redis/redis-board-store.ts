import type { BoardPublishedEvent, BoardViewStore } from '../core/board-source';
import type { KeySpace } from './protocol/key-space';
import type { RedisNode } from './protocol/redis-node';

/** How long a group's event streams live after their last event, ms. */
const EVENTS_LIVE_MS = 24 * 3_600_000;

/**
 * Where the instances of a Redis group publish their board views and events: under
 * `<keyPrefix>board:{<group>}:*` on its first node (see `key-space.ts`).
 * @internal
 */
export class RedisBoardStore implements BoardViewStore {
  private readonly names: ReturnType<KeySpace['boardKeys']>;

  constructor(
    group: string,
    private readonly node: RedisNode,
    space: KeySpace,
  ) {
    this.names = space.boardKeys(group);
  }

  async publish(
    id: string,
    view: string,
    events: readonly BoardPublishedEvent[],
    expiry: number,
    eventsKept: number,
  ): Promise<boolean> {
    const now = Date.now();
    const multi = this.node.multi();
    multi.set(this.names.instance(id), view, 'PX', expiry);
    multi.zadd(this.names.instances, now + expiry, id);
    multi.zremrangebyscore(this.names.instances, '-inf', now);
    const streams = new Set<string>();
    for (const e of events) {
      const stream = this.names[e.stream];
      streams.add(stream);
      multi.xadd(stream, 'MAXLEN', '~', eventsKept, '*', 'e', e.json);
    }
    // Events outlive the instance that wrote them (a lost lease last night), not the group.
    for (const stream of streams) multi.pexpire(stream, EVENTS_LIVE_MS);
    // Read in the same round trip: whether a page is open.
    multi.exists(this.names.watched);
    const replies = await multi.exec();
    return replies?.[replies.length - 1]?.[1] === 1;
  }

  async watch(ms: number): Promise<void> {
    await this.node.set(this.names.watched, '1', 'PX', ms);
  }

  async withdraw(id: string): Promise<void> {
    await Promise.all([
      this.node.del(this.names.instance(id)),
      this.node.zrem(this.names.instances, id),
    ]);
  }

  async views(): Promise<string[]> {
    const ids = await this.node.zrangebyscore(this.names.instances, Date.now(), '+inf');
    if (ids.length === 0) return [];
    const raw = await Promise.all(ids.map((id) => this.node.get(this.names.instance(id))));
    return raw.filter((r): r is string => r !== null);
  }

  async events(count: number, streams: ReadonlyArray<'events' | 'busy'>): Promise<string[]> {
    const read = await Promise.all(
      streams.map((s) => this.node.xrevrange(this.names[s], '+', '-', 'COUNT', count)),
    );
    return read.flat().flatMap(([, fields]) => {
      const at = fields.indexOf('e');
      return at < 0 ? [] : [fields[at + 1]];
    });
  }
}
