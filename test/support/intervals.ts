import { byKey } from '../../lib/testing/history/overlaps';
/**
 * An independent checker of critical sections: every holder reports `[start, end]` of the code it
 * ran under a lock (ms of the machine's monotonic clock with sub-ms precision, `now()`: one
 * clock for every process of the machine), and this module finds the
 * pairs that overlapped. It knows nothing about the library, so a bug in the lock cannot hide a
 * bug in the check.
 */

/** One critical section, as reported by whoever ran it. */
export interface Interval {
  /** The lock key the section ran under (one record per key for multi-key locks). */
  readonly key: string;
  readonly start: number;
  readonly end: number;
  /** Fencing token the holder saw, when it reported one. */
  readonly fence?: number;
  /** Who ran it (process id, worker index...), for messages. */
  readonly by?: string | number;
}

/**
 * Ms of the machine's monotonic clock (CLOCK_MONOTONIC, which every process of a Linux machine
 * reads alike): comparable across processes. `performance.timeOrigin + performance.now()` is not
 * quite: each process pins its origin to the wall clock once, at its start, so a clock step
 * between two starts shifts one process's times against the other's.
 */
export const now = (): number => Number(process.hrtime.bigint()) / 1e6;

/** Groups intervals by key: the history checker's own. */
export { byKey };

/**
 * Every pair of intervals of the same key that overlap (one starts before the other ended).
 * Touching ends (`a.end === b.start`) do not count: the next holder may start the instant the
 * previous one stopped.
 */
export function findOverlaps<T extends Interval>(intervals: readonly T[]): [T, T][] {
  const overlaps: [T, T][] = [];
  for (const list of byKey(intervals).values()) {
    const sorted = [...list].sort((a, b) => a.start - b.start || a.end - b.end);
    // Sweep: compare each interval with every earlier one still open (usually none).
    const open: T[] = [];
    for (const cur of sorted) {
      for (let i = open.length - 1; i >= 0; i--) {
        if (open[i].end <= cur.start) open.splice(i, 1);
      }
      for (const o of open) overlaps.push([o, cur]);
      open.push(cur);
    }
  }
  return overlaps;
}

/**
 * The largest number of intervals running at one instant (over all keys given). Ends are
 * processed before starts at the same timestamp, consistently with `findOverlaps`.
 */
export function maxConcurrency(intervals: readonly Interval[]): number {
  const events: [number, number][] = [];
  for (const i of intervals) events.push([i.start, 1], [i.end, -1]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let max = 0;
  for (const [, delta] of events) {
    cur += delta;
    if (cur > max) max = cur;
  }
  return max;
}

/** The largest concurrency seen on any single key. */
export function maxConcurrencyPerKey(intervals: readonly Interval[]): number {
  let max = 0;
  for (const list of byKey(intervals).values()) max = Math.max(max, maxConcurrency(list));
  return max;
}

/** A short description of overlapping pairs, for assertion messages. */
export function describeOverlaps(pairs: readonly [Interval, Interval][], limit = 5): string {
  return pairs
    .slice(0, limit)
    .map(
      ([a, b]) =>
        `${a.key}: [${a.start.toFixed(3)}, ${a.end.toFixed(3)}] by ${a.by ?? '?'} overlaps ` +
        `[${b.start.toFixed(3)}, ${b.end.toFixed(3)}] by ${b.by ?? '?'}`,
    )
    .join('\n');
}
