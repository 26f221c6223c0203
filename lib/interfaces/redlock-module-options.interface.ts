import type { LockBackendDefinition } from '../core/lock-backend-definition';

/**
 * An ioredis `Redis` or `Cluster` instance, described by what the library calls on it, so that
 * this package's types compile without ioredis installed (an app on another backend needs none).
 * Any ioredis 5 or 6 instance is one.
 */
export interface RedisInstance {
  duplicate(...args: never[]): unknown;
  evalsha(...args: never[]): unknown;
}

/**
 * ioredis `RedisOptions` (Sentinel options `{ sentinels, name }` included), described by the
 * fields the module checks; ioredis checks the rest when it connects. Declared here rather than
 * imported so that this package's types compile without ioredis installed; a value typed
 * `RedisOptions` is one.
 */
export interface RedisNodeOptions {
  readonly host?: string;
  readonly port?: number;
  /** A Unix socket. */
  readonly path?: string;
  readonly username?: string;
  readonly password?: string;
  readonly db?: number;
  /** Sentinel: the sentinels to ask for the primary named `name`. */
  readonly sentinels?: readonly object[];
  readonly name?: string;
  /** TLS options (`tls.ConnectionOptions`). */
  readonly tls?: object;
  /** Any other ioredis option, passed to ioredis as it is. */
  // `any`, not `unknown`: a value typed with ioredis's own `RedisOptions` (an interface, without
  // an index signature) is assignable to an `any` index signature only.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly [option: string]: any;
}

/**
 * One Redis node of a lock group: a string, ioredis `RedisOptions` (Sentinel options
 * `{ sentinels, name }` included), or an existing ioredis `Redis` / `Cluster` instance.
 * Connections built from a string or options are owned by the module and closed on shutdown;
 * instances you pass in are never closed by it.
 *
 * The strings ioredis reads as the node they name, and so the only ones accepted:
 * `redis://[user:password@]host[:port][/db][?query]`, `rediss://...` (TLS; the scheme in lower
 * case), `host[:port]` (no path: ioredis would take it for a socket), a port number (`'6380'`,
 * on localhost), and the path of a Unix socket (`/run/redis/redis.sock[?db=2]`). Anything else
 * fails startup with a `LockConfigError` naming the entry (`clients.default[0]`).
 */
export type RedlockClientEntry = string | RedisNodeOptions | RedisInstance;

/**
 * Lock client groups. An array is one group named `default`; a record names several groups
 * (`{ default: [...], orders: [...] }`). A group with one entry is a single-node lock; with
 * N >= 2 entries it is a Redlock quorum (majority) over N independent masters.
 */
export type RedlockClients =
  readonly RedlockClientEntry[] | Record<string, readonly RedlockClientEntry[]>;

/**
 * A group's backend other than Redis: `'memory'` (locks within this one process only, for a
 * single instance or local development; said in a startup log line) or what a backend factory
 * returns (`postgresBackend(...)` from `nest-locked/postgres`, `mysqlBackend(...)`,
 * `etcdBackend(...)`, `zookeeperBackend(...)`).
 */
export type RedlockBackendOption = LockBackendDefinition | 'memory';

/** One named group of `groups`: Redis nodes (`clients`) or another `backend`. */
export type RedlockGroupOptions =
  | { readonly clients: readonly RedlockClientEntry[]; readonly backend?: undefined }
  | { readonly backend: RedlockBackendOption; readonly clients?: undefined };

/** Lock behaviour that can be set module-wide and overridden per call. */
export interface LockBehaviourOptions {
  /**
   * Lease length in ms. The key expires by itself this long after the last renewal, so a crashed
   * holder never deadlocks anyone for longer. An integer from 10 to 2^31-1 (2_147_483_647, the
   * longest Node.js timer): the lease and its `ttl / 3` renewals run on timers, and a longer
   * timer fires after 1 ms (a renewal every millisecond).
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
   * aborts with a `LockLostError` (reason `maxHold`). At most 2^31-1 (the longest Node.js
   * timer), or `Infinity` for no cap.
   * @default Infinity
   */
  maxHold?: number;
  /**
   * How long a caller waits for a busy lock, in ms. `0` tries exactly once. At most 2^31-1
   * (the longest Node.js timer: a longer wait would give up after 1 ms).
   * @default 5_000
   */
  waitTimeout?: number;
  /**
   * Replicas that must acknowledge an acquire, and every renewal, before it counts (Redis
   * `WAIT`), so a failover to a replica cannot hand the same lock to a second holder. Too few
   * acknowledgements within `replicaAckTimeout` is a `LockBackendError` (the write is undone),
   * never a silent success. For a single node or Sentinel group with replicas; not on Redis
   * Cluster. `0` is off.
   * @default 0
   */
  replicaAcks?: number;
  /**
   * How long, in ms, an acquire or renewal waits for `replicaAcks` acknowledgements.
   * @default 1_000
   */
  replicaAckTimeout?: number;
}

/** Options of `RedlockModule.forRoot()` / the factory of `forRootAsync()`. */
export interface RedlockModuleOptions extends LockBehaviourOptions {
  /**
   * Redis nodes, as one group (array) or named groups (record).
   * @default [process.env.REDIS_URL ?? 'redis://127.0.0.1:6379']
   */
  clients?: RedlockClients;
  /**
   * The `default` group's backend when it is not Redis: `'memory'` or a backend factory's result
   * (`postgresBackend({ connectionString })`). Not together with `clients` or `groups`.
   * @example `RedlockModule.forRoot({ backend: postgresBackend({ connectionString }) })`
   */
  backend?: RedlockBackendOption;
  /**
   * Named groups of any backend, each `{ clients: [...] }` (Redis) or `{ backend }`:
   * `{ default: { backend: postgresBackend(...) }, jobs: { clients: ['redis://...'] } }`. Not
   * together with `clients` or `backend`.
   */
  groups?: Readonly<Record<string, RedlockGroupOptions>>;
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
   * Register `LockInterceptor` globally (`APP_INTERCEPTOR`), and on every WebSocket gateway and
   * microservice message handler (global interceptors reach neither, nor a hybrid app's
   * microservice), so lock errors thrown by handlers map to HTTP statuses, RPC and WebSocket
   * error codes. Set `false` to map them yourself.
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
   * in time counts as failed (so a dead node cannot hang a caller). From 1 to 2^31-1 (the
   * longest Node.js timer).
   * @default 2_000
   */
  commandTimeout?: number;
  /**
   * OpenTelemetry metrics and spans through `@opentelemetry/api` (see the README, "Health &
   * metrics"). `'auto'`: on when the package is installed and a global MeterProvider or
   * TracerProvider is registered when the module starts (register your SDK before creating the
   * Nest app); otherwise nothing is loaded and lock calls pay nothing. `true`: always (startup
   * fails without the package); `false`: never.
   * @default 'auto'
   */
  telemetry?: boolean | 'auto';
  /**
   * Lock-order checking (see the README, "Lock order"): while a call holds locks of some classes
   * (a class is a key template and a mode: `account:{id}` exclusive), a nested call that may wait
   * for another class adds "held -> asked for" to a graph shared by the group's instances
   * (through Redis and etcd; the instance's own graph on other backends). The first nesting
   * that closes a cycle (A inside B here, B inside A anywhere) is a deadlock waiting to happen:
   * `'warn'` logs it once per cycle, with where each order was first seen, and emits `lockOrder`;
   * `'throw'` also fails that acquire with `LockOrderError` before it waits (nothing locked);
   * `'off'` checks nothing. Each chain of held classes is checked once, so the steady state
   * costs a map lookup and no round trip.
   * @default 'warn'
   */
  lockOrder?: 'off' | 'warn' | 'throw';
  /**
   * A caller still waiting for a lock after this many ms logs, once per wait, who holds it and
   * for how long when this instance holds it (the method or caller that took it), as
   * go-deadlock does. `0` turns it off.
   * @default 10_000
   */
  holderReportAfter?: number;
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
