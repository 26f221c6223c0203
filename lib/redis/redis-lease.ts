import { performance } from 'node:perf_hooks';
import { Lease, type LeaseTaker, Leases } from '../core/lease';
import type { ReplicaAcks } from '../core/lock-backend';
import type { Taken } from './protocol/acquire-round';

/**
 * A lease on Redis: the neutral lease, plus what the Redis engine keeps per hold to pass a key
 * from caller to caller of this process with no round trip (spare fences, refills, passes), and
 * the replicas its writes wait for.
 * @internal
 */
export class RedisLease extends Lease {
  /** The first fence of a block reserved by a refill, if any (see `nextFence`). */
  private refill?: number;
  /**
   * A permit passed from caller to caller of this process: how many of those passes, since it
   * last went back to Redis, went past a waiter of another process queued before the caller it
   * went to.
   */
  passes = 0;

  constructor(
    keys: readonly string[],
    token: string,
    fences: readonly number[],
    /**
     * Fences reserved after `fences[0]` (single key, single node), from `nextFence` on: each
     * lets the key pass to the next caller of this process with no round trip.
     */
    public spare: number,
    ttl: number,
    /**
     * Taken by a first try with the key free: its token never queued in Redis, and most likely
     * nobody waits for it.
     */
    readonly uncontended: boolean,
    validUntil: number,
    waitedMs: number,
    /** Replicas that must acknowledge every renewal and handoff, if any. */
    readonly acks?: ReplicaAcks,
  ) {
    super(keys, token, fences, ttl, validUntil, waitedMs);
  }

  /**
   * The fence the next caller this lease passes to in memory gets (while `spare` > 0). Derived,
   * not stored: a fence is no small integer, and a stored one would cost every hold a number.
   */
  get nextFence(): number {
    return this.refill ?? this.fences[0] + 1;
  }

  /**
   * More fences reserved for in-memory handoffs: `count` from `first`, all above every fence
   * handed out before (the ones left of the old block are skipped).
   */
  refilled(first: number, count: number): void {
    this.refill = first;
    this.spare = count;
  }
}

/** A caller a Redis lease can be made for: a lease taker and the replicas it waits for. */
export interface RedisTaker extends LeaseTaker {
  /** Replicas that must acknowledge its acquire and every renewal, if any. */
  readonly acks?: ReplicaAcks;
}

/**
 * Every way a Redis lease comes to be: taken by a round, or passed in memory to the next
 * caller of this process.
 * @internal
 */
export class RedisLeases extends Leases {
  /**
   * How long a lease of `ttl` ms must still be valid to pass to another caller of this process
   * without a round trip: what a fresh acquire would give, less one more drift allowance (so it
   * was set or renewed moments ago).
   */
  freshFor(ttl: number): number {
    return ttl - 2 * this.drift(ttl);
  }

  /** A lease an acquire round took for `taker`. */
  taken(keys: readonly string[], taker: RedisTaker, taken: Taken): RedisLease {
    return new RedisLease(
      keys,
      taker.token,
      taken.fences,
      taken.spare,
      taker.ttl,
      taken.uncontended,
      this.validUntil(taken.start, taker.ttl),
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
  passedOn(lease: RedisLease, next: RedisTaker): RedisLease | undefined {
    if (lease.spare <= 0 || next.ttl !== lease.ttl) return undefined;
    const now = performance.now();
    if (lease.validUntil - now < this.freshFor(lease.ttl)) return undefined;
    return new RedisLease(
      lease.keys,
      lease.token,
      [lease.nextFence],
      lease.spare - 1,
      lease.ttl,
      false,
      lease.validUntil,
      now - next.startedAt,
      lease.acks,
    );
  }
}
