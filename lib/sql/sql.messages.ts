/** The messages of the SQL backends (`nest-locked/postgres`, `nest-locked/mysql`; `sql/`). */

export const SQL_PEER_MISSING = (factory: string, peer: string) =>
  `${factory} needs the "${peer}" package: install it (npm install ${peer}).`;

export const SQL_POOL_AND_CONFIG = (factory: string, fields: readonly string[]) =>
  `${factory}: give either "pool" (a pool of your own) or connection settings, not both ` +
  `(also given: ${fields.join(', ')}).`;

export const SQL_NOT_A_POOL = (factory: string, expected: string) =>
  `${factory}: "pool" must be ${expected}.`;

export const SQL_BAD_POOL_SIZE = (factory: string, field: string, value: unknown) =>
  `${factory}: "${field}" must be an integer >= 1 (the lock's own pool: one connection per hold ` +
  `or wait in this process); got ${String(value)}.`;

// The messages of a failure's cause end with no hint: `DescribedFailure` adds the one that fits.

export const SQL_AUTH_FAILED = (label: string, node: string, user: string, detail: string) =>
  `${label} at ${node} refused user "${user}": authentication failed (${detail}).`;

export const SQL_UNKNOWN_DATABASE = (label: string, node: string, database: string) =>
  `${label} at ${node} has no database "${database}" the lock user may use.`;

export const SQL_REFUSED = (label: string, node: string, detail: string) =>
  `${label} at ${node} refused the connection (${detail}).`;

export const SQL_HOST_UNKNOWN = (label: string, node: string, detail: string) =>
  `${label} host of ${node} is unknown (${detail}).`;

export const SQL_FAILED = (label: string, node: string, detail: string) =>
  `${label} at ${node}: ${detail}`;

export const SQL_NO_ANSWER = (label: string, node: string, ms: number, what: string) =>
  `${label} at ${node} did not answer ${what} within ${Math.round(ms)} ms.`;

export const SQL_SESSION_LOST = (label: string, node: string, detail: string) =>
  `${label} at ${node} ended the lock's session (${detail}): the lock was freed with it.`;
