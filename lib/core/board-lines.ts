import type { BoardKeyLine, BoardMode } from './board-source';

/**
 * How many of a line's first entries (in grant order) hold its key, by the rules of the lock
 * recipes the server-ordered backends share: an exclusive holder is first, alone; readers hold
 * up to the first writer; permits of N are the first N entries of that N.
 */
export function holdersInLine(modes: readonly BoardMode[]): number {
  if (modes.length === 0) return 0;
  const [first] = modes;
  if (first === 'exclusive') return 1;
  const room = first === 'read' ? Infinity : Number(first.slice('permits '.length));
  let count = 1;
  while (count < modes.length && count < room && modes[count] === first) count++;
  return count;
}

/** A published view as a server without expiring values keeps it: its expiry, then the view. */
export function viewRecord(view: string, expiresAt: number): string {
  return `${expiresAt}\n${view}`;
}

/** The view of a record (`viewRecord`) still alive at `now`, or undefined. */
export function liveView(record: string, now: number): string | undefined {
  const nl = record.indexOf('\n');
  return nl > 0 && Number(record.slice(0, nl)) > now ? record.slice(nl + 1) : undefined;
}

/** An entry of a line a server keeps in grant order (an etcd key, a znode). */
export interface OrderedEntry {
  /** What names its process (see `BoardHolder.owner`). */
  readonly owner: string;
  readonly token: string;
  readonly mode: BoardMode;
}

/** A line's holders (its head, see `holdersInLine`) and its waiters, in order. */
export function splitLine<E extends OrderedEntry>(
  line: readonly E[],
): { holding: E[]; waiting: E[] } {
  const count = holdersInLine(line.map((e) => e.mode));
  return { holding: line.slice(0, count), waiting: line.slice(count) };
}

/** The keys (of `keys`) whose line has holders, and those whose line has waiters. */
export function heldAndWaited(
  keys: readonly string[],
  lines: ReadonlyMap<string, readonly OrderedEntry[]>,
): { held: string[]; waited: string[] } {
  return {
    held: keys.filter((k) => (lines.get(k)?.length ?? 0) > 0),
    waited: keys.filter((k) => splitLine(lines.get(k) ?? []).waiting.length > 0),
  };
}

/** The waiting lines of `keys` (their first `limit` waiters), keys without one left out. */
export function waitingLines(
  keys: readonly string[],
  lines: ReadonlyMap<string, readonly OrderedEntry[]>,
  limit: number,
): BoardKeyLine[] {
  return keys.flatMap((key): BoardKeyLine[] => {
    const { waiting } = splitLine(lines.get(key) ?? []);
    if (waiting.length === 0) return [];
    const waiters = waiting
      .slice(0, limit)
      .map(({ owner, token, mode }) => ({ owner, token, mode }));
    return [{ key, length: waiting.length, waiters }];
  });
}
