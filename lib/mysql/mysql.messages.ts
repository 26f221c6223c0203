/** The messages of `nest-locked/mysql` alone (both SQL backends: `sql/sql.messages.ts`). */

export const MYSQL_BOARD_RELEASE_REFUSED = (key: string, thread: number, others?: number) =>
  others === undefined
    ? `"${key}" is held by MySQL connection ${thread}, and this server does not list the other ` +
      `locks a connection holds (no performance_schema, no metadata_lock_info plugin): ending ` +
      `it could free more than this key, so the board does not. Release it from the holder, ` +
      `or KILL CONNECTION ${thread} yourself.`
    : `"${key}" is held by MySQL connection ${thread}, which holds ${others} other named ` +
      `lock(s) too: ending it would free them all, so the board does not. Release it from the ` +
      `holder, or KILL CONNECTION ${thread} yourself.`;
