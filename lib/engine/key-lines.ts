import { KeyLine, type LineWaiter } from './key-line';

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
    let line = this.lines.get(key);
    if (!line) {
      line = new KeyLine<W>(key);
      this.lines.set(key, line);
    }
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

  /** Drops the line if nothing is held, tried or awaited in it (and stops its listening). */
  dropIfIdle(line: KeyLine<W>): void {
    if (line.idle() && this.lines.get(line.key) === line) {
      line.stopListening();
      this.lines.delete(line.key);
    }
  }
}
