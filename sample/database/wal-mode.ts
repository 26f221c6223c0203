/** The part of a better-sqlite3 database `useWalMode` needs. */
export interface PragmaRunner {
  pragma(source: string, options?: { simple: boolean }): unknown;
}

/** The pause between two tries of the switch, ms. */
const RETRY_MS = 20;

/**
 * Puts `db`'s file in WAL mode, as instances starting together on one file do. WAL is a
 * property of the file: once one instance switched it, the others find it so and take no lock.
 * The switch itself takes the write lock from a read lock, and SQLite answers SQLITE_BUSY at
 * once, without its busy handler, when another connection waits to commit; so it is tried
 * again (the constructor that calls this is synchronous: the pause blocks, as the busy handler
 * would) until `withinMs` is spent.
 */
export function useWalMode(db: PragmaRunner, withinMs: number): void {
  const deadline = Date.now() + withinMs;
  for (;;) {
    if (db.pragma('journal_mode', { simple: true }) === 'wal') return;
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) {
        throw error;
      }
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, RETRY_MS);
  }
}
