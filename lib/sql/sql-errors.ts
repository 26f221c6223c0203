import {
  SQL_AUTH_FAILED,
  SQL_FAILED,
  SQL_HOST_UNKNOWN,
  SQL_NO_ANSWER,
  SQL_REFUSED,
  SQL_UNKNOWN_DATABASE,
} from './sql.messages';
import { SqlTimeoutError } from './sql-timeout';
import { DescribedFailure, type FailureKind } from '../errors/failure-hint';
import { LockOrderError } from '../errors/lock-order.error';

/** Where a backend connects, for messages (never a password). @internal */
export interface SqlTarget {
  readonly label: string;
  readonly node: string;
  readonly user: string;
  readonly database: string;
}

/** The driver's error codes (`code`) that mean a setting to fix. @internal */
export interface SqlErrorCodes {
  readonly auth: readonly string[];
  readonly unknownDatabase: readonly string[];
  /** Permission errors (a user not allowed to create the fence sequence...). */
  readonly denied: readonly string[];
}

const REFUSED = ['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH'];
const HOST_UNKNOWN = ['ENOTFOUND', 'EAI_AGAIN'];

const codeOf = (error: unknown): string | undefined => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message || error.name : String(error);

/**
 * A driver's error in words: a wrong password, an unknown database, a refused connection, an
 * unknown host or no answer in time, each naming the server and ending with what to check;
 * anything else with its own text. The driver's error is the `cause`.
 * @internal
 */
export function describeSqlError(
  target: SqlTarget,
  codes: SqlErrorCodes,
  error: unknown,
): DescribedFailure {
  const { label, node } = target;
  const code = codeOf(error);
  const detail = messageOf(error);
  const described = (message: string, kind: FailureKind) =>
    new DescribedFailure(message, kind, error);
  if (error instanceof SqlTimeoutError) {
    return described(SQL_NO_ANSWER(label, node, error.ms, error.what), 'timeout');
  }
  if (code && codes.auth.includes(code)) {
    return described(SQL_AUTH_FAILED(label, node, target.user, detail), 'auth');
  }
  if (code && codes.unknownDatabase.includes(code)) {
    return described(SQL_UNKNOWN_DATABASE(label, node, target.database), 'database');
  }
  if (code && REFUSED.includes(code)) return described(SQL_REFUSED(label, node, detail), 'refused');
  if (code && HOST_UNKNOWN.includes(code)) {
    return described(SQL_HOST_UNKNOWN(label, node, detail), 'host');
  }
  return described(SQL_FAILED(label, node, detail), 'unknown');
}

/** Whether `error` is a setting to fix (auth, database, permission, host), not an outage. @internal */
export function isSqlConfigError(codes: SqlErrorCodes, error: unknown): boolean {
  const code = codeOf(error);
  return (
    code !== undefined &&
    [...codes.auth, ...codes.unknownDatabase, ...codes.denied, ...HOST_UNKNOWN].includes(code)
  );
}

/**
 * The server's own deadlock detector chose this session as its victim: PostgreSQL `40P01`,
 * MySQL/MariaDB `ER_LOCK_DEADLOCK` (1213) and MySQL's `ER_USER_LOCK_DEADLOCK` (3058, among
 * `GET_LOCK` names).
 */
const DEADLOCK_CODES = ['40P01', 'ER_LOCK_DEADLOCK', 'ER_USER_LOCK_DEADLOCK'];

/**
 * A deadlock the server detected, as the `LockOrderError` lock-order checking throws, with the
 * cycle as the server reports it (PostgreSQL's `detail` names each process, what it waits for and
 * who blocks it); undefined for any other error.
 * @internal
 */
export function serverDeadlock(
  keys: readonly string[],
  error: unknown,
): LockOrderError | undefined {
  const code = codeOf(error);
  if (code === undefined || !DEADLOCK_CODES.includes(code)) return undefined;
  const detail = (error as { detail?: unknown }).detail;
  const report =
    typeof detail === 'string' && detail !== ''
      ? `${messageOf(error)}\n${detail}`
      : messageOf(error);
  return new LockOrderError(keys, [], report, 'server', error);
}
