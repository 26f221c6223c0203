import type { LeaseEndListener } from '../watchdog/watchdog';

/**
 * A shared hold: `'read'` (a read lock: readers share the key, writers exclude them) or the
 * number of permits (>= 2) of a semaphore. Absent: the exclusive lock (a write, or permits 1).
 * @internal
 */
export type Share = 'read' | number;

/**
 * A held lock as every backend knows it: its keys, the owner token on the server, its fences,
 * and until when it is certainly ours (`validUntil`, on the `performance.now()` clock). A
 * backend that needs more per hold extends it (Redis: `RedisLease`) or keeps a record of its
 * own beside it.
 * @internal
 */
export class Lease {
  /** Set once the holder let go (the release may still be on its way to the server). */
  released = false;
  /** A shared hold's kind (read lock or permits of N); undefined for the exclusive lock. */
  share?: Share;
  /**
   * Told when the backend finds this lease lost on its own (a session that ended, a renewal
   * answering that the key is not the token's any more): the holder's watchdog, while one
   * watches.
   */
  watcher?: LeaseEndListener;
  /** When it was taken, epoch ms. */
  readonly acquiredAt = Date.now();

  constructor(
    /** Rendered keys, sorted and deduplicated. */
    readonly keys: readonly string[],
    readonly token: string,
    /** One per key, strictly increasing per key (a read hold: the key's current fence). */
    readonly fences: readonly number[],
    public ttl: number,
    public validUntil: number,
    /** How long the caller waited for it, in ms. */
    readonly waitedMs: number,
  ) {}

  /** Whether the lease is still certainly ours at `now`. */
  validAt(now: number): boolean {
    return now < this.validUntil;
  }

  /** Renewed: `ttl` ms from `start`, less the drift allowance. */
  renewed(start: number, ttl: number, drift: number): void {
    this.ttl = ttl;
    this.validUntil = start + ttl - drift;
  }

  /** Found lost, or ran out: it proves nothing from now on. */
  end(): void {
    this.validUntil = -Infinity;
  }
}

/** A caller a lease can be made for: its token, lease length and when it started waiting. */
export interface LeaseTaker {
  readonly token: string;
  readonly ttl: number;
  readonly startedAt: number;
}

/**
 * Lease arithmetic in one place (Redlock's validity: ttl - elapsed - drift, with
 * drift = ttl * driftFactor + 2 ms), the same on every backend.
 * @internal
 */
export class Leases {
  constructor(private readonly driftFactor: number) {}

  /** The clock drift allowance of a lease of `ttl` ms. */
  drift(ttl: number): number {
    return Math.round(ttl * this.driftFactor) + 2;
  }

  /** Until when a lease of `ttl` ms set at `start` is certainly ours. */
  validUntil(start: number, ttl: number): number {
    return start + ttl - this.drift(ttl);
  }
}
