import type { Cluster, Redis, RedisOptions } from 'ioredis';

/**
 * One Redis node of a lock group: a URL (`redis://127.0.0.1:6379/0`), ioredis `RedisOptions`, or
 * an existing ioredis `Redis` / `Cluster` instance. Connections built from a URL or options are
 * owned by the module and closed on shutdown; instances you pass in are never closed by it.
 */
export type RedlockClientEntry = string | RedisOptions | Redis | Cluster;

/**
 * Lock client groups. An array is one group named `default`; a record names several groups
 * (`{ default: [...], orders: [...] }`). A group with one entry is a single-node lock; with
 * N >= 2 entries it is a Redlock quorum (majority) over N independent masters.
 */
export type RedlockClients =
  readonly RedlockClientEntry[] | Record<string, readonly RedlockClientEntry[]>;

/** Lock behaviour that can be set module-wide and overridden per call. */
export interface LockBehaviourOptions {
  /**
   * Lease length in ms. The key expires by itself this long after the last renewal, so a crashed
   * holder never deadlocks anyone for longer.
   * @default 30_000
   */
  ttl?: number;
  /**
   * Renew the lease every `ttl / 3` while the method runs (as Redisson does) and stop the moment
   * it settles.
   * @default true
   */
  watchdog?: boolean;
  /**
   * Hard cap on the total hold time in ms. Past it the watchdog stops renewing and the signal
   * aborts with a `LockLostError` (reason `maxHold`).
   * @default Infinity
   */
  maxHold?: number;
  /**
   * How long a caller waits for a busy lock, in ms. `0` tries exactly once.
   * @default 5_000
   */
  waitTimeout?: number;
}

/** Options of `RedlockModule.forRoot()` / the factory of `forRootAsync()`. */
export interface RedlockModuleOptions extends LockBehaviourOptions {
  /**
   * Redis nodes, as one group (array) or named groups (record).
   * @default [process.env.REDIS_URL ?? 'redis://127.0.0.1:6379']
   */
  clients?: RedlockClients;
  /**
   * Prefix of every Redis key the module writes. A lock on `product:42` lives at
   * `<keyPrefix>{product:42}` (the braces are a Redis Cluster hash tag keeping the lock and its
   * fence counter in one slot).
   * @default 'lock:'
   */
  keyPrefix?: string;
  /**
   * HTTP status `LockInterceptor` answers when a lock is still busy after `waitTimeout`.
   * @default 409
   */
  busyStatus?: number;
  /**
   * Register `LockInterceptor` globally (`APP_INTERCEPTOR`) so lock errors thrown by handlers map
   * to HTTP statuses and RPC error codes. Set `false` to map them yourself.
   * @default true
   */
  interceptor?: boolean;
  /**
   * Clock drift allowance of the quorum algorithm: a lease counts as held for
   * `ttl - elapsed - (ttl * driftFactor + 2)` ms.
   * @default 0.01
   */
  driftFactor?: number;
  /**
   * How many times in a row a releasing process may hand a hot lock straight to a waiter of its
   * own before it releases it to the other processes (bounded barging; see the README).
   * @default 4
   */
  localHandoffs?: number;
  /**
   * Upper bound, in ms, of one Redis round trip of the lock protocol. A node that does not answer
   * in time counts as failed (so a dead node cannot hang a caller).
   * @default 2_000
   */
  commandTimeout?: number;
}

/** Extras of `forRoot`/`forRootAsync` that do not reach the options provider. */
export interface RedlockModuleExtras {
  /**
   * Register the module globally, so `@Locked`, `LockService` and `@InjectRedlock` work in every
   * module without importing it.
   * @default true
   */
  isGlobal?: boolean;
}
