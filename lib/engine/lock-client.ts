import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { LockNotAcquiredError } from '../errors';
import { type Grant, KeySpace, RELEASED_MESSAGE } from '../redis/key-space';
import { LockNotifier } from '../redis/lock-notifier';
import { GRANT_CLAIM_MS } from '../redis/script-constants';
import {
  LockProtocol,
  type ReleaseGrant,
  type ReplicaAcks,
  type Taken,
} from '../redis/lock-protocol';
import { isCluster, type RedisNode } from '../redis/redis-node';
import { ScriptRunner } from '../redis/script-runner';
import { WriteBatching } from '../redis/write-batching';
import { ServerClock } from '../redis/server-clock';
import { promiseFrom, settleTo } from '../settle-to';
import type { KeyLine as Line, LineListener } from './key-line';

type KeyLine = Line<Waiter>;
import { KeyLines } from './key-lines';
import { ALL_POLICIES, type EnginePolicies } from './engine-policies';
import { claimWindow, type Lease, type LeaseTaker, Leases } from './lease';
import { type MultiKeyWaitContext, type ReleaseWatch, waitForKeys } from './multi-key-wait';
import { type HandoffEngine, LocalHandoffs } from './local-handoffs';
import { SharedHolds, type SharedHoldsEngine } from './shared-holds';
import { shareArg } from './shared-wait';
import { Tokens } from './tokens';
import {
  type AcquireRequest,
  type LockBackend,
  type LockClientStats,
  noStats,
  type Share,
} from './lock-backend';
import { type GrantedKey, type LineWaitContext, Waiter } from './waiter';

export type { Lease } from './lease';
export type { RedisNode } from '../redis/redis-node';

/** @internal */
export interface LockClientSettings {
  keyPrefix: string;
  driftFactor: number;
  localHandoffs: number;
  commandTimeout: number;
  /** Fast paths switched on (absent: all of them). See `EnginePolicies`. */
  policies?: EnginePolicies;
  /** Why a node cannot be used, when known better than by a command's error (see ScriptRunner). */
  connectionError?: (node: RedisNode) => Error | undefined;
}

/**
 * The lock engine of one client group, as the rest of the library sees it: take, renew and give
 * back leases. It coordinates; the parts do the work:
 * - `KeyLine` (per key: local holds, the FIFO of waiting callers, first tries in flight),
 *   `Waiter` / `waitForKeys` (one caller's wait), `Leases` (lease arithmetic), `Tokens`;
 * - `LocalHandoffs` (a freed key to the next caller of this process), `SharedHolds` (read holds
 *   and permits, with their own waits, joins and passes), each given only what it needs of this
 *   class (`HandoffEngine`, `SharedHoldsEngine`);
 * - `LockProtocol` (rounds over the nodes, Redlock's quorum rules, undoing what a round cannot
 *   keep), `KeySpace` (every Redis name), `ScriptRunner`, `LockNotifier` (wake-ups).
 * Single-node groups queue waiters in Redis and grant on release (FIFO across processes);
 * quorum groups race, woken by a PUBLISH. A release hands the key to the next caller of this
 * process when one waits (at most `localHandoffs` times in a row), in memory when it can.
 * @internal
 */
export class LockClient implements LockBackend {
  readonly stats: LockClientStats = noStats();
  readonly notifier: LockNotifier;
  private readonly space: KeySpace;
  private readonly runner: ScriptRunner;
  private readonly protocol: LockProtocol;
  private readonly leases: Leases;
  private readonly tokens = new Tokens();
  private readonly lines = new KeyLines<Waiter>();
  /** Single node: waiters queue in Redis and releases grant. */
  private readonly fair: boolean;
  private closed = false;
  /** Aborted on close: every wait of several keys or shared ends with a LockBackendError. */
  private readonly closing = new AbortController();
  private readonly lineWait: LineWaitContext;
  private readonly keysWait: MultiKeyWaitContext;
  /** Read holds and permits: their waits, grants, joins and passes. */
  private readonly shared: SharedHolds;
  /** Passing a freed key to the next caller of this process (exclusive holds). */
  private readonly handoffs: LocalHandoffs;
  /** One plain node: its clock, bounded against ours, lets a fresh grant hold at once. */
  private readonly serverClock?: ServerClock;
  /** The fast paths this engine takes (all but in the differential test and the bench). */
  private readonly policies: EnginePolicies;

  constructor(
    readonly name: string,
    readonly nodes: readonly RedisNode[],
    private readonly settings: LockClientSettings,
    onSubscriberError: (error: Error) => void,
  ) {
    this.fair = nodes.length === 1;
    this.policies = settings.policies ?? ALL_POLICIES;
    if (this.fair && !isCluster(nodes[0])) this.serverClock = new ServerClock(nodes[0]);
    this.space = new KeySpace(settings.keyPrefix, nodes.some(isCluster));
    this.runner = new ScriptRunner(
      settings.commandTimeout,
      settings.connectionError,
      this.policies.writeBatching ? new WriteBatching() : undefined,
    );
    this.leases = new Leases(settings.driftFactor);
    this.protocol = new LockProtocol(
      nodes,
      this.space,
      this.runner,
      {
        fair: this.fair,
        // Fences reserved per single-key lease: the holder's and one per possible local handoff.
        block: this.fair ? settings.localHandoffs + 1 : 1,
        drift: (ttl) => this.leases.drift(ttl),
      },
      this.stats,
    );
    this.notifier = new LockNotifier(
      nodes,
      onSubscriberError,
      KeySpace.grantChannel(this.tokens.prefix),
      (message) => this.onGrantMessage(message),
    );
    // Every wait in progress listens for the close: thousands at once are normal, not a leak.
    setMaxListeners(0, this.closing.signal);
    this.lineWait = this.lineWaitContext();
    this.keysWait = this.keysWaitContext();
    this.shared = new SharedHolds(this.sharedHoldsEngine());
    this.handoffs = new LocalHandoffs(this.handoffEngine());
  }

  /** The prefix of every token of this group in this process (what its grant channel is named by). */
  get tokenPrefix(): string {
    return this.tokens.prefix;
  }

  /** Nodes whose majority decides. */
  get quorum(): number {
    return this.protocol.quorum.size;
  }

  /** Key lines alive (for tests: none once every caller left). */
  get queueCount(): number {
    let shared = 0;
    for (const key of this.shared.keys()) if (!this.lines.get(key)) shared++;
    return this.lines.size + shared;
  }

  /** Callers of this process waiting for `key` (holders not counted). */
  queued(key: string): number {
    return this.lines.get(key)?.length ?? 0;
  }

  /** Whether a caller of this process holds `key` (single-key holds, lease still valid). */
  holds(key: string): boolean {
    return this.lines.get(key)?.heldHere() ?? false;
  }

  /** Whether `tryAcquireAny` can sweep many keys in one round trip (one node, no Cluster). */
  get canTakeAny(): boolean {
    return this.nodes.length === 1 && !isCluster(this.nodes[0]);
  }

  /**
   * Takes every key (sorted, deduplicated by the caller), waiting up to `waitTimeout` ms.
   * `signal` ends the wait early, rejecting with its reason. `seenBusy`: the caller has just
   * found the key busy (a segmented sweep), so it goes straight into line, without a first try
   * (its first attempt in line takes the key or queues for it, in one round trip).
   * @throws LockNotAcquiredError when still busy at the deadline
   * @throws LockBackendError when too many nodes fail for a quorum, or the client closes
   */
  acquire(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    if (request.share !== undefined) return this.shared.acquire(keys, request, request.share);
    try {
      return this.acquireExclusive(keys, request);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * `acquire` of the exclusive lock. Not async (a synchronous throw is turned into a rejection
   * by `acquire`): the uncontended first try of one key costs one promise, answered by callback.
   */
  private acquireExclusive(keys: readonly string[], request: AcquireRequest): Promise<Lease> {
    const { ttl, waitTimeout, signal, acks } = request;
    const taker = this.taker(ttl, acks);
    const { startedAt } = taker;
    const deadline = startedAt + waitTimeout;
    if (signal?.aborted) throw signal.reason;
    if (keys.length !== 1) return this.acquireAll(keys, taker, waitTimeout, deadline, signal);
    const waits = waitTimeout > 0;
    const existing = this.lines.get(keys[0]);
    if (existing?.occupied()) {
      // Someone of ours holds, waits for or is trying this key: queue behind them instead of
      // competing (a burst of callers sends one try, not one each).
      if (waits)
        return new Waiter(this.lineWait, existing, keys, taker, deadline, signal, false).lease;
      if (existing.heldHere()) {
        // Held here and no wait wanted: busy for sure, no round trip needed.
        throw new LockNotAcquiredError(keys, 0, existing.holdsEnd() - performance.now());
      }
    }
    const line = existing ?? this.lines.of(keys[0]);
    if (request.seenBusy && waits) {
      return new Waiter(this.lineWait, line, keys, taker, deadline, signal, true).lease;
    }
    line.startTry();
    return new Promise((resolve, reject) => {
      // The first try neither queues nor flags: only a waiting caller asks to be woken.
      this.protocol.firstTryThen(keys, taker.token, ttl, startedAt, acks, (error, first) => {
        if (error !== undefined) {
          this.endTry(line);
          return reject(error);
        }
        if (first!.kind === 'ok') {
          // Counted as held before the try ends, so the callers queued behind wait for a handoff.
          let lease: Lease;
          try {
            lease = this.hold(keys, taker, first!);
          } catch (err) {
            this.endTry(line);
            return reject(err);
          }
          this.endTry(line);
          return resolve(lease);
        }
        if (!waits || performance.now() >= deadline) {
          this.endTry(line);
          return reject(new LockNotAcquiredError(keys, performance.now() - startedAt, first!.pttl));
        }
        // First in line: ahead of the callers that queued behind this try.
        line.endTry();
        resolve(new Waiter(this.lineWait, line, keys, taker, deadline, signal, true).lease);
      });
    });
  }

  /** Several keys: one try at all of them, then a race for each (`waitForKeys`). */
  private async acquireAll(
    keys: readonly string[],
    taker: LeaseTaker,
    waitTimeout: number,
    deadline: number,
    signal: AbortSignal | undefined,
  ): Promise<Lease> {
    const { token, ttl, startedAt, acks } = taker;
    const first = await this.protocol.attempt(keys, token, ttl, 0, startedAt, acks);
    if (first.kind === 'ok') return this.hold(keys, taker, first);
    if (waitTimeout <= 0) throw new LockNotAcquiredError(keys, 0, first.pttl);
    return waitForKeys(this.keysWait, keys, taker, deadline, signal);
  }

  /**
   * One try, no waiting, no error object on contention (cheap enough for sweeps over many
   * keys): the lease, or the busy holder's remaining lease in ms.
   * @throws LockBackendError when too many nodes fail for a quorum
   */
  async tryAcquire(
    keys: readonly string[],
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<Lease | number> {
    // Held, tried or awaited here: busy for sure, no round trip needed.
    if (keys.length === 1 && this.lines.get(keys[0])?.occupied()) return ttl;
    const taker = this.taker(ttl, acks);
    const outcome = await this.protocol.attempt(keys, taker.token, ttl, 0, taker.startedAt, acks);
    return outcome.kind === 'ok' ? this.hold(keys, taker, outcome) : outcome.pttl;
  }

  /**
   * One try at each key, in order, in a single round trip (see `canTakeAny`): the first free
   * one is taken. Keys held or awaited in this process are skipped without asking Redis.
   * @returns the lease and the index of its key in `keys`, or the shortest lease left
   */
  async tryAcquireAny(
    keys: readonly string[],
    ttl: number,
    acks?: ReplicaAcks,
  ): Promise<{ lease: Lease; index: number } | number> {
    const candidates: number[] = [];
    keys.forEach((key, i) => {
      if (!this.lines.get(key)?.occupied()) candidates.push(i);
    });
    if (candidates.length === 0) return ttl;
    const taker = this.taker(ttl, acks);
    const r = await this.protocol.takeAny(
      candidates.map((i) => keys[i]),
      taker.token,
      ttl,
      acks,
    );
    if (typeof r === 'number') return r;
    const index = candidates[r.index];
    return { lease: this.hold([keys[index]], taker, r.taken), index };
  }

  /**
   * Renews the lease to `ttl` ms from now. A lease found lost ends here: it holds nothing up in
   * this process any more.
   * @returns false when the lock is no longer held by this lease
   * @throws LockBackendError when too many nodes fail to tell
   */
  async extend(lease: Lease, ttl: number, batched = false): Promise<boolean> {
    const start = performance.now();
    const ok = await this.protocol.extend(
      lease.keys,
      lease.token,
      ttl,
      lease.acks,
      shareArg(lease.share),
      true,
      batched && this.policies.renewalBatching,
    );
    if (ok) {
      lease.renewed(start, ttl, this.leases.drift(ttl));
      lease.group?.renewed(lease.validUntil);
    } else this.leaseEnded(lease);
    return ok;
  }

  /**
   * The lease is known to be over (lost, or run out with no renewal): callers of this process
   * waiting for its key stop waiting for its release.
   */
  leaseEnded(lease: Lease): void {
    lease.end();
    lease.group?.close();
    if (lease.keys.length === 1) this.lines.get(lease.keys[0])?.holdEnded();
    // Found by a claim or a refill rather than a renewal: the holder's watchdog reports it now.
    lease.watcher?.leaseEnded();
  }

  /**
   * Releases the lease, or hands it straight to the next waiter of this process for the same
   * key (at most `localHandoffs` times in a row, then it goes back to every process).
   * @throws LockBackendError when no majority of nodes could be told (the lease then expires by
   *   itself)
   */
  release(lease: Lease): Promise<void> {
    return promiseFrom((done) => this.releaseThen(lease, done));
  }

  /**
   * `release` answered by callback (`error` undefined: done): a lease nobody of this process
   * waits for is given back with no promise made.
   */
  releaseThen(lease: Lease, done: (error?: unknown) => void): void {
    if (lease.released) return done();
    lease.released = true;
    if (lease.share === undefined) {
      const line = lease.keys.length === 1 ? this.lines.get(lease.keys[0]) : undefined;
      if (!line?.head || this.closed || !this.policies.localHandoff) {
        return this.giveBackThen(lease, done);
      }
      return settleTo(this.handoffs.passOn(lease, line, line.head), done);
    }
    settleTo(this.shared.release(lease), done);
  }

  /**
   * Releases by expiry (`minHold`): the keys stay locked `ms` more in Redis, then expire. The
   * key is not handed to a waiter of this process: this process forgets the hold, so its
   * waiters try over the network and wait for the expiry like those of any other process.
   * @throws LockBackendError when no majority of nodes could be told (the lease then expires by
   *   itself)
   */
  releaseByExpiry(lease: Lease, ms: number): Promise<void> {
    if (lease.released) return Promise.resolve();
    lease.released = true;
    if (lease.share !== undefined) return this.shared.releaseByExpiry(lease, ms);
    this.tokens.drop(lease.token);
    return this.protocol
      .letExpire(lease.keys, lease.token, ms)
      .finally(() => this.holdReturned(lease, () => true));
  }

  /** Whether a majority of nodes has the key locked right now. */
  isLocked(key: string): Promise<boolean> {
    return this.protocol.isLocked(key);
  }

  /** Ends every wait in progress (they reject with LockBackendError) and stops listening. */
  abortWaits(): void {
    this.closed = true;
    this.closing.abort();
    // Waiters in key lines have no listener on `closing` (thousands wait at once): told here.
    for (const waiter of this.lines.waiters()) waiter.abort();
  }

  async close(): Promise<void> {
    this.abortWaits();
    this.runner.close();
    await this.notifier.close();
  }

  /**
   * A release sent at `sentAt` granted locks or shares (its answer says which): those of waiters
   * of this process hold from now on, not from the grant message (the claim window began after
   * `sentAt`); the claim follows beside the holder.
   */
  private answered(keys: readonly string[], grants: readonly ReleaseGrant[], sentAt: number): void {
    for (const grant of grants) {
      const shared = this.shared.grantee(grant.token);
      // A share granted up to a writer queued behind it; of a release of several keys, which key
      // is not said: each of them is taken to have a writer waiting.
      if (grant.writerBehind) for (const key of keys) this.shared.writerWaits(key);
      // Off: the grantee waits for the grant message, as one of another process does.
      if (!this.policies.holdFromReleaseAnswer) continue;
      if (shared) shared.answered(grant.fence, sentAt);
      else if (keys.length === 1)
        this.lines.get(keys[0])?.waiterOf(grant.token)?.answered(grant, sentAt);
    }
  }

  // ---------------------------------------------------------------- holding and giving back

  /**
   * The lease a round took; a single key's line counts it as held. One set for a claim window
   * only is renewed to the taker's full lease (`claimRest`).
   */
  private hold(keys: readonly string[], taker: LeaseTaker, taken: Taken): Lease {
    const lease = this.leases.taken(keys, taker, taken);
    if (keys.length === 1) {
      const line = this.lines.of(keys[0]);
      line.hold(lease);
      // Taken after waiting (a grant, an attempt that queued): others may be queued behind,
      // and the callers of this process waiting now each get a turn before they go first.
      if (this.fair && !lease.uncontended) {
        line.othersWait();
        line.turnBegins(taker.token, this.handoffs.turnPasses);
      }
    }
    // Only a token that queued in Redis can be granted a key: a first try's needs no entry.
    if (!lease.uncontended) this.tokens.hold(taker.token);
    this.claimRest(lease, taker.ttl, taken);
    return lease;
  }

  /**
   * A lease set for a claim window only (shorter than `ttl`) is renewed to the full `ttl`: at
   * once when held from a grant message (`claimNow`: the claim must be on its way before the
   * holder runs), else later if it still holds then (`renewLater`).
   */
  private claimRest(lease: Lease, ttl: number, taken: Taken): void {
    if (lease.ttl >= ttl) return;
    if (taken.claimNow) void this.extend(lease, ttl).catch(() => undefined);
    else this.renewLater(lease, ttl);
  }

  /**
   * A lease set for a grant's claim window only (granted by a release of this process, held from
   * its answer): renewed to the full `ttl` a third of the way through the window if it is still
   * held then, beside the holder. Most such holds end sooner and need no renewal at all; lost or
   * failing, the lease ends with the window and its watchdog says so.
   */
  private renewLater(lease: Lease, ttl: number): void {
    const timer = setTimeout(() => {
      // Released, over, or renewed meanwhile (by its watchdog).
      if (lease.released || !lease.validAt(performance.now()) || lease.ttl >= ttl) return;
      void this.extend(lease, ttl).catch(() => undefined);
    }, lease.ttl / 3);
    timer.unref();
  }

  private endTry(line: KeyLine): void {
    line.endTry();
    this.lines.dropIfIdle(line);
  }

  /** Gives the key back in Redis (compare-and-delete), then wakes our head if it must try. */
  private giveBack(lease: Lease): Promise<void> {
    return promiseFrom((done) => this.giveBackThen(lease, done));
  }

  /**
   * `giveBack` answered by callback. The key goes public: its line's run of local handoffs ends
   * here, whichever path gave it back (nobody of this process waiting, the bound reached, a
   * waiter that left during a handoff).
   */
  private giveBackThen(lease: Lease, done: (error?: unknown) => void): void {
    this.tokens.drop(lease.token);
    const single = lease.keys.length === 1;
    if (single) this.lines.get(lease.keys[0])?.wentPublic();
    const sentAt = performance.now();
    const granted = (grants: readonly ReleaseGrant[]) => this.answered(lease.keys, grants, sentAt);
    this.protocol.releaseThen(lease.keys, lease.token, granted, (error, published) => {
      // A head that listens hears the PUBLISH at the same moment as the other processes' heads
      // and competes on equal terms; one that does not is told directly.
      this.holdReturned(lease, (line) => error !== undefined || !published || !line.hearsReleases);
      done(error);
    });
  }

  /**
   * The hold of `lease` is over in this process: its line stops counting it and may go.
   * `wakeHead`: whether the line's head must be told to try now.
   */
  private holdReturned(lease: Lease, wakeHead: (line: KeyLine) => boolean): void {
    const line = lease.keys.length === 1 ? this.lines.get(lease.keys[0]) : undefined;
    if (!line) return;
    line.endHold(lease, wakeHead(line));
    this.lines.dropIfIdle(line);
  }

  /** A new acquisition's token, lease length and start. */
  private taker(ttl: number, acks: ReplicaAcks | undefined): LeaseTaker {
    return { token: this.tokens.next(), ttl, startedAt: performance.now(), acks };
  }

  /** A grant message on this group's channel. */
  private onGrantMessage(message: string): void {
    const grant = this.space.parseGrant(message);
    if (!grant) {
      const key = this.space.parseWriterNotice(message);
      if (key === undefined) return;
      // A waiter of another process queued for a key a share or a token of ours holds.
      this.lines.get(key)?.othersWait();
      this.shared.writerWaits(key);
      return;
    }
    this.stats.grants++;
    this.granted(grant);
  }

  /**
   * A release granted a key to a token of ours: its waiter confirms the grant (claims it) before
   * it holds the key; with no waiter left, the key is given back.
   */
  private granted(grant: Grant): void {
    const { key, token } = grant;
    if (this.tokens.holds(token)) return; // already taken by a retry that found it ours
    const share = this.shared.grantee(token);
    if (share) return share.message(grant);
    const waiter = this.lines.get(key)?.waiterOf(token);
    // Its waiter left (timed out) after the grant: pass the key on.
    if (!waiter?.granted(grant)) this.protocol.abandon([key], token);
  }

  /**
   * Confirms a grant: renews the key from its claim window to the taker's lease, timed from
   * the moment the claim is sent (as any round).
   */
  private async claim(
    keys: readonly string[],
    taker: LeaseTaker,
    grant: GrantedKey,
    share?: Share,
  ): Promise<Taken | undefined> {
    const start = performance.now();
    const { token, ttl, acks } = taker;
    const ours = await this.protocol.extend(keys, token, ttl, acks, shareArg(share));
    if (!ours) return undefined;
    return { kind: 'ok', fences: [grant.fence], start, spare: grant.spare, uncontended: false };
  }

  /**
   * A grant held at once, without waiting for its claim: only when the message carries the
   * server's clock at the grant (`serverMs`, read before the key was set for the claim window)
   * and this process has a bound on that clock (`ServerClock`). The window then surely runs
   * until a local moment computed here; the lease ends there (less the drift allowance), and
   * only a grant with at least half of its window ahead is held this way: one read late (a
   * stalled event loop, a starved CPU) is claimed first, as any grant without the time. The
   * claim is sent here, before the holder's method starts (not deferred past it: a method that
   * blocks the event loop for longer than the window would then hold a key Redis let go). A
   * lost claim ends the lease when it answers (its watchdog is told through `Lease.watcher`); a
   * failing one lets the lease end with the window.
   */
  private holdAtOnce(
    keys: readonly string[],
    taker: LeaseTaker,
    grant: GrantedKey,
  ): Lease | undefined {
    const atOnce = this.atOnce(taker, grant);
    return atOnce && this.hold(keys, taker, atOnce);
  }

  /**
   * A grant message held at once (exclusive or shared): its claim window, timed from where it
   * surely began on this process's clock, its claim to go out before the holder runs. Undefined
   * when it must be claimed first: no server time in the message, no bound on the server's clock
   * yet, replicas to acknowledge (a failover may lose the grant), or less than half of the
   * window surely ahead.
   */
  private atOnce(taker: LeaseTaker, grant: GrantedKey): Taken | undefined {
    if (!this.policies.holdAtOnce) return undefined;
    if (grant.serverMs === undefined || !this.serverClock || taker.acks) return undefined;
    const claim = Math.min(taker.ttl, GRANT_CLAIM_MS);
    const end = this.serverClock.localBefore(grant.serverMs + claim);
    if (end === undefined) return undefined;
    const start = end - claim;
    if (this.leases.validUntil(start, claim) - performance.now() < claim / 2) return undefined;
    return { ...claimWindow(grant, start, taker.ttl), claimNow: true };
  }

  // ---------------------------------------------------------------- waiting

  private lineWaitContext(): LineWaitContext {
    return {
      ...this.waitContext(),
      fair: this.fair,
      // Single node: grants come on this group's own channel, nothing to subscribe per key.
      // Quorum: heads race, woken by the key's release channel.
      listen: (line) => {
        // A grant may come: the clock bound that lets it hold at once is kept fresh.
        this.serverClock?.refresh();
        return this.fair
          ? this.subscribed()
          : line.hearsReleases
            ? RESOLVED
            : this.soon(line.listen(() => this.onReleases(line.key, () => line.head?.wake())));
      },
      holds: (token) => this.tokens.holds(token),
      claim: (keys, taker, grant) => this.claim(keys, taker, grant),
      holdAtOnce: (keys, taker, grant) => this.holdAtOnce(keys, taker, grant),
      dropIfIdle: (line) => this.lines.dropIfIdle(line),
    };
  }

  private keysWaitContext(): MultiKeyWaitContext {
    return { ...this.waitContext(), watch: (keys, onRelease) => this.watch(keys, onRelease) };
  }

  /** What every wait needs, single key or several. */
  private waitContext(): Pick<
    LineWaitContext,
    'closing' | 'attempt' | 'hold' | 'abandon' | 'timerWakeup'
  > {
    return {
      closing: this.closing.signal,
      attempt: (keys, taker, waitMs) =>
        this.protocol.attempt(keys, taker.token, taker.ttl, waitMs, undefined, taker.acks),
      hold: (keys, taker, taken) => this.hold(keys, taker, taken),
      abandon: (keys, token) => this.protocol.abandon(keys, token),
      timerWakeup: () => this.stats.timerWakeups++,
    };
  }

  /** The parts of this engine both the local handoffs and the shared holds take. */
  private engineParts() {
    return {
      protocol: this.protocol,
      leases: this.leases,
      tokens: this.tokens,
      notifier: this.notifier,
      stats: this.stats,
      fair: this.fair,
      localHandoffs: this.settings.localHandoffs,
    };
  }

  /** What the local handoffs take of this engine (see `HandoffEngine`). */
  private handoffEngine(): HandoffEngine {
    return {
      ...this.engineParts(),
      closed: () => this.closed,
      subscribed: () => this.subscribed(),
      leaseEnded: (lease) => this.leaseEnded(lease),
      holdReturned: (lease, wakeHead) => this.holdReturned(lease, wakeHead),
      giveBack: (lease) => this.giveBack(lease),
    };
  }

  /** What the shared holds take of this engine (see `SharedHoldsEngine`). */
  private sharedHoldsEngine(): SharedHoldsEngine {
    return {
      ...this.engineParts(),
      policies: this.policies,
      keysWait: this.keysWait,
      closed: () => this.closed,
      taker: (ttl, acks) => this.taker(ttl, acks),
      busyHere: (key) => this.lines.get(key)?.occupied() ?? false,
      listenForGrants: () => {
        // A grant may come: the clock bound that lets it hold at once is kept fresh.
        this.serverClock?.refresh();
        return { ready: this.subscribed(), stop: () => undefined };
      },
      atOnce: (taker, grant) => this.atOnce(taker, grant),
      claim: (keys, taker, grant, share) => this.claim(keys, taker, grant, share),
      claimRest: (lease, ttl, taken) => this.claimRest(lease, ttl, taken),
      release: (lease) => this.release(lease),
      answered: (keys, grants, sentAt) => this.answered(keys, grants, sentAt),
    };
  }

  /** Listens for releases of any of `keys` (one shared subscriber connection). */
  private watch(keys: readonly string[], onRelease: () => void): ReleaseWatch {
    const subs = keys.map((k) => this.onReleases(k, onRelease));
    return {
      ready: this.soon(Promise.all(subs.map((s) => s.ready)).then(() => undefined)),
      stop: () => {
        for (const s of subs) s.stop();
      },
    };
  }

  /** Calls `onRelease` at each release of `key` (racing waiters; counted as a push wake-up). */
  private onReleases(key: string, onRelease: () => void): LineListener {
    return this.notifier.listen(this.space.releaseChannel(key), (message) => {
      if (message !== RELEASED_MESSAGE) return;
      this.stats.notifiedWakeups++;
      onRelease();
    });
  }

  /** Waits (see `soon`) for the group's grant channel, unless it is subscribed already. */
  private subscribed(): Promise<void> {
    return this.notifier.listening ? RESOLVED : this.soon(this.notifier.ready());
  }

  /**
   * Waits for a subscription, never long (`commandTimeout` at most) and never failing: without
   * it a waiter still retries on its timer.
   */
  private async soon(ready: Promise<void>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      ready.catch(() => undefined),
      new Promise((resolve) => (timer = setTimeout(resolve, this.settings.commandTimeout))),
    ]);
    clearTimeout(timer);
  }
}

const RESOLVED: Promise<void> = Promise.resolve();
