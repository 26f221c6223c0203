import type { OrderEdgeStore, StoredOrderEdge } from '../core/order-edge-store';
import { parseStoredEdge, storedEdgeField } from '../core/order-edge-store';
import type { RedisNode } from './protocol/redis-node';

/**
 * The lock-order edges of a Redis group (see `lock-order/`): one hash, `<keyPrefix>order-edges`
 * (no lock key has that name: theirs are `<keyPrefix>{key}`), a field per class pair whose value
 * is the edge with its first site (`HSETNX`: the first instance's stays). On a quorum every node
 * gets the edge and a read merges them: a node that was down when an edge was sent misses it,
 * the others have it.
 * @internal
 */
export class RedisOrderEdges implements OrderEdgeStore {
  private readonly key: string;

  constructor(
    private readonly nodes: readonly RedisNode[],
    keyPrefix: string,
  ) {
    this.key = `${keyPrefix}order-edges`;
  }

  async add(edge: StoredOrderEdge): Promise<void> {
    const field = storedEdgeField(edge);
    const value = JSON.stringify(edge);
    const sent = await Promise.allSettled(this.nodes.map((n) => n.hsetnx(this.key, field, value)));
    const failed = sent.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed && sent.every((r) => r.status === 'rejected')) throw failed.reason;
  }

  async list(): Promise<StoredOrderEdge[]> {
    const read = await Promise.allSettled(this.nodes.map((n) => n.hgetall(this.key)));
    const edges = new Map<string, StoredOrderEdge>();
    for (const r of read) {
      if (r.status !== 'fulfilled') continue;
      for (const [field, text] of Object.entries(r.value)) {
        const edge = edges.has(field) ? undefined : parseStoredEdge(text);
        if (edge) edges.set(field, edge);
      }
    }
    const failed = read.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed && edges.size === 0 && read.every((r) => r.status === 'rejected')) {
      throw failed.reason;
    }
    return [...edges.values()];
  }
}
