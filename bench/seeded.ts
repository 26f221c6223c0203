/** A seeded sequence of numbers in [0, 1) (mulberry32): the same draws in every process. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * rw: whether each next call of one caller writes, drawn with probability `writeShare` from a
 * sequence seeded by the caller: every peer (and the ceiling, `rw-ideal.ts`) gets the same calls
 * in the same order.
 */
export function writeDraws(seed: number, writeShare: number): () => boolean {
  const random = mulberry32(seed);
  return () => random() < writeShare;
}

/** The seed of the timed read-heavy run's caller `w` of process `proc`. */
export function callerSeed(proc: number, w: number): number {
  return proc * 1000 + w + 1;
}
