/**
 * Values the lock scripts (`lua/`) share with the TypeScript side; `scripts.ts` puts them in the
 * Lua as `$NAME` when the scripts are loaded.
 * @internal
 */

/**
 * How long a fence counter lives after it was set (not renewed by use). It only has to outlive
 * the fences it gave: on a single node every fence is at or above the server's clock when it is
 * minted, and a counter seeded again starts at the clock, so once the clock has passed a
 * counter's value (within a block of µs after its last mint, a block being one fence per caller
 * passed in memory; a quorum's counter, which only counts, falls behind the clock at once) a new
 * one seeded from the clock starts above every fence it gave. A minute is that with a wide
 * margin, and leaves no counter behind for long (200,000 keys used once: none a minute later).
 */
export const FENCE_COUNTER_LIFETIME_MS = 60_000;

/**
 * How long a key granted to a queued waiter is set for until the waiter's process claims it
 * (renews it to its full lease on receipt of the grant).
 */
export const GRANT_CLAIM_MS = 1_000;

/**
 * How many queue entries ahead of the waiter a permit passes to PASS_SHARE looks at to tell
 * whether the pass goes past a waiter of another process. The waiter is its process's oldest,
 * so the entries ahead of it are usually none, or other processes' only.
 */
export const PASS_SCAN = 16;
