/** The part of a better-sqlite3 database `useWalMode` needs. */
export interface PragmaRunner {
  pragma(source: string, options?: { simple: boolean }): unknown;
}

/** Puts `db`'s file in WAL mode. */
export function useWalMode(db: PragmaRunner, withinMs: number): void {
  void withinMs;
  db.pragma('journal_mode = WAL');
}
