import { performance } from 'node:perf_hooks';
import type { OrderEdgeStore } from '../core/order-edge-store';
import { EtcdOrderEdges } from './etcd-order-edges';
import type { Etcd3, ITxnResponse } from 'etcd3';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import { DeadlineTimer } from '../core/deadline-timer';
import { heldLease } from '../core/held-lease';
import type { Lease } from '../core/lease';
import { type AcquireRequest, type BackendHealth, type Share } from '../core/lock-backend';
import { SessionBackend } from '../core/session-backend';
import type { SessionHold } from '../core/session-hold';
import { abortReason, outageRetryDelay } from '../core/wait-rules';
import { ETCD_SESSION_LOST } from './etcd.messages';
import { firstOf, kindValue, linePrefix, OTHER_PART, prefixEnd, READ_PART } from './etcd-names';
import type { BoardSource } from '../core/board-source';
import { EtcdBoardSource } from './etcd-board-source';
import { EtcdSession, type SessionListener } from './etcd-session';
import { EtcdWait } from './etcd-wait';
import { checkEndpoints } from './etcd-health';
import { EntryOrder } from './etcd-entry-order';
import { enterLines, type Entry } from './etcd-entry';
import { LineWaits } from './etcd-line-waits';
import { OwnKeys } from './etcd-own-keys';
import { notCancelled, ownedBy, put } from './etcd-requests';
import { EtcdErrors } from './etcd-errors';
import { EtcdLeaseLeft } from './etcd-lease-left';

/** A hold of this process: its etcd keys (one per lock key) and its local lease length. */
interface Held extends SessionHold {
  readonly names: readonly string[];
  readonly session: EtcdSession;
  /** The create revision of its keys (one transaction wrote them all): the fence. */
  readonly revision: string;
}

/** What the backend needs besides the client. @internal */
export interface EtcdLockBackendConfig {
  readonly group: string;
  readonly keyPrefix: string;
  readonly driftFactor: number;
  /** The session lease's TTL, in whole seconds. */
  readonly sessionTtlSeconds: number;
  /** The endpoints to check one by one in `health` (empty with a client of the user's). */
  readonly hosts: readonly string[];
  /** Builds a client for one endpoint alone (health checks). */
  readonly endpointClient: (host: string) => Etcd3;
  /** Whether the client is ours to close. */
  readonly ownsClient: boolean;
  /** The longest one round trip may take, in ms (a waiter's last word at its deadline). */
  readonly commandTimeout: number;
}

/**
 * The lock engine of one client group on etcd: Go's `concurrency.Mutex` and `RWMutex` recipes
 * over one session lease per process (see `EtcdSession`).
 *
 * - A hold, held or waiting, is a key under the line of each of its lock keys (see
 *   `etcd-names.ts`), bound to the session lease; one transaction writes all of a caller's keys
 *   and reads who is before it, so the lines of several keys agree on one order (the
 *   transaction's revision) and a multi-key wait cannot deadlock.
 * - FIFO by create revision. A writer watches only the deletion of the last key created before
 *   its own, a reader only the last writer's; after that deletion it asks again (that key may
 *   have given up with others still before it). Behind a key of its own process it needs no
 *   watch: the process hears of that deletion itself, and behind an exclusive holder of its
 *   own it goes when that holder releases, without waiting for etcd to answer the delete
 *   (once a read finds its own key still there). A waiter is granted only while its own key
 *   is there: a key gone (its session lease revoked) ends the session. Permits of N watch
 *   the line's deletions and count the keys before them. No polling, and at most one watch
 *   per waiter, on one shared stream (see `LineWaits`). The entries of one process into a
 *   line keep the order they were asked in, and a burst of them goes at once (see
 *   `EntryOrder`; the entry itself: `enterLines`).
 * - Fence = the create revision of the hold's keys: strictly increasing across the cluster. A
 *   reader's is its own too, so it lies between the last writer's and the next one's.
 * - Lease: the call's `ttl` is kept by this process (the keys are deleted when it passes
 *   without `extend`); a dead process's keys go when the session lease runs out. `extend`
 *   checks that the keys are still the hold's. A session lost aborts every holder's signal.
 * - A waiter that gives up or times out deletes its keys; a failed delete is retried while the
 *   session lives (after that etcd deletes them itself; see `OwnKeys`).
 * - A waiter rides through a blip: when etcd fails its entry or its session is lost, it backs
 *   off and enters its lines again (at their end, under a new session if need be) until its
 *   deadline; at the deadline one round trip decides between busy and an outage.
 * @internal
 */
export class EtcdLockBackend extends SessionBackend<Held, EtcdWait> implements SessionListener {
  readonly name: string;
  /** Where the group's instances share their lock-order edges. */
  readonly orderEdges: OrderEdgeStore;
  /** The entries of this process into lines, in the order they were asked. */
  private readonly order = new EntryOrder<Entry>((entry) => BigInt(entry.revision));
  /** The keys of this process in etcd, and their deletion. */
  private readonly keys: OwnKeys;
  private readonly waits: LineWaits;
  /** Timers that delete the keys of a `minHold` once it is over. */
  private readonly minHolds = new Set<NodeJS.Timeout>();
  private current?: Promise<EtcdSession>;
  /** Aborted by `abortWaits`: ends a waiter's back-off between two entries. */
  private readonly closing = new AbortController();
  /** etcd's failures in words, and the last real one (see `EtcdErrors`). */
  private readonly errors: EtcdErrors;
  private readonly endpointClients = new Map<string, Etcd3>();
  /** The time left of holders' keys, for busy answers. */
  private readonly leaseLeft: EtcdLeaseLeft;

  constructor(
    private readonly client: Etcd3,
    private readonly config: EtcdLockBackendConfig,
  ) {
    // A hold's token is the name of its own key in etcd: none is minted.
    super({ driftFactor: config.driftFactor, tokenPrefix: config.group, system: 'etcd' });
    this.name = config.group;
    this.keys = new OwnKeys(
      client,
      config.keyPrefix,
      this.stats,
      () => this.closed && config.ownsClient,
    );
    this.waits = new LineWaits(client, this.stats, this.keys);
    this.errors = new EtcdErrors(config.hosts.join(', ') || 'the endpoints of your client');
    this.leaseLeft = new EtcdLeaseLeft(client, config.commandTimeout);
    this.orderEdges = new EtcdOrderEdges(client, config.keyPrefix);
  }

  /** The lock board's reads and force release on this group (`nest-locked/board` only). */
  boardSource(): BoardSource {
    return new EtcdBoardSource({
      client: this.client,
      group: this.name,
      keyPrefix: this.config.keyPrefix,
      session: () => this.current,
    });
  }

  /**
   * Opens the session, then reads once: etcd grants a lease without credentials even where
   * authentication is enabled, and would refuse the first lock instead.
   * @throws the failure in words (refused, no answer, credentials needed), for the startup warning
   */
  async start(): Promise<void> {
    try {
      await this.session([]);
      const prefix = Buffer.from(this.config.keyPrefix);
      await this.client.kv.range({
        key: prefix,
        range_end: prefixEnd(prefix),
        limit: 1,
        keys_only: true,
      });
    } catch (error) {
      throw error instanceof LockBackendError ? error.failures[0] : this.errors.describe(error);
    }
  }

  /**
   * Enters the lines of `keys` and waits its turn, entering again after a failure of etcd or a
   * session lost while the wait lasts (backing off as the Redis waiter does, see `wait-rules`).
   */
  async acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    const { waitTimeout, signal } = request;
    const startedAt = performance.now();
    const deadline = startedAt + waitTimeout;
    this.stats.attempts++;
    for (let failures = 1; ; failures++) {
      this.opening(keys, signal);
      try {
        return await this.enter(keys, request, startedAt, deadline);
      } catch (error) {
        const again = error instanceof LockBackendError && performance.now() < deadline;
        if (!again || this.closed || signal?.aborted) throw error;
        await this.backOff(outageRetryDelay(failures, deadline), signal);
        if (performance.now() >= deadline) throw error;
      }
    }
  }

  /** One entry into the lines of `keys`, and the wait for its turn until `deadline`. */
  private async enter(
    keys: readonly string[],
    request: AcquireRequest,
    startedAt: number,
    deadline: number,
  ): Promise<Lease> {
    const { ttl, waitTimeout, signal, share } = request;
    const session = await this.session(keys);
    const lines = keys.map((key) => linePrefix(this.config.keyPrefix, key));
    const part = share === 'read' ? READ_PART : OTHER_PART;
    const asked = lines.map((line) => session.name(line + part));
    let entry: Entry;
    try {
      // Exclusive holds of the same keys can swap places (see `EntryOrder`).
      const alike = share === undefined ? JSON.stringify(keys) : undefined;
      entry = await this.order.inTurn(keys, alike, () =>
        enterLines(this.client, this.config.keyPrefix, keys, lines, asked, session.id, share),
      );
    } catch (error) {
      this.keys.abandon(asked, session);
      throw this.backendError(keys, 'acquire', error);
    }
    // The keys of the place this caller was given.
    const names = entry.names;
    this.keys.add(names, session, entry.revision);
    // An abort during the entry's round trip had no listener yet: heard here.
    const refused = entry.mismatch ?? (signal?.aborted ? (signal.reason as unknown) : undefined);
    if (refused !== undefined) {
      this.keys.discard(names, entry.revision, session);
      throw refused;
    }
    if (entry.granted.every(Boolean)) {
      return this.take(keys, names, session, entry.revision, ttl, startedAt, share);
    }
    if (waitTimeout <= 0) {
      this.keys.discard(names, entry.revision, session);
      const waited = performance.now() - startedAt;
      throw new LockNotAcquiredError(keys, waited, await this.busyAcquire(keys, lines, ttl));
    }
    const wait = new EtcdWait(
      keys,
      session,
      startedAt,
      deadline,
      () => this.lastWord(lines[0]),
      () => this.busyAcquire(keys, lines, ttl),
    );
    const timer = new DeadlineTimer(deadline, wait);
    const onAbort = () => wait.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort);
    this.local.waitStarted(wait);
    try {
      await Promise.all(
        lines.map((line, i) =>
          entry.granted[i]
            ? undefined
            : this.waits.waitInLine(
                wait,
                line,
                names[i],
                entry.revision,
                share,
                entry.before[i],
                entry.seen,
              ),
        ),
      );
    } catch (error) {
      wait.abort(error);
      this.keys.discard(names, entry.revision, session);
      throw wait.reason;
    } finally {
      timer.cancel();
      signal?.removeEventListener('abort', onAbort);
      this.local.waitEnded(wait);
    }
    this.stats.grants++;
    return this.take(keys, names, session, entry.revision, ttl, startedAt, share);
  }

  async tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number> {
    this.stats.attempts++;
    const startedAt = performance.now();
    const session = await this.session(keys);
    const lines = keys.map((key) => linePrefix(this.config.keyPrefix, key));
    const names = lines.map((line) => session.name(line + OTHER_PART));
    let res: ITxnResponse;
    try {
      res = await this.client.kv.txn({
        // Every line empty (a compare over a range holds for a range with no keys).
        compare: [
          notCancelled(this.config.keyPrefix, names),
          ...lines.map((line) => ({
            key: Buffer.from(line),
            range_end: prefixEnd(Buffer.from(line)),
            target: 'Create' as const,
            result: 'Equal' as const,
            create_revision: 0,
          })),
        ],
        success: names.map((name) => put(name, kindValue(undefined), session.id)),
        failure: [
          // A retry of a transaction whose answer was lost finds its own keys: they are ours.
          { request_range: { key: Buffer.from(names[0]) } },
          // Busy: the holder of each line (its first key), for its lease left.
          ...lines.map((line) => ({ request_range: firstOf(line) })),
        ],
      });
    } catch (error) {
      this.keys.abandon(names, session);
      throw this.backendError(keys, 'acquire', error);
    }
    const mine = res.responses[0]?.response_range?.kvs[0];
    if (!res.succeeded && !mine) {
      const holders = res.responses.slice(1).map((r) => r.response_range?.kvs[0]?.lease);
      return this.busyAnswer(keys, ttl, () => this.leaseLeft.longest(holders));
    }
    const revision = mine ? mine.create_revision : res.header.revision;
    this.keys.add(names, session, revision);
    return this.take(keys, names, session, revision, ttl, startedAt);
  }

  async extend(lease: Lease, ttl: number): Promise<boolean> {
    const held = this.held.get(lease);
    if (!held || held.session.ended) {
      if (held) this.drop(held);
      this.leaseEnded(lease);
      return false;
    }
    const start = performance.now();
    let res: ITxnResponse;
    try {
      res = await this.client.kv.txn({ compare: ownedBy(held.names, held.revision) });
    } catch (error) {
      throw this.backendError(lease.keys, 'extend', error);
    }
    if (this.held.get(lease) !== held) return false;
    if (!res.succeeded) {
      this.drop(held);
      this.leaseEnded(lease);
      return false;
    }
    held.expiresAt = start + ttl;
    lease.renewed(start, ttl, this.leases.drift(ttl));
    lease.validUntil = Math.min(lease.validUntil, held.session.validUntil);
    this.arm(held);
    return true;
  }

  leaseEnded(lease: Lease): void {
    lease.end();
  }

  protected async releaseHeld(held: Held): Promise<void> {
    const { lease } = held;
    this.forget(held);
    // An exclusive holder was alone in its line (a reader or a permit may leave others
    // holding): the waiters of this process right behind it go now (once each read its own
    // key), before etcd answers the delete. They are next by create revision, and a waiter of
    // another process behind them still waits for their keys, so the order across processes
    // holds; this holder is done.
    const exclusive = lease.share === undefined;
    if (exclusive) this.keys.handOver(held.names);
    try {
      // Waiters of this process that found this key in the meantime go once it is deleted.
      await this.keys.remove(held.names, held.revision, exclusive, held.session);
    } catch (error) {
      this.keys.discard(held.names, held.revision, held.session);
      throw this.backendError(lease.keys, 'release', error);
    }
  }

  protected async releaseHeldByExpiry(held: Held, ms: number): Promise<void> {
    this.forget(held);
    const { names } = held;
    // This process deletes them on time; if it dies first, etcd does when their own lease (not
    // the session's, which a shutdown revokes) runs out: in whole seconds, never sooner.
    const timer = setTimeout(() => {
      this.minHolds.delete(timer);
      this.keys.discard(names, held.revision, undefined);
    }, ms);
    timer.unref();
    this.minHolds.add(timer);
    try {
      const granted = await this.client.leaseClient.leaseGrant({ TTL: Math.ceil(ms / 1000) });
      await this.client.kv.txn({
        compare: ownedBy(names, held.revision),
        success: names.map((name) => ({
          request_put: { key: Buffer.from(name), ignore_value: true, lease: granted.ID },
        })),
      });
    } catch (error) {
      throw this.backendError(held.lease.keys, 'release', error);
    }
  }

  async isLocked(key: string): Promise<boolean> {
    const line = Buffer.from(linePrefix(this.config.keyPrefix, key));
    try {
      const res = await this.client.kv.range({
        key: line,
        range_end: prefixEnd(line),
        count_only: true,
      });
      return Number(res.count) > 0;
    } catch (error) {
      throw this.backendError([key], 'check', error);
    }
  }

  override abortWaits(): void {
    super.abortWaits();
    this.closing.abort();
  }

  async health(timeout: number): Promise<BackendHealth> {
    const { hosts } = this.config;
    const nodes = await checkEndpoints(
      hosts.length > 0
        ? hosts.map((host) => [host, this.endpointClient(host)])
        : [['etcd', this.client]],
      timeout,
    );
    return { quorum: Math.floor(nodes.length / 2) + 1, nodes };
  }

  async close(): Promise<void> {
    this.abortWaits();
    for (const timer of this.minHolds) clearTimeout(timer);
    this.minHolds.clear();
    for (const held of [...this.held.values()]) this.forget(held);
    const session = await this.current?.catch(() => undefined);
    this.current = undefined;
    // Revoking the session deletes every key this process still has in etcd.
    await session?.revoke().catch(() => undefined);
    for (const client of this.endpointClients.values()) client.close();
    this.endpointClients.clear();
    if (this.config.ownsClient) this.client.close();
  }

  // ---------------------------------------------------------------- session

  /** The session's keys are gone or going: its waiters fail, its holders lose their locks. */
  sessionEnded(session: EtcdSession, cause: Error): void {
    this.keys.forgetSession(session);
    for (const wait of this.local.waits) {
      if (wait.session === session) {
        wait.abort(this.backendError(wait.keys, 'acquire', new Error(ETCD_SESSION_LOST(cause))));
      }
    }
    for (const held of [...this.held.values()]) {
      if (held.session !== session) continue;
      this.forget(held);
      held.lease.end();
      held.lease.watcher?.leaseEnded();
    }
    // Whatever is left of it in etcd goes now; the next call opens a new session.
    if (!this.closed) void session.revoke().catch(() => undefined);
  }

  sessionRenewed(session: EtcdSession): void {
    for (const held of this.held.values()) {
      if (held.session !== session) continue;
      const lease = held.lease;
      const own = held.expiresAt - this.leases.drift(lease.ttl);
      lease.validUntil = Math.min(own, session.validUntil);
    }
  }

  /** The session of this process, opened at the first call (or again after one was lost). */
  private async session(keys: readonly string[]): Promise<EtcdSession> {
    if (this.closed) throw abortReason(keys);
    const current = (this.current ??= EtcdSession.open(
      this.client,
      this.config.sessionTtlSeconds,
      this.leases.drift(this.config.sessionTtlSeconds * 1000),
      this,
    ));
    try {
      const session = await current;
      if (!session.ended) return session;
    } catch (error) {
      if (this.current === current) this.current = undefined;
      throw this.backendError(keys, 'acquire', error);
    }
    if (this.current === current) this.current = undefined;
    return this.session(keys);
  }

  // ---------------------------------------------------------------- holds

  private take(
    keys: readonly string[],
    names: readonly string[],
    session: EtcdSession,
    revision: string,
    ttl: number,
    startedAt: number,
    share?: Share,
  ): Lease {
    if (session.ended) {
      throw this.backendError(keys, 'acquire', new Error(ETCD_SESSION_LOST()));
    }
    const start = performance.now();
    const fence = Number(revision);
    const lease = heldLease({
      keys,
      token: names[0],
      fences: keys.map(() => fence),
      ttl,
      validUntil: Math.min(start + ttl - this.leases.drift(ttl), session.validUntil),
      waitedMs: start - startedAt,
      share,
    });
    // Its keys are deleted when its own lease runs out with no `extend` (a forgotten handle).
    this.keep({ lease, names, session, revision, expiresAt: start + ttl });
    return lease;
  }

  /** The busy answer of an acquire: as a try's, the holders of its lines read once more. */
  private busyAcquire(
    keys: readonly string[],
    lines: readonly string[],
    ttl: number,
  ): Promise<number> {
    return this.busyAnswer(keys, ttl, () => this.leaseLeft.ofLines(lines));
  }

  protected holdExpired(held: Held): void {
    this.drop(held);
  }

  /** Forgets the hold and deletes its keys in the background. */
  private drop(held: Held): void {
    this.forget(held);
    this.keys.discard(held.names, held.revision, held.session);
  }

  private endpointClient(host: string): Etcd3 {
    let client = this.endpointClients.get(host);
    if (!client) this.endpointClients.set(host, (client = this.config.endpointClient(host)));
    return client;
  }

  /** A waiter's pause between two entries: `ms`, or less if its signal or the client ends it. */
  private backOff(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.closing.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done);
      this.closing.signal.addEventListener('abort', done);
    });
  }

  /** One read of `line`, bounded by commandTimeout: whether etcd answers now (see `EtcdWait`). */
  private async lastWord(line: string): Promise<void> {
    const ms = this.config.commandTimeout;
    let timer: NodeJS.Timeout | undefined;
    try {
      const key = Buffer.from(line);
      await Promise.race([
        this.client.kv.range({ key, range_end: prefixEnd(key), count_only: true }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`DEADLINE_EXCEEDED: no answer within ${ms} ms`)),
            ms,
          );
        }),
      ]);
    } catch (error) {
      throw this.errors.describe(error);
    } finally {
      clearTimeout(timer);
    }
  }

  protected override describe(error: unknown): Error {
    return this.errors.describe(error);
  }
}
