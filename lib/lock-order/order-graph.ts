import type { LockClass } from './lock-class';

/**
 * One edge of the lock-order graph: a context held `from` when it asked for `to`, first seen at
 * `site` (`Class.method`, or the caller of `LockService.using`) in `instance`.
 * @internal
 */
export interface OrderEdge {
  readonly from: LockClass;
  readonly to: LockClass;
  readonly site: string;
  readonly instance: string;
}

/**
 * The lock-order graph: classes as nodes, "held -> asked for" as edges, each with where it was
 * first seen. Only a new edge is checked (a path from its target back to its source closes a
 * cycle): edges are few and added once each, so a depth-first search over what the target
 * reaches is all the check needs, and the steady state never gets here (see `HeldChain`).
 * @internal
 */
export class OrderGraph {
  private readonly out = new Map<number, Map<number, OrderEdge>>();
  private count = 0;

  /** Edges in the graph. */
  get size(): number {
    return this.count;
  }

  get(from: LockClass, to: LockClass): OrderEdge | undefined {
    return this.out.get(from.id)?.get(to.id);
  }

  /** Adds `edge` unless its pair is there already (the first site stays). Whether it was new. */
  add(edge: OrderEdge): boolean {
    let targets = this.out.get(edge.from.id);
    if (!targets) this.out.set(edge.from.id, (targets = new Map()));
    if (targets.has(edge.to.id)) return false;
    targets.set(edge.to.id, edge);
    this.count++;
    return true;
  }

  /**
   * The cycle adding `from -> to` would close, as the edges after the new one (from `to` back to
   * `from`; empty for a class nested in itself), or undefined when it closes none.
   */
  cycleThrough(from: LockClass, to: LockClass): OrderEdge[] | undefined {
    if (from.id === to.id) return [];
    return this.path(to.id, from.id);
  }

  /** A path of edges from `start` to `goal`, found depth first, or undefined. */
  path(start: number, goal: number): OrderEdge[] | undefined {
    // How each reached node was reached, to walk the path back once `goal` is found.
    const reachedBy = new Map<number, OrderEdge | null>([[start, null]]);
    const stack = [start];
    while (stack.length > 0) {
      const node = stack.pop() as number;
      const targets = this.out.get(node);
      if (!targets) continue;
      for (const [next, edge] of targets) {
        if (reachedBy.has(next)) continue;
        reachedBy.set(next, edge);
        if (next === goal) return walkBack(reachedBy, goal);
        stack.push(next);
      }
    }
    return undefined;
  }

  /** Every edge, grouped by source class. */
  *edges(): IterableIterator<OrderEdge> {
    for (const targets of this.out.values()) yield* targets.values();
  }
}

function walkBack(reachedBy: Map<number, OrderEdge | null>, goal: number): OrderEdge[] {
  const path: OrderEdge[] = [];
  for (let edge = reachedBy.get(goal); edge; edge = reachedBy.get(edge.from.id)) {
    path.push(edge);
  }
  return path.reverse();
}
