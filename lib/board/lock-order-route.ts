import type { LockService } from '../api/lock.service';
import type { LockOrderGraphView } from '../lock-order/order-graph-view';

/** What `GET <board>/api/lock-order` answers when lock-order checking is off. */
const OFF: LockOrderGraphView & { readonly off: true } = {
  classes: [],
  edges: [],
  cycles: [],
  off: true,
};

/**
 * The body of `GET <board>/api/lock-order`: the lock-order graph of the instance that serves the
 * page (its own edges and those it read from the other instances through the group's backend),
 * for the board's "Lock order" panel (`ui/lock-order-panel.mjs`).
 * @internal
 */
export function lockOrderGraph(locks: LockService): LockOrderGraphView {
  return locks.lockOrderGraph() ?? OFF;
}
