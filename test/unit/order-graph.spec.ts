import { LockClasses } from '../../lib/lock-order/lock-class';
import { type OrderEdge, OrderGraph } from '../../lib/lock-order/order-graph';
import { mulberry32 } from '../../bench/seeded';

/**
 * The cycle check of the lock-order graph (lib/lock-order/order-graph.ts) against a brute-force
 * search on seeded random graphs: adding `from -> to` closes a cycle exactly when the transitive
 * closure of the graph so far has `to` reaching `from` (or `from === to`), and the path it
 * returns is made of edges of the graph that run from `to` to `from`.
 */

/** Whether `goal` is reachable from `start` over `edges` (Floyd-Warshall closure). */
function reachesBrute(n: number, edges: readonly [number, number][], start: number, goal: number) {
  const r = Array.from({ length: n }, () => new Array<boolean>(n).fill(false));
  for (const [a, b] of edges) r[a][b] = true;
  for (let k = 0; k < n; k++)
    for (let i = 0; i < n; i++)
      if (r[i][k]) for (let j = 0; j < n; j++) if (r[k][j]) r[i][j] = true;
  return r[start][goal];
}

describe('OrderGraph cycle check (seeded property test against brute force)', () => {
  const SEEDS = 200;

  it(`agrees with the transitive closure on ${SEEDS} random graphs`, () => {
    let cyclesSeen = 0;
    for (let seed = 1; seed <= SEEDS; seed++) {
      const rand = mulberry32(seed);
      const n = 2 + Math.floor(rand() * 10);
      const classes = new LockClasses();
      const nodes = Array.from({ length: n }, (_, i) =>
        classes.get('default', 'exclusive', `c${i}`),
      );
      const graph = new OrderGraph();
      const edges: [number, number][] = [];
      const steps = Math.floor(rand() * n * 3);
      for (let step = 0; step < steps; step++) {
        const from = Math.floor(rand() * n);
        const to = Math.floor(rand() * n);
        const cycle = graph.cycleThrough(nodes[from], nodes[to]);
        const expected = from === to || reachesBrute(n, edges, to, from);
        expect({ seed, step, closes: cycle !== undefined }).toEqual({
          seed,
          step,
          closes: expected,
        });
        if (cycle) {
          cyclesSeen++;
          checkPath(graph, cycle, to, from);
        }
        // Cycles stay in the graph (as 'warn' adds them): the search must still end.
        const edge: OrderEdge = { from: nodes[from], to: nodes[to], site: 's', instance: 'i' };
        if (graph.add(edge)) edges.push([from, to]);
      }
      expect(graph.size).toBe(edges.length);
    }
    // The draw must reach the interesting case often.
    expect(cyclesSeen).toBeGreaterThan(SEEDS);
  });
});

/** `path` runs over edges of `graph` from `start` to `goal` (empty only when they are one). */
function checkPath(graph: OrderGraph, path: readonly OrderEdge[], start: number, goal: number) {
  if (start === goal) return expect(path).toEqual([]);
  expect(path.length).toBeGreaterThan(0);
  expect(path[0].from.id).toBe(start);
  expect(path[path.length - 1].to.id).toBe(goal);
  for (let i = 0; i < path.length; i++) {
    expect(graph.get(path[i].from, path[i].to)).toBe(path[i]);
    if (i > 0) expect(path[i].from.id).toBe(path[i - 1].to.id);
  }
}
