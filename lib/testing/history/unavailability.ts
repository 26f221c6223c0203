import type { Hold, Unavailability } from './history.types';

/**
 * The longest stretch in which some caller was waiting for a key (between its acquire's invoke
 * and its outcome) and nobody held it (ran a section).
 */
export function longestUnavailability(
  holds: readonly Hold[],
  waits: readonly { key: string; from: number; to: number }[],
): Unavailability | undefined {
  const marks = new Map<string, { at: number; waiting: number; holding: number }[]>();
  const add = (key: string, at: number, waiting: number, holding: number) => {
    const list = marks.get(key);
    if (list) list.push({ at, waiting, holding });
    else marks.set(key, [{ at, waiting, holding }]);
  };
  for (const w of waits) {
    add(w.key, w.from, 1, 0);
    add(w.key, w.to, -1, 0);
  }
  for (const h of holds) {
    add(h.key, h.start, 0, 1);
    add(h.key, h.end, 0, -1);
  }
  let longest: Unavailability | undefined;
  for (const [key, list] of marks) {
    // At one instant, holds start before waits end: an acquire that succeeds is no gap.
    list.sort((a, b) => a.at - b.at || b.holding - a.holding);
    let waiting = 0;
    let holding = 0;
    let since: number | undefined;
    for (const m of list) {
      waiting += m.waiting;
      holding += m.holding;
      const gap = waiting > 0 && holding === 0;
      if (gap && since === undefined) since = m.at;
      if (!gap && since !== undefined) {
        if (!longest || m.at - since > longest.ms)
          longest = { key, from: since, to: m.at, ms: m.at - since };
        since = undefined;
      }
    }
  }
  return longest;
}
