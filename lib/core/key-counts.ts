/**
 * How many of something each key has right now (shared holds and waits of a process, say): a
 * key is listed while its count is above 0, and only then.
 * @internal
 */
export class KeyCounts {
  private readonly counts = new Map<string, number>();

  add(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** One fewer (never below 0: the key goes at 0). */
  remove(key: string): void {
    const n = (this.counts.get(key) ?? 1) - 1;
    if (n > 0) this.counts.set(key, n);
    else this.counts.delete(key);
  }

  has(key: string): boolean {
    return this.counts.has(key);
  }

  keys(): IterableIterator<string> {
    return this.counts.keys();
  }
}
