import type { IncomingHttpHeaders } from 'node:http';

/** What a board guard sees of a request (the same on Express and Fastify). */
export interface LockBoardRequest {
  readonly method: string;
  /** The path and query, as received. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** The peer's address. */
  readonly ip?: string;
}

/**
 * Decides who may see the board: `true` lets the request in, a string lets it in and names who
 * it is (recorded with a force release), `false` answers 401 with a Basic challenge (a browser
 * then asks for a login).
 *
 * @example
 * ```ts
 * const token = process.env.ADMIN_TOKEN ?? '';
 * // Never compare with an unset variable: undefined === undefined would let everyone in.
 * const guard: LockBoardGuard = (req) => token !== '' && req.headers['x-admin-token'] === token;
 * ```
 */
export type LockBoardGuard = (
  request: LockBoardRequest,
) => boolean | string | Promise<boolean | string>;

/**
 * Options of `LockBoardModule.forRoot`.
 *
 * @example
 * ```ts
 * const options: LockBoardOptions = {
 *   path: '/admin/locks',
 *   guard: lockBoardBasicAuth({ user: 'admin', password: process.env.LOCK_BOARD_PASSWORD ?? '' }),
 *   actions: true,
 * };
 * ```
 */
export interface LockBoardOptions {
  /** Where the page and its endpoints live. @default '/locks' */
  path?: string;
  /** Who may see the board (every page, asset and endpoint). Required unless `public: true`. */
  guard?: LockBoardGuard;
  /** Mount without a guard, open to anyone who can reach the app (warned at startup). @default false */
  public?: boolean;
  /** Allow force release of a key (confirmed, recorded as an event). Needs a guard. @default false */
  actions?: boolean;
  /** This instance's name on the board. @default `<hostname>:<pid>` */
  instance?: string;
  /** How often this instance publishes its view to every Redis group, ms. @default 1000 */
  publishInterval?: number;
  /** How long a published view lives: an instance that stops disappears after it, ms. @default 10000 */
  expiry?: number;
  /** How often an open page gets a fresh view (server-sent events), ms. @default 500 */
  refreshInterval?: number;
  /** Redis keys one SCAN of a group's locks examines at most (bounded work per view). @default 100000 */
  maxScan?: number;
  /** Events kept in each group's stream. @default 1000 */
  eventsKept?: number;
}

/** The options with every default filled in. @internal */
export type ResolvedLockBoardOptions = Required<Omit<LockBoardOptions, 'guard'>> &
  Pick<LockBoardOptions, 'guard'>;
