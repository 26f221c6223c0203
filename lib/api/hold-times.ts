import { LockNotAcquiredError } from '../errors';
import { isRetryStated } from '../errors/stated-retry';
import { sliceKey } from './segmented.strategy';

/** Weight of the newest hold in a key's average: recent holds count most. */
const WEIGHT = 0.3;

/** Keys remembered per client group: the most recently released ones. */
export const HOLD_TIMES_LIMIT = 1_024;

/**
 * How long calls of this process held each key lately, for the `Retry-After` of a busy answer:
 * a moving average per key (exponentially weighted), over the most recently released keys of one
 * client group. A holder's remaining lease says nothing useful (the watchdog keeps it near
 * `ttl`), a key's usual hold does. Hot path: one map update per key per release, no allocation
 * beyond the map's own entry.
 * @internal
 */
export class HoldTimes {
  /** Average hold in ms per key, least recently released first. */
  private readonly averages = new Map<string, number>();
  /** The key recorded last (already at the end of `averages`). */
  private last?: string;

  constructor(private readonly limit = HOLD_TIMES_LIMIT) {}

  /** Keys remembered (for tests). */
  get size(): number {
    return this.averages.size;
  }

  /** A call held `key` for `ms`. */
  record(key: string, ms: number): void {
    const average = this.averages.get(key);
    if (average !== undefined) {
      // Hot path (every release): a whole number of ms (a small integer is stored without
      // allocating), moved to the end (release order: the first key is the one to forget)
      // unless it is there already, as a key released again and again is.
      const next = Math.round(average + WEIGHT * (ms - average));
      if (key !== this.last) {
        this.averages.delete(key);
        this.last = key;
      }
      this.averages.set(key, next);
      return;
    }
    if (this.averages.size >= this.limit) {
      for (const oldest of this.averages.keys()) {
        this.averages.delete(oldest);
        break;
      }
    }
    this.averages.set(key, Math.round(ms));
    this.last = key;
  }

  /** The usual hold of `key` in ms, if a call of this process released it lately. */
  estimate(key: string): number | undefined {
    return this.averages.get(key);
  }
}

/**
 * The retry estimate of a busy key this process has no hold history of: the holder's lease
 * left says little (the watchdog keeps it near `ttl` whatever the hold), so at most this.
 */
export const FIRST_BUSY_RETRY_MS = 1_000;

/**
 * The busy answer with a `retryAfterMs` a client can use: the usual hold of its keys here (the
 * longest of them, as all must free up; for a segmented call the shortest of its slices, as any
 * one will do), never past the holder's remaining lease. Keys no call of this process released
 * lately get the remaining lease, at most {@link FIRST_BUSY_RETRY_MS}. A stated one (a testing
 * control's) is kept as it is.
 * @internal
 */
export function withRetryEstimate(
  error: LockNotAcquiredError,
  times: HoldTimes | undefined,
  segments?: number,
): LockNotAcquiredError {
  if (isRetryStated(error)) return error;
  const estimate = times ? usualHold(error.keys, times, segments) : undefined;
  // A lease of 0 or -1 (none known, or a key written without expiry) bounds nothing.
  const lease = error.retryAfterMs;
  const bound = estimate ?? FIRST_BUSY_RETRY_MS;
  const retryAfterMs = lease > 0 ? Math.min(bound, lease) : bound;
  if (retryAfterMs === lease) return error;
  return new LockNotAcquiredError(error.keys, error.waitedMs, retryAfterMs);
}

/** The usual hold of a busy call's keys here, if every key (or some slice) has one. */
function usualHold(
  keys: readonly string[],
  times: HoldTimes,
  segments: number | undefined,
): number | undefined {
  let estimate: number | undefined;
  if (segments === undefined) {
    for (const key of keys) {
      const usual = times.estimate(key);
      if (usual === undefined) return undefined;
      estimate = Math.max(estimate ?? 0, usual);
    }
  } else {
    for (let s = 0; s < segments; s++) {
      const usual = times.estimate(sliceKey(keys[0], s));
      if (usual !== undefined) estimate = Math.min(estimate ?? Infinity, usual);
    }
  }
  return estimate;
}
