import type { FencedWrite, Hold } from './history.types';

/**
 * The writes a fenced store accepted from a stale holder: a hold A whose key a hold B that came
 * after it in real time (B asked for the lock after A had it) had already written. A store that
 * compares fences accepts none as long as fences rise in real-time order.
 */
export function staleWritesAccepted(
  writes: readonly FencedWrite[],
  holds: readonly Hold[],
): FencedWrite[] {
  const holdOf = new Map(holds.map((h) => [`${h.process}\u0000${h.call}`, h]));
  /** Per key, the latest acquire invoke among holds whose writes were accepted so far. */
  const latestAsk = new Map<string, number>();
  const stale: FencedWrite[] = [];
  for (const w of [...writes].sort((a, b) => a.at - b.at)) {
    const hold = holdOf.get(`${w.process}\u0000${w.call}`);
    if (!w.accepted || !hold) continue;
    const asked = latestAsk.get(w.key);
    if (asked !== undefined && asked > hold.start) stale.push(w);
    latestAsk.set(w.key, Math.max(asked ?? -Infinity, hold.invokedAt));
  }
  return stale;
}
