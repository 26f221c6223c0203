import type { ReplicaAcks } from '../redis/lock-protocol';
import type { Lease, Share } from './lease';
import type { OrderEdgeStore } from '../lock-order/order-edge-store';

export type { Lease } from './lease';

export type { Share } from './lease';

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

/** Counters for tests and the benchmark. @internal */
export interface LockClientStats {
  /** Waiters woken by a release notification (PUBLISH). */
  notifiedWakeups: number;
  /** Waiters woken by their fallback timer (the holder's remaining lease, or the wait cap). */
  timerWakeups: number;
  /** Locks handed straight to a waiter of this process. */
  localHandoffs: number;
  /** Acquire round trips sent. */
  attempts: number;
  /** Locks received by grant: a release in another process passed the key to us. */
  grants: number;
}

/** Counters all at zero, for a new backend. @internal */
export const noStats = (): LockClientStats => ({
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
 * What `LockService` (and the watchdog) need of the lock engine of one client group. The
 * implementations: `LockClient` (Redis), the in-process backend (`backend: 'memory'` and
 * `nest-locked/testing`), and the backends of the other entry points (`nest-locked/postgres`,
 * ...), each built by a `LockBackendDefinition`.
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
 * @internal
 */
export interface LockBackend {
  /** The client group's name. */
  readonly name: string;
  readonly stats: LockClientStats;
  /** Release channels listened to right now (`size`). */
  readonly notifier: { readonly size: number };
  /** Keys with local holders or waiters right now. */
  readonly queueCount: number;
  /** Whether `tryAcquireAny` is available (a segmented sweep in one call). */
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
  /** One try, no waiting: the lease, or the busy holder's remaining lease in ms. */
  tryAcquire(keys: readonly string[], ttl: number, acks?: ReplicaAcks): Promise<Lease | number>;
  /** One try at each key, in order; the first free one is taken. */
  tryAcquireAny(
    keys: readonly string[],
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<{ lease: Lease; index: number } | number>;
  /** Renews the lease to `ttl` ms from now; false when it is no longer held. */
  extend(lease: Lease, ttl: number): Promise<boolean>;
  /** The lease is known to be over: nothing of this process waits for its release any more. */
  leaseEnded(lease: Lease): void;
  /** Releases the lease (or hands it to the next waiter). */
  release(lease: Lease): Promise<void>;
  /** `release` answered by callback, once: `error` undefined when it succeeded. */
  releaseThen(lease: Lease, done: (error?: unknown) => void): void;
  /**
   * Gives the lease up without freeing the keys: they stay locked until `ms` from now, then
   * expire (`minHold`); this process forgets the hold at once.
   */
  releaseByExpiry(lease: Lease, ms: number): Promise<void>;
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
  /** Checks every server of the group within `timeout` ms (`RedlockHealthIndicator`). */
  health?(timeout: number): Promise<BackendHealth>;
  /**
   * The callers of this process waiting right now, oldest first, at most `limit` (read by the
   * lock board, on demand, for a backend whose waiting lines no other process can read).
   */
  waitingNow?(limit: number): LocalWait[];
  /**
   * Where the group's instances share their lock-order edges (see `lock-order/`), for a backend
   * that can store them; without it each instance checks its own edges only.
   */
  readonly orderEdges?: OrderEdgeStore;
  /** Closes what the backend opened (never a pool or client the user passed in). */
  close(): Promise<void>;
}
