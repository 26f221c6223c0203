import type { FenceViolation, HistoryFault, Hold } from './history.types';
import { byKey } from './overlaps';

/**
 * Fences unique and rising in real-time order. Per key, a hold B must have a larger fence than
 * every hold A that came before it in real time: A's section ended before B's began, or A was
 * granted before B even asked (A's acquire returned before B's was invoked). Holds that ran at
 * once and asked at once (an explained overlap) have no real-time order, only distinct fences.
 * A hold B told it was lost, whose session a kill ended between its invoke and its start, began
 * no later than that kill did: the server granted it, then ended it, before its holder saw the
 * grant (its fence may be below those of holds that ran meanwhile; the fenced store refuses its
 * writes). One violation per hold that breaks it, naming the earlier hold with the largest fence.
 */
export function fenceViolations(
  holds: readonly Hold[],
  faults: readonly HistoryFault[] = [],
): FenceViolation[] {
  const begun = (h: Hold): number => {
    if (h.lostAt === undefined) return h.start;
    for (const f of faults) {
      if (f.kind !== 'session-killed' || (f.process !== undefined && f.process !== h.process))
        continue;
      if (f.to >= h.invokedAt && f.from <= h.start) return Math.max(h.invokedAt, f.from);
    }
    return h.start;
  };
  const violations: FenceViolation[] = [];
  for (const list of byKey(holds).values()) {
    const before = new Map<Hold, Hold>();
    // A before B when A.end <= B.start (B's `begun`), and when A.start < B.invokedAt.
    largestBefore(list, (h) => h.end, begun, true, before);
    largestBefore(
      list,
      (h) => h.start,
      (h) => h.invokedAt,
      false,
      before,
    );
    const seen = new Map<number, Hold>();
    for (const hold of [...list].sort((a, b) => a.start - b.start)) {
      const earlier = before.get(hold);
      const fence = hold.fence;
      const valid = fence !== undefined && Number.isSafeInteger(fence);
      const twin = valid ? seen.get(fence) : undefined;
      if (earlier && (!valid || fence <= earlier.fence!))
        violations.push({ key: hold.key, earlier, later: hold });
      else if (twin) violations.push({ key: hold.key, earlier: twin, later: hold });
      if (valid && !twin) seen.set(fence, hold);
    }
  }
  return violations;
}

/**
 * For each hold B, the hold A with the largest fence among those with `done(A)` before
 * `begun(B)` (or at it, when `inclusive`), merged into `out` (the larger of two wins).
 */
function largestBefore(
  list: readonly Hold[],
  done: (h: Hold) => number,
  begun: (h: Hold) => number,
  inclusive: boolean,
  out: Map<Hold, Hold>,
): void {
  const byDone = [...list].sort((a, b) => done(a) - done(b));
  const byBegun = [...list].sort((a, b) => begun(a) - begun(b));
  let top: Hold | undefined;
  let i = 0;
  for (const b of byBegun) {
    while (
      i < byDone.length &&
      (inclusive ? done(byDone[i]) <= begun(b) : done(byDone[i]) < begun(b))
    ) {
      const a = byDone[i++];
      if (a.fence !== undefined && (!top || a.fence > top.fence!)) top = a;
    }
    const known = out.get(b);
    if (top && top !== b && (!known || top.fence! > known.fence!)) out.set(b, top);
  }
}
