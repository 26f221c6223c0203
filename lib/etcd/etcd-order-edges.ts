import type { Etcd3 } from 'etcd3';
import type { OrderEdgeStore, StoredOrderEdge } from '../core/order-edge-store';
import { parseStoredEdge, storedEdgeField } from '../core/order-edge-store';
import { prefixEnd } from './etcd-names';

/**
 * The lock-order edges of an etcd group (see `lock-order/`): a key per class pair under
 * `<keyPrefix>order-edges/` (lock lines are `<keyPrefix><length>:<key>/`, so none starts so),
 * created once (a transaction on its create revision: the first instance's site stays), without
 * a lease: the graph outlives the instances that saw it.
 * @internal
 */
export class EtcdOrderEdges implements OrderEdgeStore {
  private readonly prefix: string;

  constructor(
    private readonly client: Etcd3,
    keyPrefix: string,
  ) {
    this.prefix = `${keyPrefix}order-edges/`;
  }

  async add(edge: StoredOrderEdge): Promise<void> {
    const key = Buffer.from(this.prefix + storedEdgeField(edge));
    await this.client.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [{ request_put: { key, value: Buffer.from(JSON.stringify(edge)) } }],
    });
  }

  async list(): Promise<StoredOrderEdge[]> {
    const key = Buffer.from(this.prefix);
    const res = await this.client.kv.range({ key, range_end: prefixEnd(key) });
    const edges: StoredOrderEdge[] = [];
    for (const kv of res.kvs) {
      const edge = parseStoredEdge(kv.value.toString());
      if (edge) edges.push(edge);
    }
    return edges;
  }
}
