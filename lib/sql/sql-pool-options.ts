import { LockConfigError } from '../errors';
import { loadOptionalPeer } from '../optional-peer';
import {
  SQL_BAD_POOL_SIZE,
  SQL_NOT_A_POOL,
  SQL_PEER_MISSING,
  SQL_POOL_AND_CONFIG,
} from './sql.messages';

/** What a SQL backend factory was given: a pool of the application's, or settings for its own. */
export interface SqlPoolChoice<P> {
  /** The application's pool (never closed by the backend). */
  readonly pool?: P;
  /** Connection settings of the backend's own pool (empty with `pool`). */
  readonly config: Record<string, unknown>;
}

/**
 * Splits a factory's options into a pool of the application's or settings for one of the
 * backend's own. `sizeField` names the pool-size setting, checked here.
 * @throws LockConfigError `pool` with connection settings, a `pool` that is none, a bad size
 * @internal
 */
export function choosePool<P>(
  factory: string,
  options: object,
  sizeField: string,
  isPool: (value: unknown) => value is P,
  expected: string,
): SqlPoolChoice<P> {
  const { pool, ...rest } = options as { pool?: unknown } & Record<string, unknown>;
  const config = Object.fromEntries(
    Object.entries(rest).filter(([, value]) => value !== undefined),
  );
  if (pool !== undefined) {
    if (!isPool(pool)) throw new LockConfigError(SQL_NOT_A_POOL(factory, expected), 'pool');
    const extra = Object.keys(config);
    if (extra.length) throw new LockConfigError(SQL_POOL_AND_CONFIG(factory, extra), 'pool');
    return { pool, config: {} };
  }
  const size = config[sizeField];
  if (size !== undefined && !(Number.isInteger(size) && (size as number) >= 1)) {
    throw new LockConfigError(SQL_BAD_POOL_SIZE(factory, sizeField, size), sizeField);
  }
  return { config };
}

/**
 * The database driver, loaded only by the backend that needs it (a Redis user installs none).
 * @throws LockConfigError when it is not installed
 * @internal
 */
export function loadDriver<T>(factory: string, peer: string): T {
  const driver = loadOptionalPeer<T>(peer);
  if (!driver) throw new LockConfigError(SQL_PEER_MISSING(factory, peer), 'backend');
  return driver;
}
