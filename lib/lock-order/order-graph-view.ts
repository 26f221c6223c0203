import type { LockOrderEdge } from '../errors/lock-order.error';
import type { FoundCycle } from './order-report';
import type { OrderGraph } from './order-graph';
import { publicEdges } from './order-report';

/** The lock-order graph of an instance as the lock board draws it. @internal */
export interface LockOrderGraphView {
  /** Every class with an edge, by label. */
  readonly classes: readonly string[];
  /** Every edge, its first site and instance, and whether a cycle found runs through it. */
  readonly edges: readonly (LockOrderEdge & { readonly inCycle: boolean })[];
  /** The cycles found, each from the edge that closed it. */
  readonly cycles: readonly (readonly LockOrderEdge[])[];
}

/**
 * What the board shows of lock-order checking: the classes, the edges (this instance's and
 * those read from the other instances) and the cycles found, cycle edges marked.
 * @internal
 */
export function orderGraphView(
  graph: OrderGraph,
  cycles: readonly FoundCycle[],
): LockOrderGraphView {
  const inCycles = new Set<string>();
  for (const { cycle } of cycles) for (const e of cycle) inCycles.add(`${e.from.id}>${e.to.id}`);
  const classes = new Set<string>();
  const edges = [];
  for (const e of graph.edges()) {
    classes.add(e.from.label);
    classes.add(e.to.label);
    const [edge] = publicEdges([e]);
    edges.push({ ...edge, inCycle: inCycles.has(`${e.from.id}>${e.to.id}`) });
  }
  return {
    classes: [...classes].sort(),
    edges,
    cycles: cycles.map((c) => publicEdges(c.cycle)),
  };
}
