import { performance } from 'node:perf_hooks';
import type { Lease } from './lease';

/** A hold of this process: its lease, and when and how it runs out unless renewed. @internal */
export interface SessionHold {
  readonly lease: Lease;
  /** `performance.now()` at which this process frees the keys unless `extend` renews them. */
  expiresAt: number;
  timer?: NodeJS.Timeout;
  /**
   * Counted as held by this process (`LocalLocks`): from the take until the holder lets go (a
   * `minHold` keeps the keys on the server a while longer, uncounted).
   */
  counted?: boolean;
}

/**
 * Calls `expire` once `hold.expiresAt` has passed, never before (Node's timers can fire a
 * millisecond early: an early timer waits the rest). Armed again by every renewal; the timer
 * never keeps the process alive (a lease left behind by a test or a forgotten handle).
 * @internal
 */
export function armExpiry(hold: SessionHold, expire: () => void): void {
  clearTimeout(hold.timer);
  hold.timer = setTimeout(
    () => {
      if (performance.now() < hold.expiresAt) return armExpiry(hold, expire);
      expire();
    },
    Math.max(1, Math.ceil(hold.expiresAt - performance.now())),
  );
  hold.timer.unref();
}

/**
 * The release guard of every backend: true the first time the holder lets `lease` go (by
 * `release` or `releaseByExpiry`), false at every later call, which has nothing left to do.
 * @internal
 */
export function letGo(lease: Lease): boolean {
  if (lease.released) return false;
  lease.released = true;
  return true;
}
