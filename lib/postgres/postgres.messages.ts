/** The messages of `nest-locked/postgres` alone (both SQL backends: `sql/sql.messages.ts`). */

export const POSTGRES_PERMITS_ONE_KEY = (keys: number) =>
  `permits on PostgreSQL take one key per call (each key's permits are advisory-lock slots); ` +
  `got ${keys} keys. Take them in separate calls, or use Redis for permits over several keys.`;
