import type { BoardSource } from './board-source';
import type { Lease, Share } from './lease';
import type { OrderEdgeStore } from './order-edge-store';

export type { Lease } from './lease';

export type { Share } from './lease';

/**
 * Replicas of a server that must acknowledge every write that takes or keeps a lock, and how
 * long to wait for them (the `replicaAcks` option: on Redis, `WAIT`). A backend whose writes a
 * quorum confirms already (etcd, ZooKeeper) or that has no replicas to wait for ignores it.
 * @internal
 */
export interface ReplicaAcks {
  readonly replicas: number;
  /** ms the wait for acknowledgements may block. */
  readonly timeout: number;
}

/** One acquire call. @internal */
export interface AcquireRequest {
  /** A shared hold (read lock or permit); absent for the exclusive lock. */
  readonly share?: Share;
  readonly ttl: number;
  readonly waitTimeout: number;
  /** Ends the wait early, rejecting with its reason. */
  readonly signal?: AbortSignal;
  /** The caller just found the key busy (a segmented sweep): straight into line. */
  readonly seenBusy?: boolean;
  /** Replicas that must acknowledge the acquire and every renewal. */
  readonly acks?: ReplicaAcks;
}

/**
 * Counts every backend keeps, for tests, metrics and the benchmark (`LockService.stats()`), each
 * meaning the same on every backend. A count a backend has no occasion for stays 0.
 * @internal
 */
export interface LockCounts {
  /** Acquire attempts sent to the server (first tries, retries, the tries of a sweep). */
  attempts: number;
  /**
   * Waits that ended with the key passed on by the server's own line: the holder before let go
   * and the key went to this waiter (Redis: a grant message; etcd and ZooKeeper: the entry
   * ahead went; memory: the line moved on).
   */
  grants: number;
  /** Holds passed from a holder of this process straight to the next waiter of this process. */
  localHandoffs: number;
  /** Waiters woken by the server telling of a release (Redis: PUBLISH; etcd: a watch event). */
  notifiedWakeups: number;
  /** Waiters woken by their own fallback timer (the holder's lease left, or the wait cap). */
  timerWakeups: number;
}

/** Counts all at zero, for a new backend. @internal */
export const noCounts = (): LockCounts => ({
  notifiedWakeups: 0,
  timerWakeups: 0,
  localHandoffs: 0,
  attempts: 0,
  grants: 0,
});

/** One server (or endpoint) of a backend, as a health check found it. @internal */
export interface BackendNodeHealth {
  /** Where it is (`host:port`, a socket path...), never a password. */
  readonly node: string;
  readonly status: 'up' | 'down';
  /** Round trip of the check, in ms (when up). */
  readonly latencyMs?: number;
  /** Why it is down: the driver's error, or no answer in time. */
  readonly error?: string;
  /** Its role in its ensemble when the backend can tell (`leader`, `follower`, `standalone`). */
  readonly role?: string;
}

/** A group's servers as a health check found them. @internal */
export interface BackendHealth {
  /** Servers that must answer for locks to work (1, or a majority of a quorum). */
  readonly quorum: number;
  readonly nodes: readonly BackendNodeHealth[];
}

/** A caller of this process waiting for a key, as a backend reports it to the lock board. */
export interface LocalWait {
  readonly key: string;
  /** When it started waiting, epoch ms. */
  readonly since: number;
  /** When it gives up, epoch ms (when known). */
  readonly deadline?: number;
  /** A shared wait's kind; absent for the exclusive lock. */
  readonly share?: Share;
  /**
   * It has (or may have) an entry in the lock server's own queue (Redis, one node), where the
   * board reads it already; the callers behind it in its process have none.
   */
  readonly queued?: boolean;
}

/**
 * What `LockService` (and the watchdog) need of the lock backend of one group. Each is built by
 * a `LockBackendDefinition`: Redis (`redisBackend`, from the `clients` option), the in-process
 * backend (`backend: 'memory'` and `nest-locked/testing`), and the backends of the other entry
 * points (`nest-locked/postgres`, ...).
 *
 * The contract, whatever the implementation:
 * - exclusion per key; several keys are taken all or nothing;
 * - a caller waits up to `waitTimeout` (never rejecting before it), then gets
 *   `LockNotAcquiredError`; an unreachable backend is `LockBackendError`, never contention;
 * - each acquire gets a fence per key, strictly increasing per key; a read hold gets the key's
 *   current fence instead (at least the last writer's, below the next one);
 * - shared holds (`share`): read holds of a key share it and exclude writers, a waiting writer
 *   is not overtaken by later readers; permits of N admit N holders; a hold of another kind than
 *   the key's current holders (another N, read against permits) is a LockConfigError;
 * - a lease lasts `ttl` ms unless `extend` renews it; `extend` answers false once it is lost.
 *
 * `L`: the backend's own lease type, when it keeps more per hold than `Lease`.
 * @internal
 */
export interface LockBackend<L extends Lease = Lease> {
  /** The client group's name. */
  readonly name: string;
  readonly stats: LockCounts;
  /**
   * Server-side subscriptions this process listens to right now, for a backend that subscribes
   * per key (Redis: release channels); undefined for one that does not.
   */
  readonly subscriptions?: number;
  /** Keys with local holders or waiters right now. */
  readonly queueCount: number;
  /**
   * Whether `tryAcquireAny` sweeps the keys in one call (one round trip; none in memory). False:
   * it is a loop of tries, and the API sweeps with `tryAcquire` itself.
   */
  readonly canTakeAny: boolean;
  /** Callers of this process waiting for `key` (holders not counted). */
  queued(key: string): number;
  /** Whether a caller of this process holds `key`. */
  holds(key: string): boolean;
  /**
   * Takes every key (sorted, deduplicated by the caller), waiting up to `waitTimeout` ms.
   * @throws LockNotAcquiredError when still busy at the deadline
   * @throws LockBackendError when the backend cannot be asked, or the client closes
   */
  acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease>;
  /**
   * One try, no waiting: the lease, or the busy holder's remaining lease in ms (where the
   * backend cannot know it, a documented estimate: see `SessionBackend.busyAnswer`); a busy
   * `acquire`'s LockNotAcquiredError carries the same in `retryAfterMs`.
   */
  tryAcquire(keys: readonly string[], ttl: number, acks?: ReplicaAcks): Promise<Lease | number>;
  /** One try at each key, in order; the first free one is taken. */
  tryAcquireAny(
    keys: readonly string[],
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<{ lease: L; index: number } | number>;
  /** Renews the lease to `ttl` ms from now; false when it is no longer held. */
  extend(lease: L, ttl: number): Promise<boolean>;
  /** The lease is known to be over: nothing of this process waits for its release any more. */
  leaseEnded(lease: L): void;
  /** Releases the lease (or hands it to the next waiter). */
  release(lease: L): Promise<void>;
  /** `release` answered by callback, once: `error` undefined when it succeeded. */
  releaseThen(lease: L, done: (error?: unknown) => void): void;
  /**
   * Gives the lease up without freeing the keys: they stay locked until `ms` from now, then
   * expire (`minHold`); this process forgets the hold at once.
   */
  releaseByExpiry(lease: L, ms: number): Promise<void>;
  /** Whether `key` is locked right now. */
  isLocked(key: string): Promise<boolean>;
  /** Ends every wait in progress (they reject with LockBackendError). */
  abortWaits(): void;
  /**
   * Connects, when the module starts (`onModuleInit`), so the first lock does not pay for it. A
   * rejection is logged as a warning, not fatal: calls fail with `LockBackendError` until the
   * server answers.
   */
  start?(): Promise<void>;
  /**
   * How long `start()` may take, for a backend that bounds its own start (its connect timeout):
   * the module waits this long for it instead of its own bound (2 x commandTimeout, at least
   * 1 s), so the backend's own error, which names the servers, is the one logged.
   */
  readonly startTimeout?: number;
  /**
   * Calls work before `start` (nothing to connect first: every connection was passed in by the
   * app). Absent: a backend with `start` is usable once it ran.
   */
  readonly usableBeforeStart?: boolean;
  /**
   * `listener` is told each time a connection to a server is ready again after it was lost: the
   * holds on it may have been lost while it was away (a restart without persistence), and are
   * renewed at once to find out.
   */
  onReconnect?(listener: () => void): void;
  /**
   * Told, before any call, each lease length the app's methods declare (`ttl`, `minHold`), for a
   * backend whose rules depend on the longest lease in use (Redis: a restarted node votes again
   * once it has passed).
   */
  leaseInUse?(ttl: number): void;
  /** Checks every server of the group within `timeout` ms (`RedlockHealthIndicator`). */
  health?(timeout: number): Promise<BackendHealth>;
  /**
   * The callers of this process waiting right now, oldest first, at most `limit` (read by the
   * lock board, on demand, for a backend whose waiting lines no other process can read).
   */
  waitingNow?(limit: number): LocalWait[];
  /**
   * The lock board's reads of this group's lock server (every process's holds and lines) and
   * its force release; built once, by `nest-locked/board` only. Absent where the backend lives
   * in this process (`memory`: what this process publishes is everything), or undefined where
   * the server's state cannot be read.
   */
  boardSource?(): BoardSource | undefined;
  /**
   * Where the group's instances share their lock-order edges (see `lock-order/`), for a backend
   * that can store them; without it each instance checks its own edges only.
   */
  readonly orderEdges?: OrderEdgeStore;
  /** Closes what the backend opened (never a pool or client the user passed in). */
  close(): Promise<void>;
}
