import type { LockOrderEdge } from '../errors/lock-order.error';
import {
  CYCLE_FIX,
  CYCLE_TITLE,
  EDGE_LINE,
  SELF_FIX,
  SELF_TABLE,
  SELF_TITLE,
  TABLE_LINE,
  TABLE_TITLE,
} from './lock-order.messages';
import type { OrderEdge } from './order-graph';

/**
 * A cycle as the public error and event carry it: class labels, first sites, instances.
 * @internal
 */
export const publicEdges = (cycle: readonly OrderEdge[]): LockOrderEdge[] =>
  cycle.map((e) => ({ from: e.from.label, to: e.to.label, site: e.site, instance: e.instance }));

/**
 * The report of a cycle, as lockdep prints one: each edge with where it was first seen, then a
 * "possible deadlock" table in which instance i holds the class of edge i and waits for the
 * next, then what to change. `cycle[0]` is the edge of the call that closed it.
 * @internal
 */
export function cycleReport(cycle: readonly OrderEdge[]): string {
  const first = cycle[0];
  if (cycle.length === 1 && first.from.id === first.to.id) {
    return [
      SELF_TITLE(first.from.label),
      EDGE_LINE(first.from.label, first.to.label, first.site, first.instance),
      TABLE_TITLE,
      ...SELF_TABLE(first.instance, first.site, first.from.label),
      SELF_FIX(first.from.template),
    ].join('\n');
  }
  // The table reads in the order the cycle runs, from the oldest edge to the closing one.
  const ordered = [...cycle.slice(1), first];
  return [
    CYCLE_TITLE(cycle.length),
    ...ordered.map((e) => EDGE_LINE(e.from.label, e.to.label, e.site, e.instance)),
    TABLE_TITLE,
    ...ordered.map((e, i) => TABLE_LINE(i + 1, e.instance, e.site, e.from.label, e.to.label)),
    CYCLE_FIX,
  ].join('\n');
}

/** One key per cycle, whichever edge closed it: its edges' class pairs, sorted. @internal */
export const cycleKey = (cycle: readonly OrderEdge[]): string =>
  cycle
    .map((e) => `${e.from.id}>${e.to.id}`)
    .sort()
    .join(',');

/** A cycle found, as the checker hands it to whoever reports it. @internal */
export interface FoundCycle {
  /** Its edges, the one that closed it first. */
  readonly cycle: readonly OrderEdge[];
  readonly report: string;
  /** The keys of the call that closed it (none when another instance's edge did). */
  readonly keys: readonly string[];
  /** The group of the call that closed it (or of the store the closing edge came from). */
  readonly group: string;
}
