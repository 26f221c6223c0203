import type { BoardSource } from '../core/board-source';
import type { Share } from '../core/lease';

/**
 * One database connection held by one hold (or one wait) from checkout to release: session
 * locks (PostgreSQL advisory locks, MySQL `GET_LOCK`) belong to the session that took them, so
 * the lease is the session.
 * @internal
 */
export interface SqlSession {
  /** The server's id of the session (PostgreSQL backend pid, MySQL thread id), to kill it. */
  readonly id: number;
  /** `listener` is told once if the connection fails or ends while it is checked out. */
  watch(listener: (cause: Error) => void): void;
  /** Back to the pool, or closed (`destroy`: its session locks go with it on the server). */
  release(destroy: boolean): void;
}

/**
 * What one SQL database gives the shared engine (`SqlLockBackend`): a session per hold, the
 * statements that lock, unlock and keep a session alive, and its errors in words. Every method
 * may hang when the server stalls: the engine bounds each call with its own timer.
 * @internal
 */
export interface SqlDialect<S extends SqlSession = SqlSession> {
  /** `postgres`, `mysql`. */
  readonly kind: string;
  /** `PostgreSQL`, `MySQL`, for messages. */
  readonly label: string;
  /** `host:port` (or the socket path), never a password. */
  readonly node: string;
  /** The server-side name of a key (with the module's keyPrefix), computed once per acquire. */
  lockName(key: string): string;
  /** A connection for one hold. */
  checkout(): Promise<S>;
  /** Whether every connection of the pool is checked out (a checkout waits for a release). */
  saturated(): boolean;
  /**
   * Takes every name, in the order given, waiting up to `waitMs` in the server's own lock queue
   * (0: one try). The fence of each name, each taken after its lock was granted; undefined when
   * still busy, with nothing left held by the session. `contended`: this process holds or waits
   * for one of the keys (a first try would most likely fail).
   */
  lock(
    session: S,
    names: readonly string[],
    share: Share | undefined,
    waitMs: number,
    contended: boolean,
  ): Promise<number[] | undefined>;
  /** Frees every lock of the session (the session is this hold's alone). */
  unlock(session: S): Promise<void>;
  /** One round trip on the session: it is still there (the watchdog's renewal). */
  keepAlive(session: S): Promise<void>;
  /** Whether anybody holds `name` right now (a pooled connection, not a session of a hold). */
  isLocked(name: string): Promise<boolean>;
  /** Ends a session on the server (a wait given up while its query still waits there). */
  kill(id: number): Promise<void>;
  /** One round trip on a pooled connection (health). */
  ping(): Promise<void>;
  /** Ends the pool if the backend created it (never a pool the application passed in). */
  close(): Promise<void>;
  /**
   * The lock board's reads of the server's locks (`nest-locked/board` only); `keyPrefix` is
   * the module's.
   */
  boardSource?(group: string, keyPrefix: string): BoardSource;
  /** The driver's error in words: auth, unknown database, refused... */
  describe(error: unknown): Error;
  /** Whether `error` is a setting to fix (auth, database, permission), not an outage. */
  isConfigError(error: unknown): boolean;
}
