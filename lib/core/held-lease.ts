import { Lease, type Share } from './lease';

/** What a backend knows of a lease it just took. @internal */
export interface HeldLeaseFields {
  /** Rendered keys, sorted and deduplicated. */
  readonly keys: readonly string[];
  readonly token: string;
  /** One per key (a read hold's is the key's current fence). */
  readonly fences: readonly number[];
  readonly ttl: number;
  /** Until when it is certainly ours (`performance.now()` clock, the drift allowance taken off). */
  readonly validUntil: number;
  /** How long its caller waited for it, in ms. */
  readonly waitedMs: number;
  /** A shared hold's kind; absent for the exclusive lock. */
  readonly share?: Share;
}

/**
 * The one place the SQL, etcd, ZooKeeper and memory backends make a lease.
 * @internal
 */
export function heldLease(fields: HeldLeaseFields): Lease {
  const lease = new Lease(
    fields.keys,
    fields.token,
    fields.fences,
    fields.ttl,
    fields.validUntil,
    fields.waitedMs,
  );
  lease.share = fields.share;
  return lease;
}
