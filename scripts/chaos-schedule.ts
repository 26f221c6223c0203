/**
 * The chaos demo's schedule: which faults, in which order, at which stock read of the sale, all
 * picked by a seed so that a run can be repeated and its output names what it did.
 */
import { mulberry32 } from '../bench/seeded';

/** The faults the chaos demo injects, each into the holder of the product lock. */
export const FAULT_KINDS = ['stall', 'redis-restart', 'kill'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface ScheduledFault {
  readonly kind: FaultKind;
  /**
   * The fault hits the holder of the product lock that makes this read of the stock (1 = the
   * first read of the sale), or the next read if the previous fault is still going on then.
   */
  readonly atRead: number;
}

export interface ChaosSchedule {
  readonly seed: number;
  /** In the order they happen. */
  readonly faults: readonly ScheduledFault[];
  /**
   * How long the stalled holder stays stopped at least: longer than its lease. It is resumed
   * once this has passed and the next holder has written.
   */
  readonly stallMs: number;
  /** The lease of the product lock (the sample's `SAMPLE_LOCK_TTL_MS`). */
  readonly ttlMs: number;
  /**
   * A holder whose lock was lost (stalled, or Redis restarted) writes once newer holders have
   * made this many sales since its read, and before the next one reads.
   */
  readonly newerSales: number;
}

/**
 * The schedule for `seed`: `kinds` in a seeded order, each at a seeded read inside its own slice
 * of the first 70% of the stock's reads (so every fault hits while there is stock left to
 * sell), a stall of the lease plus a seeded 20-50% of it, and 5-15% of the stock sold by newer
 * holders before a late write.
 *
 * @example
 * chaosSchedule(7, { stock: 100, ttlMs: 2_000 });
 * // { seed: 7, faults: [{ kind: 'kill', atRead: 9 }, ...], stallMs: 2_600, ttlMs: 2_000 }
 */
export function chaosSchedule(
  seed: number,
  options: { stock: number; ttlMs: number; kinds?: readonly FaultKind[] },
): ChaosSchedule {
  const next = mulberry32(seed);
  const kinds = [...(options.kinds ?? FAULT_KINDS)];
  // Fisher-Yates with the seeded generator: the order of the faults.
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j], kinds[i]];
  }
  const first = Math.max(2, Math.floor(options.stock * 0.05));
  const slice = Math.max(1, Math.floor((options.stock * 0.7 - first) / kinds.length));
  const faults = kinds.map((kind, i) => ({
    kind,
    atRead: first + i * slice + Math.floor(next() * Math.max(1, slice / 2)),
  }));
  const stallMs = Math.round((options.ttlMs * (1.2 + next() * 0.3)) / 100) * 100;
  const newerSales = Math.max(1, Math.round(options.stock * (0.05 + next() * 0.1)));
  return { seed, faults, stallMs, ttlMs: options.ttlMs, newerSales };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** One line per fault, as the demo prints the schedule. */
export function describeSchedule(schedule: ChaosSchedule): string[] {
  const k = schedule.newerSales;
  return schedule.faults.map((f) => {
    const at = `read ${String(f.atRead).padStart(3)}`;
    switch (f.kind) {
      case 'stall':
        return (
          `${at}: SIGSTOP the lock's holder right after it read the stock; SIGCONT after ` +
          `${seconds(schedule.stallMs)} (lease ${seconds(schedule.ttlMs)}) and ${k} newer sales`
        );
      case 'redis-restart':
        return (
          `${at}: restart Redis, no persistence, while the holder is between read and write; ` +
          `it writes after ${k} newer sales`
        );
      case 'kill':
        return `${at}: SIGKILL the lock's holder, then start that instance again`;
    }
  });
}
