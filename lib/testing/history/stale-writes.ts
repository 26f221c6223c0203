import type { FencedWrite, Hold } from './history.types';

/**
 * The writes a fenced store accepted from a stale holder: one whose key a hold that started
 * later had already written (accepted) before. A store that compares fences accepts none as
 * long as the fences rise in real-time order.
 */
export function staleWritesAccepted(
  writes: readonly FencedWrite[],
  holds: readonly Hold[],
): FencedWrite[] {
  const startOf = new Map(holds.map((h) => [`${h.process}\u0000${h.call}`, h.start]));
  /** Per key, the latest start among holds whose writes were accepted so far. */
  const newest = new Map<string, number>();
  const stale: FencedWrite[] = [];
  for (const w of [...writes].sort((a, b) => a.at - b.at)) {
    if (!w.accepted) continue;
    const start = startOf.get(`${w.process}\u0000${w.call}`);
    if (start === undefined) continue;
    const seen = newest.get(w.key);
    if (seen !== undefined && seen > start) stale.push(w);
    else newest.set(w.key, start);
  }
  return stale;
}
