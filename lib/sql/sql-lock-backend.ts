import { performance } from 'node:perf_hooks';
import { serverDeadlock } from './sql-errors';
import type { LoggerService } from '@nestjs/common';
import type { BoardSource } from '../core/board-source';
import { LockBackendError, LockConfigError, LockError, LockNotAcquiredError } from '../errors';
import { heldLease } from '../core/held-lease';
import type { Lease, Share } from '../core/lease';
import { type AcquireRequest, type BackendHealth } from '../core/lock-backend';
import { SessionBackend, type AbortableWait } from '../core/session-backend';
import type { SessionHold } from '../core/session-hold';
import { abortReason, outageRetryDelay } from '../core/wait-rules';
import type {
  LockBackendContext,
  LockBackendDefinition,
  LockBackendSupports,
} from '../core/lock-backend-definition';
import { SQL_SESSION_LOST } from './sql.messages';
import { settleTo } from '../settle-to';
import type { SqlDialect, SqlSession } from './sql-dialect';
import { SqlTimeoutError, within } from './sql-timeout';

/** Keys whose server-side names are kept (a hot set; many more keys just hash again). */
const NAME_CACHE_SIZE = 1024;

/** What the module gives the engine of one group. */
export interface SqlBackendSettings {
  readonly keyPrefix: string;
  readonly driftFactor: number;
  /** The longest one round trip may take, in ms. */
  readonly commandTimeout: number;
  readonly logger: LoggerService;
}

/**
 * A hold: its lease and the session that holds its locks; its expiry frees the locks when the
 * lease runs out unrenewed (watchdog off, maxHold, a stall). A minHold keeps it (and its
 * session) here, uncounted, until then.
 */
interface SqlHold<S extends SqlSession> extends SessionHold {
  readonly session: S;
}

/**
 * One acquire in progress: a caller's signal or the shutdown (`abortWaits`) ends it early.
 */
class SqlWait implements AbortableWait {
  aborted?: unknown;
  private stopNow?: (reason: unknown) => void;

  constructor(
    readonly keys: readonly string[],
    private readonly signal?: AbortSignal,
  ) {
    signal?.addEventListener('abort', this);
  }

  /** The signal's `abort` event. */
  handleEvent(): void {
    this.abort(this.signal!.reason);
  }

  abort(reason: unknown): void {
    this.aborted ??= reason;
    this.stopNow?.(reason);
  }

  /** `work` bounded by `ms` and by this wait's end. */
  bound<T>(work: Promise<T>, ms: number, what: string, late?: (value: T) => void): Promise<T> {
    if (this.aborted !== undefined) {
      work.then(late, () => undefined);
      return Promise.reject(this.aborted);
    }
    return within(work, ms, what, late, (stop) => (this.stopNow = stop));
  }

  /** Waits `ms` (a back-off between tries); rejects at once if the wait is aborted. */
  pause(ms: number): Promise<void> {
    // The bound is only the abort's: the pause itself ends first.
    return this.bound(new Promise<void>((r) => setTimeout(r, ms)), ms + 1_000, 'a pause');
  }

  end(): void {
    this.signal?.removeEventListener('abort', this);
  }
}

/**
 * The lock engine of a group on a SQL database (`nest-locked/postgres`, `nest-locked/mysql`):
 * session locks on a connection held for the hold, so the lease is the session.
 *
 * - Exclusion and waiting are the server's: a waiter sits in the server's own lock queue up to
 *   its waitTimeout (no polling); keys are taken in the caller's sorted order (no deadlock).
 * - Fences come in the lock's own round trip, taken after the lock was granted (`lock`).
 * - The session ending (connection error or end, the server killing it, a restart) frees the
 *   locks on the server at once and is reported to the holder at once (`lease.watcher`).
 * - A lease still lasts `ttl` unless renewed: `extend` is one keep-alive round trip on the
 *   session; a lease run out (watchdog off, maxHold, a stalled server) frees its locks.
 * - Every call is bounded: a wait by waitTimeout + commandTimeout, anything else by
 *   commandTimeout (a stalled server is a LockBackendError, never a hang).
 * @internal
 */
export class SqlLockBackend<S extends SqlSession> extends SessionBackend<SqlHold<S>, SqlWait> {
  /** Server-side names of recent keys: a hash per acquire is a measurable part of a cycle. */
  private readonly names = new Map<string, string>();

  constructor(
    readonly name: string,
    private readonly dialect: SqlDialect<S>,
    private readonly settings: SqlBackendSettings,
  ) {
    super({ driftFactor: settings.driftFactor, tokenPrefix: name, system: dialect.label });
  }

  async acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    this.opening(keys, request.signal);
    const taken = await this.take(
      keys,
      request.ttl,
      request.share,
      request.waitTimeout,
      request.signal,
      request.seenBusy,
    );
    if (typeof taken !== 'number') return taken;
    throw new LockNotAcquiredError(keys, taken, await this.busyAnswer(keys, request.ttl));
  }

  async tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number> {
    if (this.closed) throw abortReason(keys);
    try {
      // Busy is an answer here, not an error: no LockNotAcquiredError built per busy try.
      const taken = await this.take(keys, ttl, undefined, 0);
      return typeof taken === 'number' ? await this.busyAnswer(keys, ttl) : taken;
    } catch (err) {
      if (err instanceof LockNotAcquiredError) return err.retryAfterMs;
      throw err;
    }
  }

  async extend(lease: Lease, ttl: number): Promise<boolean> {
    const hold = this.held.get(lease);
    if (!hold || lease.released) return false;
    const start = performance.now();
    try {
      await within(this.dialect.keepAlive(hold.session), this.timeout, 'a keep-alive');
    } catch (err) {
      if (!this.isHeld(hold)) return false;
      throw this.backendError(lease.keys, 'extend', err);
    }
    if (!this.isHeld(hold)) return false;
    lease.renewed(start, ttl, this.leases.drift(ttl));
    hold.expiresAt = start + ttl;
    this.arm(hold);
    return true;
  }

  leaseEnded(lease: Lease): void {
    lease.end();
    const hold = this.held.get(lease);
    if (hold) settleTo(this.free(hold), (err) => this.debugFailure('free', err));
  }

  protected releaseHeld(hold: SqlHold<S>): Promise<void> {
    return this.free(hold);
  }

  protected async releaseHeldByExpiry(hold: SqlHold<S>, ms: number): Promise<void> {
    // This process forgets the hold now; the session keeps the locks `ms` more, then frees them.
    this.uncount(hold);
    hold.expiresAt = performance.now() + ms;
    this.arm(hold);
  }

  async isLocked(key: string): Promise<boolean> {
    if (this.local.holds(key)) return true;
    try {
      const name = this.lockName(key);
      return await within(this.dialect.isLocked(name), this.timeout, 'a lock check');
    } catch (err) {
      throw this.backendError([key], 'check', err);
    }
  }

  /** Connects once, so the first lock does not pay for it and bad settings show at startup. */
  async start(): Promise<void> {
    try {
      await within(this.dialect.ping(), this.timeout, 'a first query');
    } catch (err) {
      const described = this.dialect.describe(err);
      if (this.dialect.isConfigError(err)) throw new LockConfigError(described.message, this.name);
      throw described;
    }
  }

  async health(timeout: number): Promise<BackendHealth> {
    const node = this.dialect.node;
    const start = performance.now();
    try {
      await within(this.dialect.ping(), timeout, 'a ping');
      const latencyMs = Math.round((performance.now() - start) * 100) / 100;
      return { quorum: 1, nodes: [{ node, status: 'up', latencyMs }] };
    } catch (err) {
      return {
        quorum: 1,
        nodes: [{ node, status: 'down', error: this.dialect.describe(err).message }],
      };
    }
  }

  /** The lock board's reads and force release on this group (`nest-locked/board` only). */
  boardSource(): BoardSource | undefined {
    return this.dialect.boardSource?.(this.name, this.settings.keyPrefix);
  }

  async close(): Promise<void> {
    this.abortWaits();
    for (const hold of [...this.held.values()]) this.end(hold, true);
    await this.dialect.close();
  }

  // ---------------------------------------------------------------- internals

  /** The server-side name of `key`, from a bounded cache of recent keys. */
  private lockName(key: string): string {
    let name = this.names.get(key);
    if (name === undefined) {
      if (this.names.size >= NAME_CACHE_SIZE) this.names.clear();
      name = this.dialect.lockName(this.settings.keyPrefix + key);
      this.names.set(key, name);
    }
    return name;
  }

  private get timeout(): number {
    return this.settings.commandTimeout;
  }

  /**
   * One acquire: a session, then the lock and fences in one round trip (per key on MySQL). The
   * lease, or the ms waited when the keys stayed busy. A waiter rides through a blip: when the
   * server fails its try (a restart, its session killed), it backs off and queues again on a
   * new session until its deadline (the server's queue went with the session: it queues
   * behind whoever asked first since); past the deadline, the last failure is its error.
   */
  private async take(
    keys: readonly string[],
    ttl: number,
    share: Share | undefined,
    waitTimeout: number,
    signal?: AbortSignal,
    seenBusy = false,
  ): Promise<Lease | number> {
    const startedAt = performance.now();
    const deadline = startedAt + waitTimeout;
    const names = keys.map((key) => this.lockName(key));
    this.stats.attempts++;
    // Busy here or just found busy (a segmented sweep): straight into the server's queue.
    const contended = seenBusy || keys.some((key) => this.local.inUse(key));
    const wait = new SqlWait(keys, signal);
    this.local.waitStarted(wait);
    try {
      for (let failures = 1; ; failures++) {
        try {
          return await this.takeOnce(keys, names, ttl, share, deadline, contended, wait, startedAt);
        } catch (err) {
          const error = this.failure(err, wait, keys, startedAt, ttl);
          if (!this.ridesThrough(err, error, wait, deadline)) throw error;
          await wait.pause(outageRetryDelay(failures, deadline));
          if (performance.now() >= deadline) throw error;
        }
      }
    } finally {
      wait.end();
      this.local.waitEnded(wait);
    }
  }

  /** One try of `take`: on one session, waiting in the server's queue until `deadline`. */
  private async takeOnce(
    keys: readonly string[],
    names: readonly string[],
    ttl: number,
    share: Share | undefined,
    deadline: number,
    contended: boolean,
    wait: SqlWait,
    startedAt: number,
  ): Promise<Lease | number> {
    const left = () => Math.max(0, deadline - performance.now());
    let session: S | undefined;
    try {
      // A pool with every connection in use makes the caller wait for one: part of its wait.
      session = await wait.bound(
        this.checkout(deadline),
        left() + this.timeout,
        'a connection',
        (late) => late.release(false),
      );
      const fences = await wait.bound(
        this.dialect.lock(session, names, share, left(), contended),
        left() + this.timeout,
        'a lock',
      );
      if (!fences) {
        session.release(false);
        session = undefined;
        return performance.now() - startedAt;
      }
      const held = session;
      session = undefined;
      return this.hold(keys, share, held, fences, ttl, startedAt);
    } catch (err) {
      if (session) this.giveUp(session);
      throw err;
    }
  }

  /**
   * Whether a failed try is worth another: a server failure (not a setting to fix, not the
   * caller's or the shutdown's abort) with wait left. A lock the session may have been granted
   * went with it (a session lock), so a new try is safe.
   */
  private ridesThrough(cause: unknown, error: unknown, wait: SqlWait, deadline: number): boolean {
    return (
      error instanceof LockBackendError &&
      wait.aborted === undefined &&
      !this.closed &&
      !this.dialect.isConfigError(cause) &&
      performance.now() < deadline
    );
  }

  /**
   * A connection of the pool. A pool whose every connection holds or waits for a lock makes the
   * caller wait for one, as long as its own wait lasts: pg's pool gives up after its connection
   * timeout, so a full pool is asked again until the deadline, then the caller is busy.
   */
  private async checkout(deadline: number): Promise<S> {
    for (;;) {
      try {
        return await this.dialect.checkout();
      } catch (err) {
        if (!this.dialect.saturated()) throw err;
        const now = performance.now();
        if (now >= deadline) throw new SqlTimeoutError('a connection', now - deadline);
      }
    }
  }

  /**
   * A session whose lock statement failed, timed out or was given up: closed (its locks go with
   * it), and killed on the server too, where a statement may still wait in the lock queue.
   */
  private giveUp(session: S): void {
    session.release(true);
    settleTo(within(this.dialect.kill(session.id), this.timeout, 'a kill'), (err) =>
      this.debugFailure('kill', err),
    );
  }

  /** What a failed acquire throws. */
  private failure(
    err: unknown,
    wait: SqlWait,
    keys: readonly string[],
    startedAt: number,
    ttl: number,
  ): unknown {
    if (wait.aborted !== undefined && err === wait.aborted) return err;
    if (err instanceof LockError) return err;
    const deadlock = serverDeadlock(keys, err);
    if (deadlock) return deadlock;
    if (err instanceof SqlTimeoutError && err.what === 'a connection' && this.dialect.saturated()) {
      // Every connection of the pool holds or waits for a lock: contention, not an outage.
      return new LockNotAcquiredError(keys, performance.now() - startedAt, ttl);
    }
    return this.backendError(keys, 'acquire', err);
  }

  private hold(
    keys: readonly string[],
    share: Share | undefined,
    session: S,
    fences: readonly number[],
    ttl: number,
    startedAt: number,
  ): Lease {
    const start = performance.now();
    const lease = heldLease({
      keys,
      token: this.nextToken(),
      fences,
      ttl,
      validUntil: this.leases.validUntil(start, ttl),
      waitedMs: start - startedAt,
      share,
    });
    const hold: SqlHold<S> = { lease, session, expiresAt: start + ttl };
    this.keep(hold);
    session.watch((cause) => this.sessionLost(hold, cause));
    return lease;
  }

  /** The session ended under the hold: the server freed its locks; the holder learns it now. */
  private sessionLost(hold: SqlHold<S>, cause: Error): void {
    if (!this.isHeld(hold)) return;
    this.end(hold, true);
    hold.lease.end();
    const { label, node } = this.dialect;
    this.settings.logger.debug?.(SQL_SESSION_LOST(label, node, cause.message));
    hold.lease.watcher?.leaseEnded();
  }

  protected holdExpired(hold: SqlHold<S>): void {
    settleTo(this.free(hold), (err) => this.debugFailure('expire', err));
  }

  /** Unlocks and gives the connection back; one that cannot unlock is closed instead. */
  private async free(hold: SqlHold<S>): Promise<void> {
    if (!this.forget(hold)) return;
    try {
      await within(this.dialect.unlock(hold.session), this.timeout, 'an unlock');
    } catch (err) {
      hold.session.release(true);
      throw this.backendError(hold.lease.keys, 'release', err);
    }
    hold.session.release(false);
  }

  /** The hold is over here: forgotten, its timer off, and its connection closed if `destroy`. */
  private end(hold: SqlHold<S>, destroy: boolean): void {
    if (this.forget(hold) && destroy) hold.session.release(true);
  }

  protected override describe(error: unknown): Error {
    return this.dialect.describe(error);
  }

  private debugFailure(what: string, err: unknown): void {
    if (err === undefined) return;
    this.settings.logger.debug?.(
      `${this.dialect.kind} ${what}: ${this.dialect.describe(err).message}`,
    );
  }
}

/**
 * A backend definition over this engine: `dialect` builds the dialect of one group when the
 * module starts (its pool included).
 * @internal
 */
export function sqlBackendDefinition<S extends SqlSession>(
  kind: string,
  supports: LockBackendSupports,
  dialect: (context: LockBackendContext) => SqlDialect<S>,
): LockBackendDefinition {
  return {
    kind,
    supports,
    create: (context) => new SqlLockBackend(context.group, dialect(context), context),
  };
}
