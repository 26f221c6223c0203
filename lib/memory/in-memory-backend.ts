import { performance } from 'node:perf_hooks';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import { withStatedRetry } from '../errors/stated-retry';
import { DeadlineTimer } from '../core/deadline-timer';
import { heldLease } from '../core/held-lease';
import { type Lease, type LeaseTaker, Leases } from '../core/lease';
import {
  type AcquireRequest,
  type LockBackend,
  type LockCounts,
  noCounts,
  type Share,
  type LocalWait,
} from '../core/lock-backend';
import { abortReason, refuseToStart } from '../core/wait-rules';
import { settleTo } from '../settle-to';
import { shareMismatch } from '../core/share-mismatch';
import { armExpiry, letGo, type SessionHold } from '../core/session-hold';
import { TokenMint } from '../core/token-mint';
import { BusyRules } from './busy-rules';

/**
 * A lease held in memory, shared by every key it holds (several keys: all or nothing); the key
 * frees by itself at `expiresAt` unless renewed.
 */
type Held = SessionHold;

/**
 * One key: its fence counter (kept for the backend's life: fences never go back) and holders:
 * one exclusive holder, or shared ones of one kind (readers, or permits of one N).
 */
interface KeyState {
  fence: number;
  holders: Held[];
}

/** A caller waiting for its keys, in arrival order. */
interface MemoryWaiter extends LeaseTaker {
  readonly keys: readonly string[];
  readonly share?: Share;
  /** When it gives up (`performance.now()` clock). */
  readonly deadline: number;
  /** The backend was down while it waited: at the deadline it fails with this, not as busy. */
  outage?: LockBackendError;
  settle(lease: Lease | undefined, reason?: unknown): void;
}

/**
 * The lock engine of one client group, in this process's memory, for `nest-locked/testing`: the
 * `LockBackend` contract the Redis engine keeps, without a server, plus the faults a test sets
 * (a busy key, a backend that is down, a lost lock).
 *
 * - Exclusion per key; several keys are taken all or nothing. Shared holds: readers share a
 *   key, permits of N admit N holders; another kind than the current holders' (another N, read
 *   against permits) is a LockConfigError.
 * - FIFO: a caller never takes a key an earlier caller waits for (so a waiting writer is never
 *   overtaken by later readers); readers waiting together are granted together; a waiter for
 *   several keys holds its place in each key's line, so nobody starves and nothing deadlocks.
 * - A waiter never gives up before its deadline (`DeadlineTimer`), then fails with
 *   `LockNotAcquiredError`, or with `LockBackendError` if the backend went down meanwhile.
 * - Fences: one counter per key, +1 at every acquisition but a read hold's, which gets the
 *   counter as it is (the last writer's fence).
 * - Leases: a key frees by itself `ttl` ms after it was taken or last renewed; the watchdog
 *   renews it through `extend`, which answers false once it is lost.
 * @internal
 */
export class InMemoryBackend implements LockBackend {
  readonly stats: LockCounts = noCounts();
  readonly canTakeAny = true;
  private readonly leases: Leases;
  private readonly states = new Map<string, KeyState>();
  private readonly waiters: MemoryWaiter[] = [];
  /** The `busy` control: acquisitions that find a key busy whoever holds it. */
  private readonly busyRules = new BusyRules();
  private readonly tokens: TokenMint;
  private downCause?: Error;
  private closed = false;

  constructor(
    readonly name: string,
    driftFactor: number,
  ) {
    this.leases = new Leases(driftFactor);
    this.tokens = new TokenMint(name);
  }

  get queueCount(): number {
    const busy = new Set<string>();
    const now = performance.now();
    for (const [key, state] of this.states) if (this.heldAt(state, now)) busy.add(key);
    for (const w of this.waiters) for (const key of w.keys) busy.add(key);
    return busy.size;
  }

  queued(key: string): number {
    return this.waiters.filter((w) => w.keys.includes(key)).length;
  }

  holds(key: string): boolean {
    const state = this.states.get(key);
    return !!state && !!this.heldAt(state, performance.now());
  }

  async acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    const { ttl, waitTimeout, signal } = request;
    const startedAt = performance.now();
    refuseToStart(keys, this.closed, signal);
    this.stats.attempts++;
    this.failIfDown(keys, 'acquire');
    const turnedAway = this.busyRules.turnsAway(keys, !!request.seenBusy, ttl);
    if (turnedAway) {
      const busy = new LockNotAcquiredError(keys, 0, turnedAway.retryAfterMs);
      throw turnedAway.stated ? withStatedRetry(busy) : busy;
    }
    const { share } = request;
    this.checkKind(keys, share);
    const taker: LeaseTaker = { token: this.nextToken(), ttl, startedAt };
    if (this.free(keys, share)) return this.take(keys, taker, share);
    if (waitTimeout <= 0) {
      throw new LockNotAcquiredError(keys, performance.now() - startedAt, this.pttl(keys, ttl));
    }
    return this.wait(keys, taker, startedAt + waitTimeout, signal, share);
  }

  async tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number> {
    this.stats.attempts++;
    this.failIfDown(keys, 'acquire');
    const turnedAway = this.busyRules.turnsAway(keys, false, ttl);
    if (turnedAway) return turnedAway.retryAfterMs;
    if (!this.free(keys)) return this.pttl(keys, ttl);
    return this.take(keys, { token: this.nextToken(), ttl, startedAt: performance.now() });
  }

  async tryAcquireAny(
    keys: readonly string[],
    ttl: number,
  ): Promise<{ lease: Lease; index: number } | number> {
    this.stats.attempts++;
    this.failIfDown(keys, 'acquire');
    const ruled = this.busyRules.sweep(keys);
    let shortest = Infinity;
    for (let index = 0; index < keys.length; index++) {
      const key = [keys[index]];
      if (ruled.includes(keys[index])) continue;
      if (this.free(key)) {
        const taker = { token: this.nextToken(), ttl, startedAt: performance.now() };
        return { lease: this.take(key, taker), index };
      }
      shortest = Math.min(shortest, this.pttl(key, ttl));
    }
    return Number.isFinite(shortest) ? shortest : ttl;
  }

  async extend(lease: Lease, ttl: number): Promise<boolean> {
    this.failIfDown(lease.keys, 'extend');
    const start = performance.now();
    const held = this.heldBy(lease, start);
    if (!held) {
      this.leaseEnded(lease);
      return false;
    }
    held.expiresAt = start + ttl;
    lease.renewed(start, ttl, this.leases.drift(ttl));
    this.arm(held);
    return true;
  }

  leaseEnded(lease: Lease): void {
    lease.end();
  }

  async release(lease: Lease): Promise<void> {
    if (!letGo(lease)) return;
    // Down: the release is lost, as a release Redis never got; the lease expires by itself.
    this.failIfDown(lease.keys, 'release');
    const held = this.heldBy(lease, performance.now());
    if (!held) return;
    this.drop(held);
    this.grant();
  }

  releaseThen(lease: Lease, done: (error?: unknown) => void): void {
    settleTo(this.release(lease), done);
  }

  async releaseByExpiry(lease: Lease, ms: number): Promise<void> {
    if (!letGo(lease)) return;
    this.failIfDown(lease.keys, 'release');
    const held = this.heldBy(lease, performance.now());
    if (!held) return;
    // Held by nobody of this process from now on, and free for everyone once `ms` passed.
    held.expiresAt = performance.now() + ms;
    this.arm(held);
  }

  async isLocked(key: string): Promise<boolean> {
    this.failIfDown([key], 'check');
    return this.holds(key);
  }

  abortWaits(): void {
    this.closed = true;
    for (const w of [...this.waiters]) w.settle(undefined, abortReason(w.keys));
  }

  async close(): Promise<void> {
    this.abortWaits();
    for (const state of this.states.values()) {
      for (const held of state.holders) clearTimeout(held.timer);
    }
  }

  // ---------------------------------------------------------------- controls (tests)

  /** The next `times` acquisitions of `key` (and of its slices) find it busy. */
  busy(key: string, times: number, retryAfterMs?: number): void {
    this.busyRules.set(key, times, retryAfterMs);
  }

  /** Every call fails with a LockBackendError caused by `cause` until `restore`. */
  down(cause: Error): void {
    this.downCause = cause;
    for (const w of this.waiters) w.outage = this.backendError(w.keys, 'acquire');
  }

  restore(): void {
    if (!this.downCause) return;
    this.downCause = undefined;
    for (const w of this.waiters) w.outage = undefined;
    this.grant();
  }

  /**
   * Takes the held lock of `key` away from its holder (as an expiry or another client would):
   * the key frees for the next caller, with a larger fence, and the holder's lease proves
   * nothing any more. The lease, or undefined if nobody holds the key. With shared holders
   * (read or permits), the oldest one loses its share.
   */
  lose(key: string): Lease | undefined {
    const state = this.states.get(key);
    const held = state && this.heldAt(state, performance.now());
    if (!held) return undefined;
    this.drop(held);
    held.lease.end();
    this.grant();
    return held.lease;
  }

  /** Clears every control (`busy`, `down`); holds, waiters and fences stay as they are. */
  reset(): void {
    this.busyRules.clear();
    this.restore();
  }

  // ---------------------------------------------------------------- internals

  private nextToken(): string {
    return this.tokens.next();
  }

  private state(key: string): KeyState {
    let state = this.states.get(key);
    if (!state) this.states.set(key, (state = { fence: 0, holders: [] }));
    return state;
  }

  /**
   * The key's holders at `now`. A lease run out no longer counts, though its timer may not have
   * fired yet: that timer still runs, to serve the waiters.
   */
  private live(state: KeyState, now: number): Held[] {
    const { holders } = state;
    // Backwards: `unlink` takes the run-out one out of this very array (no copy per call).
    for (let i = holders.length - 1; i >= 0; i--) {
      if (holders[i].expiresAt <= now) this.unlink(holders[i]);
    }
    return holders;
  }

  /** The key's (oldest) holder at `now`, if any. */
  private heldAt(state: KeyState, now: number): Held | undefined {
    return this.live(state, now)[0];
  }

  private heldBy(lease: Lease, now: number): Held | undefined {
    const state = this.states.get(lease.keys[0]);
    return state && this.live(state, now).find((h) => h.lease === lease);
  }

  /** Whether a hold of kind `share` fits beside the key's current holders. */
  private fits(state: KeyState, share: Share | undefined, now: number): boolean {
    const holders = this.live(state, now);
    if (holders.length === 0) return true;
    if (share === undefined || holders[0].lease.share !== share) return false;
    return share === 'read' || holders.length < share;
  }

  /**
   * Every key fits a hold of kind `share` and is awaited by nobody (a newcomer never passes a
   * waiter).
   */
  private free(keys: readonly string[], share?: Share): boolean {
    const now = performance.now();
    return keys.every(
      (key) =>
        !this.waiters.some((w) => w.keys.includes(key)) && this.fits(this.state(key), share, now),
    );
  }

  /** @throws LockConfigError when a key is held as another kind of shared hold */
  private checkKind(keys: readonly string[], share: Share | undefined): void {
    if (share === undefined) return;
    const now = performance.now();
    for (const key of keys) {
      const mismatch = shareMismatch(key, share, this.heldAt(this.state(key), now)?.lease.share);
      if (mismatch) throw mismatch;
    }
  }

  /** The longest lease left among the holders of `keys` (a Retry-After estimate). */
  private pttl(keys: readonly string[], fallback: number): number {
    const now = performance.now();
    let left = 0;
    for (const key of keys) {
      for (const held of this.live(this.state(key), now)) {
        left = Math.max(left, held.expiresAt - now);
      }
    }
    return left > 0 ? left : fallback;
  }

  private take(keys: readonly string[], taker: LeaseTaker, share?: Share): Lease {
    const start = performance.now();
    // A reader gets the fence as it is: the version it reads.
    const fences = keys.map((key) =>
      share === 'read' ? this.state(key).fence : ++this.state(key).fence,
    );
    const lease = heldLease({
      keys,
      token: taker.token,
      fences,
      ttl: taker.ttl,
      validUntil: this.leases.validUntil(start, taker.ttl),
      waitedMs: performance.now() - taker.startedAt,
      share,
    });
    const held: Held = { lease, expiresAt: start + taker.ttl };
    for (const key of keys) this.state(key).holders.push(held);
    this.arm(held);
    return lease;
  }

  /** Frees the keys when the lease runs out. */
  private arm(held: Held): void {
    armExpiry(held, () => {
      this.drop(held);
      this.grant();
    });
  }

  /** The keys are free of `held` and its timer is off. */
  private drop(held: Held): void {
    clearTimeout(held.timer);
    this.unlink(held);
  }

  private unlink(held: Held): void {
    for (const key of held.lease.keys) {
      const state = this.states.get(key);
      const at = state ? state.holders.indexOf(held) : -1;
      if (at >= 0) state!.holders.splice(at, 1);
    }
  }

  /**
   * Grants keys to waiters, oldest first. A waiter that cannot have all its keys yet keeps
   * them from every later waiter (per-key FIFO), so a multi-key waiter is never starved.
   */
  private grant(): void {
    if (this.downCause || this.closed) return;
    const now = performance.now();
    const claimed = new Set<string>();
    for (const w of [...this.waiters]) {
      const ready = w.keys.every((k) => !claimed.has(k) && this.fits(this.state(k), w.share, now));
      if (ready) {
        this.stats.grants++;
        w.settle(this.take(w.keys, w, w.share));
      } else for (const k of w.keys) claimed.add(k);
    }
  }

  private wait(
    keys: readonly string[],
    taker: LeaseTaker,
    deadline: number,
    signal: AbortSignal | undefined,
    share: Share | undefined,
  ): Promise<Lease> {
    return new Promise<Lease>((resolve, reject) => {
      const onAbort = () => waiter.settle(undefined, signal!.reason);
      const timer = new DeadlineTimer(deadline, {
        onDeadline: () => {
          const waited = performance.now() - taker.startedAt;
          const busy = new LockNotAcquiredError(keys, waited, this.pttl(keys, taker.ttl));
          waiter.settle(undefined, waiter.outage ?? busy);
        },
      });
      const waiter: MemoryWaiter = {
        ...taker,
        keys,
        share,
        deadline,
        settle: (lease, reason) => {
          const at = this.waiters.indexOf(waiter);
          if (at < 0) return;
          this.waiters.splice(at, 1);
          timer.cancel();
          signal?.removeEventListener('abort', onAbort);
          if (lease) resolve(lease);
          else {
            reject(reason);
            // Its place in the lines is free: those behind it may go now.
            this.grant();
          }
        },
      };
      if (this.downCause) waiter.outage = this.backendError(keys, 'acquire');
      this.waiters.push(waiter);
      signal?.addEventListener('abort', onAbort);
    });
  }

  /** The callers waiting right now, oldest first, one entry per key (the lock board). */
  waitingNow(limit: number): LocalWait[] {
    // performance.now() -> epoch ms.
    const offset = Date.now() - performance.now();
    const out: LocalWait[] = [];
    for (const w of this.waiters) {
      for (const key of w.keys) {
        if (out.length >= limit) return out;
        const since = Math.round(w.startedAt + offset);
        out.push({ key, since, deadline: Math.round(w.deadline + offset), share: w.share });
      }
    }
    return out;
  }

  private failIfDown(keys: readonly string[], operation: string): void {
    if (this.downCause) throw this.backendError(keys, operation);
  }

  private backendError(keys: readonly string[], operation: string): LockBackendError {
    return new LockBackendError(keys, [this.downCause!], operation);
  }
}
