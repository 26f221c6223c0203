/** The messages of `nest-locked/postgres` alone (both SQL backends: `sql/sql.messages.ts`). */

export const POSTGRES_PERMITS_ONE_KEY = (keys: number) =>
  `permits on PostgreSQL take one key per call (each key's permits are advisory-lock slots); ` +
  `got ${keys} keys. Take them in separate calls, or use Redis for permits over several keys.`;
export const POSTGRES_BOARD_RELEASE_REFUSED = (key: string, pid: number, others: number) =>
  `"${key}" is held by PostgreSQL session ${pid}, which holds ${others} other advisory lock(s) ` +
  `too (a hold of several keys, or locks of the application's own): ending it would free them ` +
  `all, so the board does not. Release it from the holder, or end session ${pid} yourself.`;
