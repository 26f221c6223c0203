import type { FenceViolation, Hold } from './history.types';
import { byKey } from './overlaps';

/**
 * Fences unique and rising in real-time order: per key, in the order the holds started, each
 * fence must be a safe integer larger than every fence before it. One violation per hold that
 * breaks it, naming the earlier hold with the largest fence.
 */
export function fenceViolations(holds: readonly Hold[]): FenceViolation[] {
  const violations: FenceViolation[] = [];
  for (const list of byKey(holds).values()) {
    const sorted = [...list].sort((a, b) => a.start - b.start);
    let top: Hold | undefined;
    for (const hold of sorted) {
      const fence = hold.fence;
      const valid = fence !== undefined && Number.isSafeInteger(fence);
      if (top && (!valid || fence <= top.fence!)) {
        violations.push({ key: hold.key, earlier: top, later: hold });
        continue;
      }
      if (valid) top = hold;
    }
  }
  return violations;
}
