import { performance } from 'node:perf_hooks';
import type { ReplicaAcks, Taken } from '../redis/lock-protocol';
import type { LeaseEndListener } from '../watchdog/watchdog';

/**
 * A shared hold: `'read'` (a read lock: readers share the key, writers exclude them) or the
 * number of permits (>= 2) of a semaphore. Absent: the exclusive lock (a write, or permits 1).
 * @internal
 */
export type Share = 'read' | number;

/**
 * A held lock as the engine knows it: its keys, the owner token in Redis, its fences, and until
 * when it is certainly ours (`validUntil`, on the `performance.now()` clock).
 * @internal
 */
export class Lease {
  /** Set once the holder let go (the release may still be on its way to Redis). */
  released = false;
  /** A shared hold's kind (read lock or permits of N); undefined for the exclusive lock. */
  share?: Share;
  /** The first fence of a block reserved by a refill, if any (see `nextFence`). */
  private refill?: number;
  /**
   * A permit passed from caller to caller of this process: how many of those passes, since it
   * last went back to Redis, went past a waiter of another process queued before the caller it
   * went to.
   */
  passes = 0;
  /**
   * Told when the engine finds this lease lost on its own (a refill, or a renewal the caller
   * asked for, answering that the key is not the token's any more): the holder's watchdog,
   * while one watches.
   */
  watcher?: LeaseEndListener;

  constructor(
    /** Rendered keys, sorted and deduplicated. */
    readonly keys: readonly string[],
    readonly token: string,
    readonly fences: readonly number[],
    /**
     * Fences reserved after `fences[0]` (single key, single node), from `nextFence` on: each
     * lets the key pass to the next caller of this process with no round trip.
     */
    public spare: number,
    public ttl: number,
    /**
     * Taken by a first try with the key free: its token never queued in Redis, and most likely
     * nobody waits for it.
     */
    readonly uncontended: boolean,
    public validUntil: number,
    readonly acquiredAt: number,
    readonly waitedMs: number,
    /** Replicas that must acknowledge every renewal and handoff, if any. */
    readonly acks?: ReplicaAcks,
  ) {}

  /**
   * The fence the next caller this lease passes to in memory gets (while `spare` > 0). Derived,
   * not stored: a fence is no small integer, and a stored one would cost every hold a number.
   */
  get nextFence(): number {
    return this.refill ?? this.fences[0] + 1;
  }

  /** Whether the lease is still certainly ours at `now`. */
  validAt(now: number): boolean {
    return now < this.validUntil;
  }

  /** Renewed: `ttl` ms from `start`, less the drift allowance. */
  renewed(start: number, ttl: number, drift: number): void {
    this.ttl = ttl;
    this.validUntil = start + ttl - drift;
  }

  /**
   * More fences reserved for in-memory handoffs: `count` from `first`, all above every fence
   * handed out before (the ones left of the old block are skipped).
   */
  refilled(first: number, count: number): void {
    this.refill = first;
    this.spare = count;
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
  /** Replicas that must acknowledge its acquire and every renewal, if any. */
  readonly acks?: ReplicaAcks;
}

/**
 * Lease arithmetic in one place (Redlock's validity: ttl - elapsed - drift, with
 * drift = ttl * driftFactor + 2 ms) and every way a lease comes to be.
 * @internal
 */
export class Leases {
  constructor(private readonly driftFactor: number) {}

  /** The clock drift allowance of a lease of `ttl` ms. */
  drift(ttl: number): number {
    return Math.round(ttl * this.driftFactor) + 2;
  }

  /**
   * How long a lease of `ttl` ms must still be valid to pass to another caller of this process
   * without a round trip: what a fresh acquire would give, less one more drift allowance (so it
   * was set or renewed moments ago).
   */
  freshFor(ttl: number): number {
    return ttl - 2 * this.drift(ttl);
  }

  /** Until when a lease of `ttl` ms set at `start` is certainly ours. */
  validUntil(start: number, ttl: number): number {
    return start + ttl - this.drift(ttl);
  }

  /** A lease an acquire round took for `taker`. */
  taken(keys: readonly string[], taker: LeaseTaker, taken: Taken): Lease {
    return new Lease(
      keys,
      taker.token,
      taken.fences,
      taken.spare,
      taker.ttl,
      taken.uncontended,
      this.validUntil(taken.start, taker.ttl),
      Date.now(),
      performance.now() - taker.startedAt,
      taker.acks,
    );
  }

  /**
   * The lease passed to the next caller of this process with no round trip: Redis keeps the
   * process's token, the caller gets the next fence of the reserved block and the rest of the
   * lease. Only while the lease in Redis was set or renewed moments ago (the new holder gets at
   * least ttl minus twice the drift allowance, as from a fresh acquire), with the same ttl and a
   * spare fence; otherwise undefined.
   */
  passedOn(lease: Lease, next: LeaseTaker): Lease | undefined {
    if (lease.spare <= 0 || next.ttl !== lease.ttl) return undefined;
    const now = performance.now();
    if (lease.validUntil - now < this.freshFor(lease.ttl)) return undefined;
    return new Lease(
      lease.keys,
      lease.token,
      [lease.nextFence],
      lease.spare - 1,
      lease.ttl,
      false,
      lease.validUntil,
      Date.now(),
      now - next.startedAt,
      lease.acks,
    );
  }
}
