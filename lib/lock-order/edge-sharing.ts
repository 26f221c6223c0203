import { ORDER_STORE_FAILED } from './lock-order.messages';
import { type OrderEdgeStore, type StoredOrderEdge, storedEdgeField } from '../core/order-edge-store';

/**
 * Shares this instance's lock-order edges through the stores of its groups' backends, and reads
 * the other instances' back: an edge is sent once per process (fire and forget, after the
 * check), the stores are read at startup and then every `refreshMs` in the background. Nothing
 * here is on a lock's path.
 * @internal
 */
export class EdgeSharing {
  /** Edges sent (or being sent) by this process, per group. */
  private readonly sent = new Set<string>();
  /** Failures already logged, per group and operation (an outage logs once, not per edge). */
  private readonly failing = new Set<string>();
  /** Edges whose store failed: sent again at the next refresh. */
  private readonly retry = new Map<
    string,
    { group: string; store: OrderEdgeStore; edge: StoredOrderEdge }
  >();
  /** Edges being stored right now (shutdown waits for them, bounded). */
  private readonly inFlight = new Set<Promise<void>>();
  private timer?: NodeJS.Timeout;
  private stores: readonly (readonly [string, OrderEdgeStore])[] = [];

  constructor(
    private readonly merge: (edges: readonly StoredOrderEdge[]) => void,
    private readonly warn: (message: string) => void,
    private readonly refreshMs: number,
  ) {}

  /**
   * Reads every store once, waiting at most `firstReadMs` (so the first locks know the other
   * instances' edges), then every `refreshMs` in the background.
   */
  async start(
    stores: readonly (readonly [string, OrderEdgeStore])[],
    firstReadMs: number,
  ): Promise<void> {
    this.stores = stores;
    if (stores.length === 0) return;
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      this.refresh(),
      new Promise<void>((resolve) => (bound = setTimeout(resolve, firstReadMs))),
    ]);
    clearTimeout(bound);
  }

  /** Stops reading, and waits up to `ms` for the edges still being stored. */
  async stop(ms: number): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    if (this.inFlight.size === 0) return;
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(this.inFlight),
      new Promise<void>((resolve) => (bound = setTimeout(resolve, ms))),
    ]);
    clearTimeout(bound);
  }

  /** Stores `edge` in `store` unless this process sent it already. */
  send(group: string, store: OrderEdgeStore, edge: StoredOrderEdge): void {
    const field = `${group}\0${storedEdgeField(edge)}`;
    if (this.sent.has(field)) return;
    this.sent.add(field);
    const adding = store.add(edge).then(
      () => {
        this.failing.delete(`${group}\0add`);
      },
      (err: unknown) => {
        this.sent.delete(field);
        this.retry.set(field, { group, store, edge });
        this.failed(group, 'add', err);
      },
    );
    this.inFlight.add(adding);
    void adding.finally(() => this.inFlight.delete(adding));
  }

  /** Sends again what failed, then reads every store and merges what it holds. */
  async refresh(): Promise<void> {
    const again = [...this.retry.values()];
    this.retry.clear();
    for (const { group, store, edge } of again) this.send(group, store, edge);
    await Promise.all(
      this.stores.map(async ([group, store]) => {
        try {
          this.merge(await store.list());
          this.failing.delete(`${group}\0list`);
        } catch (err) {
          this.failed(group, 'list', err);
        }
      }),
    );
  }

  private failed(group: string, what: 'add' | 'list', err: unknown): void {
    const key = `${group}\0${what}`;
    if (this.failing.has(key)) return;
    this.failing.add(key);
    this.warn(ORDER_STORE_FAILED(group, what, err));
  }
}
