import { performance } from 'node:perf_hooks';
import type { LockBackendError, LockConfigError } from '../errors';
import { asBackendError } from './backend-error';
import { type Lease, Leases } from './lease';
import { LocallyCountedBackend, type LocalWait } from './local-locks';
import type { AcquireRequest, LockBackend } from './lock-backend';
import { armExpiry, letGo, type SessionHold } from './session-hold';
import { TokenMint } from './token-mint';
import { abortReason, refuseToStart } from './wait-rules';

/** A wait of this process that the shutdown (`abortWaits`) ends with its reason. @internal */
export interface AbortableWait extends LocalWait {
  abort(reason: unknown): void;
}

/** What the base needs to know of a backend. @internal */
export interface SessionBackendSettings {
  /** The module's `driftFactor` (see `Leases`). */
  readonly driftFactor: number;
  /** What this backend's tokens start with (see `TokenMint`). */
  readonly tokenPrefix: string;
  /** The server as a LockBackendError names it: `etcd`, `ZooKeeper`, `PostgreSQL`... */
  readonly system: string;
}

/**
 * The life of a lock every backend whose locks live on a server (SQL, etcd, ZooKeeper) shares,
 * written once; a backend extends it and writes only what its server does differently.
 *
 * Here: the prologue of an acquire (`opening`), tokens (`nextToken`), the holds of this process and
 * their expiry (`keep` arms a timer at `expiresAt`; a hold not renewed by then ends: its lease
 * ends, `holdExpired` frees it on the server, its watcher hears), the release guards (a lease is
 * let go once), the end of every wait at shutdown (`abortWaits`), the busy answer of a try or an
 * acquire (`busyAnswer`: the holder's lease left, when known), a segmented sweep as a loop of tries
 * (`tryAcquireAny`; `canTakeAny` says so), and a server's failure as a LockBackendError
 * (`backendError`, always keys, operation, error).
 *
 * The backend writes: `acquire`, `tryAcquire`, `extend`, `leaseEnded`, `isLocked`, `close`
 * (its server's calls), `releaseHeld` and `releaseHeldByExpiry` (what letting go means on its
 * server), `holdExpired`, and `describe` (its driver's errors in words) if it has one.
 *
 * An abstract class rather than parts to wire together: the life of a hold reads in order in one
 * file, and the abstract members are the list of what a new backend writes.
 * @internal
 */
export abstract class SessionBackend<H extends SessionHold, W extends AbortableWait>
  extends LocallyCountedBackend<W>
  implements LockBackend
{
  abstract readonly name: string;
  /** A segmented sweep here is a loop of tries (`tryAcquireAny` below), not one call. */
  readonly canTakeAny: boolean = false;
  /** Set by `abortWaits` (the shutdown): no new wait starts. */
  protected closed = false;
  protected readonly leases: Leases;
  /** The holds of this process, by lease. */
  protected readonly held = new Map<Lease, H>();
  private readonly tokens: TokenMint;

  constructor(private readonly base: SessionBackendSettings) {
    super();
    this.leases = new Leases(base.driftFactor);
    this.tokens = new TokenMint(base.tokenPrefix);
  }

  /** What this process's tokens start with: its id beside other processes on the server. */
  protected get tokenPrefix(): string {
    return this.base.tokenPrefix;
  }

  abstract acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease>;
  /** One try, no waiting: the lease, or (busy) `busyAnswer`. */
  abstract tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number>;
  abstract extend(lease: Lease, ttl: number): Promise<boolean>;
  abstract leaseEnded(lease: Lease): void;
  abstract isLocked(key: string): Promise<boolean>;
  abstract close(): Promise<void>;
  /** Gives the keys of `hold`, forgotten by nobody yet, back on the server. */
  protected abstract releaseHeld(hold: H): Promise<void>;
  /** Keeps the keys of `hold` on the server `ms` more, then frees them; this process forgets it. */
  protected abstract releaseHeldByExpiry(hold: H, ms: number): Promise<void>;
  /** The hold ran out unrenewed (its lease already ended): free it on the server. */
  protected abstract holdExpired(hold: H): void;

  /** A driver's error in words (as it is by default). */
  protected describe(error: unknown): Error {
    return error instanceof Error ? error : new Error(String(error));
  }

  // ---------------------------------------------------------------- the contract's common part

  /** The first free key of `keys`, tried one by one, in order; busy: the shortest answer. */
  async tryAcquireAny(
    keys: readonly string[],
    ttl: number,
  ): Promise<{ lease: Lease; index: number } | number> {
    let shortest = Infinity;
    for (let index = 0; index < keys.length; index++) {
      const taken = await this.tryAcquire([keys[index]], ttl);
      if (typeof taken !== 'number') return { lease: taken, index };
      shortest = Math.min(shortest, taken);
    }
    return Number.isFinite(shortest) ? shortest : ttl;
  }

  async release(lease: Lease): Promise<void> {
    if (!letGo(lease)) return;
    const hold = this.held.get(lease);
    if (hold) await this.releaseHeld(hold);
  }

  async releaseByExpiry(lease: Lease, ms: number): Promise<void> {
    if (!letGo(lease)) return;
    const hold = this.held.get(lease);
    if (hold) await this.releaseHeldByExpiry(hold, ms);
  }

  abortWaits(): void {
    this.closed = true;
    for (const wait of [...this.local.waits]) wait.abort(abortReason(wait.keys));
  }

  // ---------------------------------------------------------------- for the backend

  /** The prologue of an acquire: refused once closed, or when its signal already aborted. */
  protected opening(keys: readonly string[], signal?: AbortSignal): void {
    refuseToStart(keys, this.closed, signal);
  }

  protected nextToken(): string {
    return this.tokens.next();
  }

  /** Holds `hold` from now: counted here, and ended at `hold.expiresAt` unless renewed. */
  protected keep(hold: H): void {
    hold.counted = true;
    this.held.set(hold.lease, hold);
    this.local.held(hold.lease.keys);
    this.arm(hold);
  }

  /** (Re)arms the end of `hold` at its `expiresAt`. */
  protected arm(hold: H): void {
    armExpiry(hold, () => {
      if (!this.isHeld(hold)) return;
      hold.lease.end();
      this.holdExpired(hold);
      hold.lease.watcher?.leaseEnded();
    });
  }

  /** Whether `hold` is still a hold of this process (not forgotten). */
  protected isHeld(hold: H): boolean {
    return this.held.get(hold.lease) === hold;
  }

  /** This process forgets `hold` (its keys may stay on the server); false if it already had. */
  protected forget(hold: H): boolean {
    if (!this.isHeld(hold)) return false;
    clearTimeout(hold.timer);
    this.held.delete(hold.lease);
    this.uncount(hold);
    return true;
  }

  /** No longer counted as held here (a `minHold` kept on the server, or forgotten). */
  protected uncount(hold: H): void {
    if (!hold.counted) return;
    hold.counted = false;
    this.local.released(hold.lease.keys);
  }

  /**
   * What a busy try or acquire answers (the contract's Retry-After): the longest lease left of a
   * holder of `keys` in this process, else what `server` can tell of the holder (etcd: its key's
   * lease), else `ttl` (nothing on the server says how long another process holds: the caller's own
   * lease is the estimate).
   */
  protected async busyAnswer(
    keys: readonly string[],
    ttl: number,
    server?: () => Promise<number | undefined>,
  ): Promise<number> {
    const now = performance.now();
    let left = 0;
    for (const hold of this.held.values()) {
      if (hold.lease.keys.some((key) => keys.includes(key))) {
        left = Math.max(left, hold.expiresAt - now);
      }
    }
    if (left > 0) return left;
    return (await server?.()) ?? ttl;
  }

  /** `error` as the LockBackendError of `operation` on `keys` (named errors pass as they are). */
  protected backendError(
    keys: readonly string[],
    operation: string,
    error: unknown,
  ): LockBackendError | LockConfigError {
    return asBackendError(keys, operation, error, this.base.system, (e) => this.describe(e));
  }
}
