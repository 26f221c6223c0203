/**
 * Wait times in log buckets, three per doubling (each bucket ~26% wide): bucket 0 is under 1 ms,
 * bucket b > 0 holds [2^((b-1)/3), 2^(b/3)) ms, the last one everything from ~17 minutes up.
 * Counts from many instances add bucket by bucket, so percentiles merge across the cluster.
 * @internal
 */
export const WAIT_BUCKETS = 64;

/** The bucket of a wait of `ms`. */
export function waitBucket(ms: number): number {
  if (!(ms >= 1)) return 0;
  return Math.min(WAIT_BUCKETS - 1, 1 + Math.floor(Math.log2(ms) * 3));
}

/** The upper edge of bucket `b`, ms (what a percentile falling in it reports). */
export function bucketEdge(b: number): number {
  return b === 0 ? 1 : Math.round(2 ** (b / 3) * 10) / 10;
}

/** Sparse counts, `[bucket, count]` pairs: what an instance publishes. @internal */
export type SparseCounts = Array<[number, number]>;

/** Adds `from` (sparse) into `into` (dense). */
export function addSparse(into: number[], from: SparseCounts | undefined): void {
  for (const [b, n] of from ?? []) into[b] = (into[b] ?? 0) + n;
}

/** The nonzero buckets of `counts`. */
export function toSparse(counts: ArrayLike<number>): SparseCounts {
  const out: SparseCounts = [];
  for (let b = 0; b < counts.length; b++) if (counts[b]) out.push([b, counts[b]]);
  return out;
}

/** The `q` quantile (0..1) of dense counts, as a bucket's upper edge; null with no samples. */
export function quantile(counts: ArrayLike<number | undefined>, q: number): number | null {
  let total = 0;
  for (let b = 0; b < counts.length; b++) total += counts[b] ?? 0;
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let b = 0; b < counts.length; b++) {
    seen += counts[b] ?? 0;
    if (seen >= rank) return bucketEdge(b);
  }
  return bucketEdge(counts.length - 1);
}
