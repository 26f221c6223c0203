import { KeyLine, type LineWaiter } from './key-line';
import type { RedisLease } from './redis-lease';

/**
 * The key lines of one client group, created on first use and dropped when idle, so millions
 * of keys over time leave nothing behind.
 * @internal
 */
export class KeyLines<W extends LineWaiter = LineWaiter> {
  private readonly lines = new Map<string, KeyLine<W>>();

  get size(): number {
    return this.lines.size;
  }

  get(key: string): KeyLine<W> | undefined {
    return this.lines.get(key);
  }

  /** The key's line, created if there is none. */
  of(key: string): KeyLine<W> {
    return this.lines.get(key) ?? this.add(key);
  }

  /** A new line for `key`, which the caller has just found without one (not looked up again). */
  add(key: string): KeyLine<W> {
    const line = new KeyLine<W>(key);
    this.lines.set(key, line);
    return line;
  }

  /** Every caller waiting in any line, each line's oldest first. */
  waiters(): W[] {
    const all: W[] = [];
    for (const line of this.lines.values()) {
      for (let w = line.head; w; w = w.next) all.push(w);
    }
    return all;
  }

  /** Every caller waiting in any line with its key, each line's oldest first (the lock board). */
  *waiting(): Generator<[key: string, waiter: W]> {
    for (const line of this.lines.values()) {
      for (let w = line.head; w; w = w.next) yield [line.key, w];
    }
  }

  /** A first try in `line` ended: the line goes if nothing else is in it. */
  tryEnded(line: KeyLine<W>): void {
    line.endTry();
    this.dropIfIdle(line);
  }

  /**
   * The hold of `lease` is over in this process: its line (single key) stops counting it and
   * may go. `wakeHead`: whether the line's head must be told to try now.
   */
  holdReturned(lease: RedisLease, wakeHead: (line: KeyLine<W>) => boolean): void {
    const line = lease.keys.length === 1 ? this.lines.get(lease.keys[0]) : undefined;
    if (!line) return;
    line.endHold(lease, wakeHead(line));
    this.dropIfIdle(line);
  }

  /** Drops the line if nothing is held, tried or awaited in it (and stops its listening). */
  dropIfIdle(line: KeyLine<W>): void {
    if (line.idle() && this.lines.get(line.key) === line) {
      line.stopListening();
      this.lines.delete(line.key);
    }
  }
}
