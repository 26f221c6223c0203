import { createHash, randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { Cluster, Redis } from 'ioredis';
import { LockBackendError, LockNotAcquiredError } from './errors';
import { Chain } from './chain';
import { LockNotifier } from './lock-notifier';
import {
  ACQUIRE_SCRIPT,
  EXTEND_SCRIPT,
  FREE_SCRIPT,
  HANDOFF_SCRIPT,
  RAISE_FENCE_SCRIPT,
  RELEASE_SCRIPT,
  RELEASE_TO_SCRIPT,
  TAKE_ANY_SCRIPT,
  TRY_SCRIPT,
} from './lock.scripts';

/** @internal */
export type RedisNode = Redis | Cluster;

/** @internal */
export interface LockClientSettings {
  keyPrefix: string;
  driftFactor: number;
  localHandoffs: number;
  commandTimeout: number;
}

/** A held lock as the engine knows it. @internal */
export interface Lease {
  /** Rendered keys, sorted and deduplicated. */
  readonly keys: readonly string[];
  token: string;
  fences: number[];
  /**
   * Fences reserved after `fences[0]` (single key, single node): each lets the key pass to the
   * next caller of this process with no round trip.
   */
  spare: number;
  ttl: number;
  /**
   * Taken by a caller's first try, the key free: most likely nobody waits for it, so its
   * release tries the two-key FREE script before the full one.
   */
  firstTry: boolean;
  /** `performance.now()` until which the lease is certainly ours. */
  validUntil: number;
  readonly acquiredAt: number;
  readonly waitedMs: number;
  released: boolean;
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

interface Script {
  lua: string;
  sha: string;
}
const script = (lua: string): Script => ({
  lua,
  sha: createHash('sha1').update(lua).digest('hex'),
});
const ACQUIRE = script(ACQUIRE_SCRIPT);
const EXTEND = script(EXTEND_SCRIPT);
const RELEASE = script(RELEASE_SCRIPT);
const RELEASE_TO = script(RELEASE_TO_SCRIPT);
const HANDOFF = script(HANDOFF_SCRIPT);
const RAISE_FENCE = script(RAISE_FENCE_SCRIPT);
const TAKE_ANY = script(TAKE_ANY_SCRIPT);
const TRY = script(TRY_SCRIPT);
const FREE = script(FREE_SCRIPT);

/** An acquire round's outcome: taken (`firstTry`: by TRY_SCRIPT, a first try), or busy. */
type Taken = { kind: 'ok'; fences: number[]; start: number; spare?: number; firstTry: boolean };
type Outcome = Taken | { kind: 'busy'; pttl: number };

type Vote =
  | { kind: 'ok'; fences: number[] }
  | { kind: 'busy'; pttl: number }
  | { kind: 'error'; error: Error };

/** A caller of this process waiting for a single key, in FIFO order. */
interface Waiter {
  token: string;
  ttl: number;
  startedAt: number;
  /** Called with a lease handed over by a local holder; false if the waiter already left. */
  handOver(lease: Lease): boolean;
  /** Nudges the waiter to try over the network now (remembered if it is busy). */
  wake(): void;
  /** It may sit in the key's Redis queue (so it must leave it when it gives up). */
  enqueued: boolean;
  /** Queued in Redis by this process's last holder, so a grant is on its way. */
  queuedByHolder: boolean;
  /** Remaining wait in ms (for queueing it in Redis on its behalf). */
  remaining(): number;
}

interface KeyQueue {
  waiters: Waiter[];
  /** Holds of this key by this process (0 or 1 in practice). */
  held: number;
  /** The newest of those holds: once its lease ran out unreleased, `held` proves nothing. */
  holder?: Lease;
  /** First tries of this key in flight (callers arriving meanwhile queue behind them). */
  trying: number;
  /** Consecutive local handoffs since the lock last went public. */
  handoffs: number;
  /** The subscription to the key's release channel, while anyone waits. */
  listener?: { ready: Promise<void>; stop: () => void };
  /** Whether that subscription is active (its head hears every PUBLISH). */
  listening: boolean;
}

/** The script keys of one lock key, built once (the same come back at every cycle). */
interface KeySet {
  /** Lock, fence, wait flag, queue, queue meta: what the full scripts take. */
  all: string[];
  /** Lock and fence: TRY_SCRIPT's. */
  take: string[];
  /** Lock and wait flag: FREE_SCRIPT's. */
  free: string[];
}

const MAX_POLL_MS = 1_000;
/** Script key sets remembered per lock key (the cache is emptied when full: bounded memory). */
const KEY_SET_CACHE = 512;

interface InFlight {
  /** The sweeper's tick when it was sent (a coarse clock: no clock read per command). */
  sent: number;
  reject: (error: Error) => void;
  /** Neighbours in the in-flight list (oldest first). */
  prev?: InFlight;
  next?: InFlight;
}

const asError = (e: unknown): Error => (e instanceof Error ? e : new Error(String(e)));

/** An ACQUIRE reply: `{1, fence...}` taken, `{0, pttl}` busy. */
function toVote(reply: unknown): Exclude<Vote, { kind: 'error' }> {
  const r = reply as number[];
  if (r[0] !== 1) return { kind: 'busy', pttl: Number(r[1]) };
  const fences: number[] = [];
  for (let i = 1; i < r.length; i++) fences.push(Number(r[i]));
  return { kind: 'ok', fences };
}

/**
 * The lock protocol for one client group: Redlock's quorum rules (majority of N independent
 * nodes, validity = ttl - elapsed - drift) over single-round-trip Lua scripts that also mint the
 * fencing token, plus the waiting engine: a FIFO of local waiters per key where only the head
 * competes over the network, wake-ups pushed by the release, and bounded local handoffs.
 * @internal
 */
export class LockClient {
  readonly quorum: number;
  readonly stats: LockClientStats = {
    notifiedWakeups: 0,
    timerWakeups: 0,
    localHandoffs: 0,
    attempts: 0,
    grants: 0,
  };
  readonly notifier: LockNotifier;
  private readonly clustered: boolean;
  /** Single-node groups queue waiters in Redis and grant on release (FIFO across processes). */
  private readonly fair: boolean;
  /** Fences reserved per single-key lease: the holder's and one per possible local handoff. */
  private readonly block: number;
  private readonly queues = new Map<string, KeyQueue>();
  private readonly keySets = new Map<string, KeySet>();
  /**
   * Tokens are unique per acquisition: a random prefix per client (so two groups or two apps in
   * one process never mistake each other's grants) plus a counter (cheap, never reused).
   */
  private readonly tokenPrefix = `${randomBytes(9).toString('base64url')}.`;
  private tokenSeq = 0;
  /** Tokens holding a lock right now (a late grant message for one of them is ignored). */
  private readonly tokens = new Set<string>();
  private closed = false;
  /** Round trips under way, oldest first, for the `commandTimeout` sweeper. */
  private readonly inFlight = new Chain<InFlight>();
  private sweeper?: NodeJS.Timeout;
  /** The sweeper's clock: intervals since it started. */
  private ticks = 0;
  /** Aborted on close: every wait in progress ends with a LockBackendError. */
  private readonly closing = new AbortController();

  constructor(
    readonly name: string,
    readonly nodes: readonly RedisNode[],
    private readonly settings: LockClientSettings,
    onSubscriberError: (error: Error) => void,
  ) {
    this.quorum = Math.floor(nodes.length / 2) + 1;
    this.clustered = nodes.some((n) => (n as Cluster).isCluster === true);
    this.fair = nodes.length === 1;
    this.block = this.fair ? settings.localHandoffs + 1 : 1;
    this.notifier = new LockNotifier(
      nodes[0],
      onSubscriberError,
      `nest-locked:g:${this.tokenPrefix.slice(0, -1)}`,
      (message) => this.onGrant(message),
    );
    // Every wait in progress listens for the close: thousands at once are normal, not a leak.
    setMaxListeners(0, this.closing.signal);
  }

  private newToken(): string {
    return this.tokenPrefix + (this.tokenSeq++).toString(36);
  }

  /** Local queues still alive (for tests: empty once every waiter left). */
  get queueCount(): number {
    return this.queues.size;
  }

  /** Callers of this process waiting for `key` (holders not counted). */
  queued(key: string): number {
    return this.queues.get(key)?.waiters.length ?? 0;
  }

  /** Whether a caller of this process holds `key` (single-key holds). */
  holds(key: string): boolean {
    const queue = this.queues.get(key);
    return queue !== undefined && this.heldHere(queue);
  }

  /** The Redis key of a lock (`<prefix>{<key>}`). */
  redisKey(key: string): string {
    return `${this.settings.keyPrefix}{${key}}`;
  }

  /**
   * Takes every key (sorted, deduplicated by the caller), waiting up to `waitTimeout` ms.
   * `signal` ends the wait early, rejecting with its reason. `seenBusy`: the caller has just
   * found the key busy (a segmented sweep), so it goes straight into line, without a first try
   * (its first attempt in line takes the key or queues for it, in one round trip).
   * @throws LockNotAcquiredError when still busy at the deadline
   * @throws LockBackendError when too many nodes fail for a quorum, or the client closes
   */
  async acquire(
    keys: readonly string[],
    ttl: number,
    waitTimeout: number,
    signal?: AbortSignal,
    seenBusy = false,
  ): Promise<Lease> {
    const startedAt = performance.now();
    const deadline = startedAt + waitTimeout;
    const token = this.newToken();
    if (keys.length === 1) {
      const queue = this.queues.get(keys[0]);
      if (queue && (queue.held > 0 || queue.waiters.length > 0 || queue.trying > 0)) {
        // Someone of ours holds, waits for or is trying this key: queue behind them instead of
        // competing (a burst of callers sends one try, not one each).
        if (waitTimeout > 0) {
          return this.waitInQueue(keys, queue, token, ttl, startedAt, deadline, signal);
        }
        // Held here and no wait wanted: busy for sure, no round trip needed.
        if (this.heldHere(queue)) throw new LockNotAcquiredError(keys, 0, ttl);
      }
    }
    const queue = keys.length === 1 ? this.queueFor(keys[0]) : undefined;
    if (queue && seenBusy && waitTimeout > 0) {
      return this.waitInQueue(keys, queue, token, ttl, startedAt, deadline, signal, true);
    }
    if (queue) queue.trying++;
    // The first try neither queues nor flags: only a listening waiter asks to be woken.
    let first: Awaited<ReturnType<LockClient['attempt']>>;
    try {
      first = await this.attempt(keys, token, ttl, 0, startedAt);
    } catch (err) {
      if (queue) this.tried(keys[0], queue);
      throw err;
    }
    if (first.kind === 'ok') {
      // Counted as held before the try ends, so the callers queued behind wait for a handoff.
      const lease = this.hold(keys, token, ttl, first, startedAt);
      if (queue) this.tried(keys[0], queue);
      return lease;
    }
    if (waitTimeout <= 0 || performance.now() >= deadline) {
      if (queue) this.tried(keys[0], queue);
      throw new LockNotAcquiredError(keys, performance.now() - startedAt, first.pttl);
    }
    if (queue) {
      // First in line: ahead of the callers that queued behind this try.
      queue.trying--;
      return this.waitInQueue(keys, queue, token, ttl, startedAt, deadline, signal, true);
    }
    return this.waitAsMany(keys, token, ttl, startedAt, deadline, signal);
  }

  /**
   * One try, no waiting, no error object on contention (cheap enough for sweeps over many
   * keys): the lease, or the busy holder's remaining lease in ms.
   * @throws LockBackendError when too many nodes fail for a quorum
   */
  async tryAcquire(keys: readonly string[], ttl: number): Promise<Lease | number> {
    const queue = keys.length === 1 ? this.queues.get(keys[0]) : undefined;
    // Held or awaited here: busy for sure, no round trip needed.
    if (queue && (this.heldHere(queue) || queue.waiters.length > 0 || queue.trying > 0)) return ttl;
    const startedAt = performance.now();
    const token = this.newToken();
    const vote = await this.attempt(keys, token, ttl, 0);
    return vote.kind === 'ok' ? this.hold(keys, token, ttl, vote, startedAt) : vote.pttl;
  }

  /** Whether `tryAcquireAny` can sweep many keys in one round trip (one node, no Cluster). */
  get canTakeAny(): boolean {
    return this.nodes.length === 1 && !this.clustered;
  }

  /**
   * One try at each key, in order, in a single round trip (see `canTakeAny`): the first free
   * one is taken. Keys held or awaited in this process are skipped without asking Redis.
   * @returns the lease and the index of its key in `keys`, or the shortest lease left
   */
  async tryAcquireAny(
    keys: readonly string[],
    ttl: number,
  ): Promise<{ lease: Lease; index: number } | number> {
    const candidates: number[] = [];
    const scriptKeys: string[] = [];
    keys.forEach((key, i) => {
      const queue = this.queues.get(key);
      if (!queue || (!this.heldHere(queue) && queue.waiters.length === 0)) {
        candidates.push(i);
        const take = this.keySet(key).take;
        scriptKeys.push(take[0], take[1]);
      }
    });
    if (candidates.length === 0) return ttl;
    const startedAt = performance.now();
    const token = this.newToken();
    this.stats.attempts++;
    const reply = (await this.runScript(this.nodes[0], TAKE_ANY, scriptKeys, [
      token,
      ttl,
      this.block,
    ]).catch((e: unknown) => {
      throw new LockBackendError(keys, [asError(e)]);
    })) as number[];
    if (reply[0] !== 1) return Number(reply[1]);
    const index = candidates[Number(reply[1]) - 1];
    // A block of fences, as for a first try: the slice can pass to our next caller in memory.
    const vote = { fences: [Number(reply[2])], spare: this.block - 1, firstTry: true };
    const lease = this.hold([keys[index]], token, ttl, vote, startedAt);
    return { lease, index };
  }

  /**
   * Listens for releases of any of `keys` (one shared subscriber connection). After `ready`,
   * try the lock with a flag so its release publishes, then `next(ms)` waits for a release or
   * the timer, whichever comes first. Call `stop` when done.
   */
  watch(keys: readonly string[]): {
    ready: Promise<void>;
    next: (ms: number) => Promise<'notified' | 'timer'>;
    stop: () => void;
  } {
    let nudge: (() => void) | undefined;
    let pending = false;
    const subs = keys.map((k) =>
      this.notifier.listen(this.channel(k), (message) => {
        if (message !== 'r') return; // a grant keeps the key held
        this.stats.notifiedWakeups++;
        if (nudge) nudge();
        else pending = true;
      }),
    );
    return {
      ready: Promise.all(subs.map((s) => s.ready.catch(() => undefined))).then(() => undefined),
      next: (ms) => {
        if (pending) {
          pending = false;
          return Promise.resolve('notified');
        }
        return new Promise((wake) => {
          const t = setTimeout(
            () => {
              nudge = undefined;
              this.stats.timerWakeups++;
              wake('timer');
            },
            Math.max(1, ms),
          );
          nudge = () => {
            nudge = undefined;
            clearTimeout(t);
            wake('notified');
          };
        });
      },
      stop: () => {
        const n = nudge;
        nudge = undefined;
        for (const s of subs) s.stop();
        n?.();
      },
    };
  }

  /**
   * Renews the lease to `ttl` ms from now.
   * @returns false when the lock is no longer held by this lease
   * @throws LockBackendError when too many nodes fail to tell
   */
  async extend(lease: Lease, ttl: number): Promise<boolean> {
    const start = performance.now();
    const votes = await this.collect<boolean | Error>(
      (node, answer) =>
        void this.nodeExtend(node, lease, ttl).then(answer, (e: unknown) => answer(asError(e))),
      (v) => v === true,
    );
    const ok = votes.filter((v) => v === true).length;
    if (ok >= this.quorum) {
      lease.ttl = ttl;
      lease.validUntil = start + ttl - this.drift(ttl);
      return true;
    }
    const errors = votes.filter((v): v is Error => v instanceof Error);
    if (errors.length > this.nodes.length - this.quorum) {
      throw new LockBackendError(lease.keys, errors, 'extend');
    }
    return false;
  }

  /**
   * Releases the lease, or hands it straight to the next waiter of this process for the same
   * key (at most `localHandoffs` times in a row, then it goes back to every process).
   * @throws LockBackendError when no majority of nodes could be told (the lease then expires by
   *   itself)
   */
  release(lease: Lease): Promise<void> {
    if (lease.released) return Promise.resolve();
    lease.released = true;
    const queue = lease.keys.length === 1 ? this.queues.get(lease.keys[0]) : undefined;
    if (queue && queue.waiters.length > 0 && !this.closed) {
      return this.releaseToWaiters(lease, queue);
    }
    return this.releaseInRedis(lease, queue, lease.token);
  }

  /** A caller of this process waits for the key: hand it over, or pass it on fairly. */
  private async releaseToWaiters(lease: Lease, queue: KeyQueue): Promise<void> {
    // `held` stays up until Redis has the key back, so our own head does not compete for a
    // key this process still holds.
    let token = lease.token;
    const next = queue.waiters[0];
    if (queue.handoffs < this.settings.localHandoffs && performance.now() < lease.validUntil) {
      const handed =
        this.handOverHere(lease, next) ?? (await this.handoff(lease, next).catch(() => undefined));
      if (handed) {
        queue.handoffs++;
        this.stats.localHandoffs++;
        queue.holder = handed;
        if (next.handOver(handed)) return;
        // The waiter gave up while the handoff was in flight: release what it was given.
        token = handed.token;
      }
    } else if (this.fair) {
      // Our turn is spent: the oldest waiter of another process goes first, ours queues.
      const r = await this.releaseTo(lease, next).catch(() => 'lost' as const);
      queue.handoffs = 0;
      if (r === 'granted') {
        this.tokens.delete(lease.token);
        next.enqueued = true;
        next.queuedByHolder = true;
        queue.held--;
        if (queue.holder === lease) queue.holder = undefined;
        this.dropQueueIfIdle(lease.keys[0], queue);
        return;
      }
      if (r !== 'lost') {
        this.stats.localHandoffs++;
        queue.holder = r;
        if (next.handOver(r)) {
          this.tokens.delete(lease.token);
          return;
        }
        token = r.token;
      }
    }
    queue.handoffs = 0;
    return this.releaseInRedis(lease, queue, token);
  }

  /** Gives the key back in Redis (compare-and-delete), then wakes our head if it must try. */
  private releaseInRedis(lease: Lease, queue: KeyQueue | undefined, token: string): Promise<void> {
    this.tokens.delete(lease.token);
    this.tokens.delete(token);
    // Racing groups: FREE does all RELEASE would for one key. Queueing groups: only for a lease
    // taken by a first try (nobody waited then); a waiter queued since sends RELEASE after it.
    const lean =
      lease.keys.length === 1 && (!this.fair || (lease.firstTry && token === lease.token));
    const settle = (published: boolean, errors: Error[]): void => {
      if (queue) {
        queue.held--;
        if (queue.holder === lease || queue.holder?.token === token) queue.holder = undefined;
        this.dropQueueIfIdle(lease.keys[0], queue);
        // A head that listens hears the PUBLISH at the same moment as the other processes'
        // heads and competes on equal terms; one that does not is told directly.
        const head = queue.waiters[0];
        if (head && (!published || !queue.listening)) head.wake();
      }
      if (errors.length > this.nodes.length - this.quorum) {
        throw new LockBackendError(lease.keys, errors, 'release');
      }
    };
    if (this.nodes.length === 1) {
      return new Promise((resolve, reject) => {
        this.nodeReleaseTo(this.nodes[0], lease.keys, token, lean, (r) => {
          try {
            settle(typeof r === 'number' && r > 0, r instanceof Error ? [r] : []);
            resolve();
          } catch (e) {
            reject(e);
          }
        });
      });
    }
    return this.collect<number | Error, void>(
      (node, answer) => this.nodeReleaseTo(node, lease.keys, token, lean, answer),
      (r) => !(r instanceof Error),
      (results) =>
        settle(
          results.some((r) => typeof r === 'number' && r > 0),
          results.filter((r): r is Error => r instanceof Error),
        ),
    );
  }

  /** Whether a majority of nodes has the key locked right now. */
  async isLocked(key: string): Promise<boolean> {
    const rk = this.redisKey(key);
    const votes = await this.onNodes(async (node) => (await node.exists(rk)) === 1);
    const errors = votes.filter((v): v is Error => v instanceof Error);
    if (errors.length > this.nodes.length - this.quorum) {
      throw new LockBackendError([key], errors, 'check');
    }
    return votes.filter((v) => v === true).length >= this.quorum;
  }

  /** Ends every wait in progress (they reject with LockBackendError) and stops listening. */
  abortWaits(): void {
    this.closed = true;
    this.closing.abort();
  }

  async close(): Promise<void> {
    this.abortWaits();
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    await this.notifier.close();
  }

  // ---------------------------------------------------------------- waiting

  private queueFor(key: string): KeyQueue {
    let queue = this.queues.get(key);
    if (!queue) {
      queue = { waiters: [], held: 0, trying: 0, handoffs: 0, listening: false };
      this.queues.set(key, queue);
    }
    return queue;
  }

  /** A first try that will not wait ended: the line's head (if any) tries now. */
  private tried(key: string, queue: KeyQueue): void {
    queue.trying--;
    if (queue.held <= 0 && queue.trying <= 0) queue.waiters[0]?.wake();
    this.dropQueueIfIdle(key, queue);
  }

  private dropQueueIfIdle(key: string, queue: KeyQueue): void {
    if (
      queue.held <= 0 &&
      queue.trying <= 0 &&
      queue.waiters.length === 0 &&
      this.queues.get(key) === queue
    ) {
      this.stopListening(queue);
      this.queues.delete(key);
    }
  }

  /**
   * Waits in the key's local FIFO. Only the head competes over the network; the others wait for
   * a local handoff or to become the head. The queue, not the waiter, owns the subscription to
   * the key's release channel, so it survives handoffs from one head to the next.
   */
  private waitInQueue(
    keys: readonly string[],
    queue: KeyQueue,
    token: string,
    ttl: number,
    startedAt: number,
    deadline: number,
    signal?: AbortSignal,
    first = false,
  ): Promise<Lease> {
    const key = keys[0];
    return new Promise<Lease>((resolve, reject) => {
      if (signal?.aborted || this.closing.signal.aborted) {
        // Aborted before it waited (during a first try, say): the queue may be idle now.
        this.dropQueueIfIdle(key, queue);
        reject(this.abortReason(keys, signal));
        return;
      }
      let done = false;
      let nudge: (() => void) | undefined;
      let pendingWake = false;
      let lastPttl = ttl;
      const deadlineTimer = setTimeout(
        () => {
          finish();
          // Leave the Redis queue (and pass the key on if a grant raced with the timeout).
          if (waiter.enqueued && !this.tokens.has(token)) {
            this.leaveQueue(keys, token);
          }
          reject(new LockNotAcquiredError(keys, performance.now() - startedAt, lastPttl));
        },
        Math.max(0, deadline - performance.now()),
      );

      const onAbort = () => {
        if (done) return;
        finish();
        if (waiter.enqueued && !this.tokens.has(token)) {
          this.leaveQueue(keys, token);
        }
        reject(this.abortReason(keys, signal));
      };
      signal?.addEventListener('abort', onAbort);
      this.closing.signal.addEventListener('abort', onAbort);

      const finish = () => {
        done = true;
        clearTimeout(deadlineTimer);
        // End a pending sleep now, so its timer does not outlive the wait.
        const n = nudge;
        nudge = undefined;
        n?.();
        signal?.removeEventListener('abort', onAbort);
        this.closing.signal.removeEventListener('abort', onAbort);
        const i = queue.waiters.indexOf(waiter);
        if (i >= 0) queue.waiters.splice(i, 1);
        if (queue.waiters.length === 0) this.stopListening(queue);
        // The next in line becomes the head; if the lock is not held here, it competes now.
        else if (i === 0 && queue.held <= 0) queue.waiters[0].wake();
        this.dropQueueIfIdle(key, queue);
      };

      const waiter: Waiter = {
        token,
        ttl,
        startedAt,
        handOver: (lease) => {
          if (done) return false;
          finish();
          resolve(lease);
          return true;
        },
        wake: () => {
          const n = nudge;
          nudge = undefined;
          if (n) n();
          else pendingWake = true;
        },
        enqueued: false,
        queuedByHolder: false,
        remaining: () => deadline - performance.now(),
      };
      if (first) queue.waiters.unshift(waiter);
      else queue.waiters.push(waiter);

      const sleep = (ms: number): Promise<'notified' | 'timer'> => {
        if (pendingWake) {
          pendingWake = false;
          return Promise.resolve('notified');
        }
        return new Promise((wake) => {
          const t = setTimeout(() => {
            nudge = undefined;
            wake('timer');
          }, ms);
          nudge = () => {
            clearTimeout(t);
            wake('notified');
          };
        });
      };
      const untilDeadline = () => Math.min(MAX_POLL_MS, Math.max(1, deadline - performance.now()));

      const loop = async () => {
        while (!done && !this.closed) {
          if (queue.waiters[0] !== waiter) {
            // Not our turn: we become the head when the one ahead of us leaves.
            await sleep(untilDeadline());
            continue;
          }
          pendingWake = false;
          // Single node: grants come on this group's own channel, nothing to subscribe per key.
          // Quorum: heads race, woken by the key's release channel.
          if (this.fair) await this.subscribed(this.notifier.ready());
          else await this.listen(key, queue);
          if (done) return;
          if (this.heldHere(queue) || queue.trying > 0) {
            // Held here: the holder hands it over, or releases it and we hear the PUBLISH.
            await sleep(untilDeadline());
            continue;
          }
          if (waiter.queuedByHolder) {
            // Queued in Redis by our last holder: a release will grant it to us. Try ourselves
            // only if nothing came (a lost message, or the holder died and the lease expired).
            waiter.queuedByHolder = false;
            const why = await sleep(untilDeadline());
            if (why === 'notified' || done) continue;
          }
          const remaining = deadline - performance.now();
          // From the moment it is sent, the attempt may queue the token: a wait that ends before
          // its reply must leave the Redis queue (the leave runs after it on the same
          // connection), or a release would grant the key to nobody.
          if (this.fair) waiter.enqueued = true;
          const vote = await this.attempt(keys, token, ttl, Math.max(1, remaining));
          if (done) {
            // The deadline passed (or a grant arrived) while the attempt was in flight: give
            // back what it took, unless a grant made it ours in the meantime.
            if (vote.kind === 'ok' && !this.tokens.has(token)) {
              this.leaveQueue(keys, token);
            }
            return;
          }
          if (vote.kind === 'ok') {
            // Count the hold before leaving the queue, so the next head waits for a handoff
            // instead of competing for a key this process holds.
            const lease = this.hold(keys, token, ttl, vote, startedAt);
            finish();
            resolve(lease);
            return;
          }
          lastPttl = vote.pttl;
          const why = await sleep(this.retryDelay(vote.pttl, deadline));
          if (why === 'timer') this.stats.timerWakeups++;
        }
      };
      loop().catch((err: unknown) => {
        if (done) return;
        finish();
        if (waiter.enqueued && !this.tokens.has(token)) {
          this.leaveQueue(keys, token);
        }
        reject(err);
      });
    });
  }

  /**
   * `g <token> <fence> <spare> <lock key>` on this group's own channel: a release granted the key
   * to a token this process queued.
   */
  private onGrant(message: string): void {
    const parts = message.split(' ');
    if (parts[0] !== 'g' || parts.length < 5) return;
    const rk = parts.slice(4).join(' ');
    const open = `${this.settings.keyPrefix}{`;
    if (!rk.startsWith(open) || !rk.endsWith('}')) return;
    this.stats.grants++;
    this.granted(rk.slice(open.length, -1), parts[1], Number(parts[2]), Number(parts[3]) || 0);
  }

  /** Subscribes the queue to the key's releases (once), waking whoever is its head. */
  private async listen(key: string, queue: KeyQueue): Promise<void> {
    if (!queue.listener) {
      const listener = this.notifier.listen(this.channel(key), (message) => {
        if (message !== 'r') return;
        this.stats.notifiedWakeups++;
        queue.waiters[0]?.wake();
      });
      queue.listener = listener;
      listener.ready.then(
        () => {
          if (queue.listener === listener) queue.listening = true;
        },
        () => undefined,
      );
    }
    await this.subscribed(queue.listener.ready);
  }

  /** Waits for a subscription, never long: without it a waiter still retries on its timer. */
  private async subscribed(ready: Promise<void>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      ready.catch(() => undefined),
      new Promise((resolve) => (timer = setTimeout(resolve, this.settings.commandTimeout))),
    ]);
    clearTimeout(timer);
  }

  private stopListening(queue: KeyQueue): void {
    queue.listener?.stop();
    queue.listener = undefined;
    queue.listening = false;
  }

  /** Multi-key callers: no local queue; retry on any release of a key they wait for. */
  private async waitAsMany(
    keys: readonly string[],
    token: string,
    ttl: number,
    startedAt: number,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<Lease> {
    const watch = this.watch(keys);
    const stop = () => watch.stop();
    signal?.addEventListener('abort', stop);
    this.closing.signal.addEventListener('abort', stop);
    try {
      await this.subscribed(watch.ready);
      let pttl = ttl;
      for (;;) {
        this.throwIfAborted(keys, signal);
        const remaining = deadline - performance.now();
        if (remaining <= 0) break;
        const vote = await this.attempt(keys, token, ttl, remaining);
        if (vote.kind === 'ok') return this.hold(keys, token, ttl, vote, startedAt);
        pttl = vote.pttl;
        const delay = Math.min(this.retryDelay(vote.pttl, deadline), deadline - performance.now());
        if (delay <= 0) break;
        await watch.next(delay);
      }
      throw new LockNotAcquiredError(keys, performance.now() - startedAt, pttl);
    } finally {
      signal?.removeEventListener('abort', stop);
      this.closing.signal.removeEventListener('abort', stop);
      watch.stop();
    }
  }

  /** Why a wait ends early: the caller's signal, or the client closing (shutdown). */
  private abortReason(keys: readonly string[], signal?: AbortSignal): unknown {
    if (signal?.aborted) return signal.reason;
    return new LockBackendError(keys, [new Error('the application is shutting down')], 'acquire');
  }

  private throwIfAborted(keys: readonly string[], signal?: AbortSignal): void {
    if (signal?.aborted || this.closing.signal.aborted) throw this.abortReason(keys, signal);
  }

  /**
   * Expiry publishes nothing, so a waiter also retries when the holder's lease would run out;
   * the cap covers a lost notification (subscriber reconnecting).
   */
  private retryDelay(pttl: number, deadline: number): number {
    const untilExpiry = pttl > 0 ? pttl + 1 : 1;
    return Math.max(1, Math.min(untilExpiry, MAX_POLL_MS, deadline - performance.now()));
  }

  private hold(
    keys: readonly string[],
    token: string,
    ttl: number,
    vote: { fences: number[]; start?: number; spare?: number; firstTry?: boolean },
    startedAt: number,
  ): Lease {
    const now = performance.now();
    const lease: Lease = {
      keys,
      token,
      ttl,
      fences: vote.fences,
      spare: vote.spare ?? 0,
      firstTry: vote.firstTry === true,
      validUntil: (vote.start ?? now) + ttl - this.drift(ttl),
      acquiredAt: Date.now(),
      waitedMs: now - startedAt,
      released: false,
    };
    if (keys.length === 1) {
      const queue = this.queueFor(keys[0]);
      queue.held++;
      queue.holder = lease;
    }
    // Only a token that queued in Redis can be granted a key: a first try's needs no entry.
    if (!lease.firstTry) this.tokens.add(token);
    return lease;
  }

  /**
   * Held by a caller of this process whose lease may still be valid. A holder that stalled, lost
   * the key or forgot to release is not waited for past its lease: Redis decides then.
   */
  private heldHere(queue: KeyQueue): boolean {
    return queue.held > 0 && !(queue.holder && performance.now() >= queue.holder.validUntil);
  }

  /**
   * Single node, bounded barging spent: grant the key to the oldest waiter queued in Redis by
   * another process and queue `next` behind it, or, if nobody is queued, hand it to `next`.
   */
  private async releaseTo(lease: Lease, next: Waiter): Promise<Lease | 'granted' | 'lost'> {
    const start = performance.now();
    const r = (await this.runScript(this.nodes[0], RELEASE_TO, this.allKeys(lease.keys), [
      lease.token,
      next.token,
      next.ttl,
      Math.max(1, Math.ceil(next.remaining())),
      this.block,
    ])) as number[];
    if (r[0] === 2) return 'granted';
    if (r[0] !== 3) return 'lost';
    this.tokens.add(next.token);
    return this.leaseFor(lease.keys, next, [Number(r[1])], start, this.block - 1);
  }

  private leaseFor(
    keys: readonly string[],
    waiter: Pick<Waiter, 'token' | 'ttl' | 'startedAt'>,
    fences: number[],
    start: number,
    spare = 0,
  ): Lease {
    return {
      keys,
      token: waiter.token,
      ttl: waiter.ttl,
      fences,
      spare,
      firstTry: false,
      validUntil: start + waiter.ttl - this.drift(waiter.ttl),
      acquiredAt: Date.now(),
      waitedMs: performance.now() - waiter.startedAt,
      released: false,
    };
  }

  /** A grant message for a token of ours: hand the lease to its waiter, or give it back. */
  private granted(key: string, token: string, fence: number, spare: number): void {
    const queue = this.queues.get(key);
    const waiter = queue?.waiters.find((w) => w.token === token);
    if (this.tokens.has(token)) return; // already taken by a retry that found it ours
    if (!queue || !waiter) {
      // Its waiter left (timed out) after the grant: pass the key on.
      this.leaveQueue([key], token);
      return;
    }
    this.tokens.add(token);
    queue.held++;
    const lease = this.leaseFor([key], waiter, [fence], performance.now(), spare);
    queue.holder = lease;
    if (!waiter.handOver(lease)) void this.release(lease).catch(() => undefined);
  }

  /**
   * The key passes to the next caller of this process with no round trip: Redis keeps the
   * process's token, the caller gets the next fence of the reserved block and the rest of the
   * lease. Only while the lease in Redis was set or renewed moments ago (the new holder gets at
   * least ttl minus twice the drift allowance, as from a fresh acquire), with the same ttl, a
   * spare fence, and a waiter that is not queued in Redis; otherwise undefined (the HANDOFF
   * script does it in one round trip).
   */
  private handOverHere(lease: Lease, next: Waiter): Lease | undefined {
    if (lease.spare <= 0 || next.enqueued || next.ttl !== lease.ttl) return undefined;
    const now = performance.now();
    if (lease.validUntil - now < lease.ttl - 2 * this.drift(lease.ttl)) return undefined;
    return {
      keys: lease.keys,
      token: lease.token,
      ttl: lease.ttl,
      fences: [lease.fences[0] + 1],
      spare: lease.spare - 1,
      firstTry: false,
      validUntil: lease.validUntil,
      acquiredAt: Date.now(),
      waitedMs: now - next.startedAt,
      released: false,
    };
  }

  /**
   * Swaps the owner token from `lease` to the waiter's in one script, minting a new fence.
   * Returns the waiter's lease, or undefined when the old lease no longer held the lock (the
   * caller then releases publicly).
   */
  private async handoff(lease: Lease, next: Waiter): Promise<Lease | undefined> {
    const start = performance.now();
    const votes = await this.onNodes((node) =>
      this.runScript(node, HANDOFF, this.allKeys(lease.keys), [
        lease.token,
        next.token,
        next.ttl,
        this.block,
      ]),
    );
    const fencesPerNode = votes
      .filter((v): v is number[] => Array.isArray(v) && v[0] === 1)
      .map((v) => v.slice(1).map(Number));
    if (
      fencesPerNode.length < this.quorum ||
      performance.now() >= start + next.ttl - this.drift(next.ttl)
    ) {
      // A partial handoff (quorum only) must not leave the waiter's token behind.
      if (fencesPerNode.length > 0) {
        void this.onNodes((node) => this.nodeRelease(node, lease.keys, next.token));
      }
      return undefined;
    }
    const fences = await this.settleFences(lease.keys, fencesPerNode);
    // The hold passes from one caller to the next: `held` of the key does not change.
    this.tokens.add(next.token);
    return this.leaseFor(lease.keys, next, fences, start, this.block - 1);
  }

  // ---------------------------------------------------------------- protocol

  private channel(key: string): string {
    return `${this.redisKey(key)}:rel`;
  }

  private drift(ttl: number): number {
    return Math.round(ttl * this.settings.driftFactor) + 2;
  }

  /** The script keys of a lease: per lock key, the lock, fence, wait-flag, queue and queue-meta keys. */
  private allKeys(keys: readonly string[]): string[] {
    if (keys.length === 1) return this.keySet(keys[0]).all;
    const out: string[] = [];
    for (const k of keys) {
      const rk = this.redisKey(k);
      out.push(rk, `${rk}:fence`, `${rk}:wait`, `${rk}:q`, `${rk}:qm`);
    }
    return out;
  }

  /** The script keys of one lock key, from the cache (emptied when full: bounded memory). */
  private keySet(key: string): KeySet {
    let set = this.keySets.get(key);
    if (!set) {
      if (this.keySets.size >= KEY_SET_CACHE) this.keySets.clear();
      const rk = this.redisKey(key);
      const all = [rk, `${rk}:fence`, `${rk}:wait`, `${rk}:q`, `${rk}:qm`];
      set = { all, take: [rk, all[1]], free: [rk, all[2]] };
      this.keySets.set(key, set);
    }
    return set;
  }

  /**
   * Units that can go in one script: every key at once, except on Redis Cluster where keys of
   * different slots must be taken one by one (in sorted order, so never a deadlock).
   */
  private units(keys: readonly string[]): string[][] {
    if (!this.clustered || keys.length === 1) return [this.allKeys(keys)];
    return keys.map((k) => this.allKeys([k]));
  }

  /**
   * One acquire round over every node. Contention and failure are kept apart: it is a backend
   * failure only when errors alone make a quorum impossible.
   */
  private attempt(
    keys: readonly string[],
    token: string,
    ttl: number,
    flagMs: number,
    start = performance.now(),
  ): Promise<Outcome> {
    this.stats.attempts++;
    if (flagMs <= 0 && keys.length === 1) return this.firstTry(keys, token, ttl, start);
    const units = this.units(keys);
    const flag = Math.ceil(flagMs);
    if (this.nodes.length === 1 && units.length === 1) {
      // The common case: one script, no per-node vote to collect.
      const args = this.acquireArgs(units, token, ttl, flag);
      return this.attemptOnOne(keys, ACQUIRE, units[0], args, start, this.spareFor(units), false);
    }
    return this.attemptOnNodes(keys, units, token, ttl, flag, start);
  }

  /** One acquire script on the only node: its reply is the outcome (an error rejects). */
  private attemptOnOne(
    keys: readonly string[],
    s: Script,
    scriptKeys: string[],
    args: (string | number)[],
    start: number,
    spare: number,
    firstTry: boolean,
  ): Promise<Outcome> {
    return new Promise((resolve, reject) => {
      this.send(this.nodes[0], s, scriptKeys, args, (e, r) => {
        if (e) return reject(new LockBackendError(keys, [e]));
        const vote = toVote(r);
        resolve(
          vote.kind === 'ok' ? { kind: 'ok', fences: vote.fences, start, spare, firstTry } : vote,
        );
      });
    });
  }

  /**
   * A first try for one key: it neither queues nor flags, so TRY_SCRIPT with the lock and fence
   * keys only (ACQUIRE_SCRIPT would do the same with three keys more to send and parse).
   */
  private firstTry(
    keys: readonly string[],
    token: string,
    ttl: number,
    start: number,
  ): Promise<Outcome> {
    const set = this.keySet(keys[0]);
    // Quorum groups reserve one fence (block 1): no local handoff without a round trip there.
    const args = [token, ttl, this.block];
    if (this.nodes.length === 1) {
      return this.attemptOnOne(keys, TRY, set.take, args, start, this.block - 1, true);
    }
    return this.collect<Vote, Outcome>(
      (node, answer) =>
        this.send(node, TRY, set.take, args, (e, r) =>
          answer(e ? { kind: 'error', error: e } : toVote(r)),
        ),
      (v) => v.kind === 'ok',
      (votes) => this.countVotes(keys, token, ttl, start, votes, true),
    );
  }

  private attemptOnNodes(
    keys: readonly string[],
    units: string[][],
    token: string,
    ttl: number,
    flag: number,
    start: number,
  ): Promise<Outcome> {
    if (this.nodes.length === 1) {
      return this.nodeAcquireUnits(this.nodes[0], units, token, ttl, flag).then((vote) => {
        if (vote.kind === 'ok') {
          return { kind: 'ok', fences: vote.fences, start, firstTry: false };
        }
        if (vote.kind === 'busy') return vote;
        throw new LockBackendError(keys, [vote.error]);
      });
    }
    // Go on as soon as a majority agreed (or can no longer agree), as Redlock does: the slowest
    // node's answer is not waited for. Its acquire still lands and is released like the others
    // (commands on one connection run in order).
    return this.collect<Vote, Outcome>(
      (node, answer) => this.nodeAcquire(node, units, token, ttl, flag, answer),
      (v) => v.kind === 'ok',
      (votes) => this.countVotes(keys, token, ttl, start, votes, false),
    );
  }

  /** The outcome of a quorum acquire round, from the votes in so far. */
  private countVotes(
    keys: readonly string[],
    token: string,
    ttl: number,
    start: number,
    votes: (Vote | undefined)[],
    firstTry: boolean,
  ): Outcome | Promise<Taken> {
    const perNode: number[][] = [];
    for (const v of votes) if (v?.kind === 'ok') perNode.push(v.fences);
    const validity = ttl - (performance.now() - start) - this.drift(ttl);
    if (perNode.length >= this.quorum && validity > 0) {
      const settled = this.settleFences(keys, perNode);
      return Array.isArray(settled)
        ? { kind: 'ok', fences: settled, start, firstTry }
        : settled.then((fences) => ({ kind: 'ok', fences, start, firstTry }));
    }
    // No quorum: give back what we took (also on nodes that errored or timed out, whose
    // acquire may still land; a release of a lock we do not hold is a no-op).
    const toUndo = this.nodes.filter((_, i) => votes[i]?.kind !== 'busy');
    void Promise.all(toUndo.map((n) => this.nodeRelease(n, keys, token).catch(() => 0)));
    const errors = votes.filter((v): v is { kind: 'error'; error: Error } => v?.kind === 'error');
    if (errors.length > this.nodes.length - this.quorum) {
      throw new LockBackendError(
        keys,
        errors.map((e) => e.error),
      );
    }
    const busy = votes
      .filter((v): v is { kind: 'busy'; pttl: number } => v?.kind === 'busy')
      .map((v) => v.pttl)
      .sort((a, b) => a - b);
    return { kind: 'busy', pttl: busy[0] ?? 0 };
  }

  /**
   * Quorum only: nodes that disagree on a fence get raised to the largest one before the holder
   * runs, so the next holder's fence is larger on every majority. Nodes in step (the usual case)
   * cost nothing.
   */
  private settleFences(keys: readonly string[], perNode: number[][]): number[] | Promise<number[]> {
    const fences = perNode[0].slice();
    let inStep = true;
    for (let n = 1; n < perNode.length; n++) {
      const nodeFences = perNode[n];
      for (let i = 0; i < fences.length; i++) {
        if (nodeFences[i] !== fences[i]) inStep = false;
        if (nodeFences[i] > fences[i]) fences[i] = nodeFences[i];
      }
    }
    if (inStep) return fences;
    return this.onNodes((node) =>
      this.runScript(node, RAISE_FENCE, this.allKeys(keys), fences),
    ).then(() => fences);
  }

  /** One node's vote, to `answer` (never an exception: an error is a vote too). */
  private nodeAcquire(
    node: RedisNode,
    units: string[][],
    token: string,
    ttl: number,
    flag: number,
    answer: (vote: Vote) => void,
  ): void {
    if (units.length === 1) {
      this.send(node, ACQUIRE, units[0], this.acquireArgs(units, token, ttl, flag), (e, r) =>
        answer(e ? { kind: 'error', error: e } : toVote(r)),
      );
      return;
    }
    void this.nodeAcquireUnits(node, units, token, ttl, flag).then(answer);
  }

  /** Redis Cluster, several keys: one script per key, in sorted order, undone on a refusal. */
  private async nodeAcquireUnits(
    node: RedisNode,
    units: string[][],
    token: string,
    ttl: number,
    flag: number,
  ): Promise<Vote> {
    const fences: number[] = [];
    for (let u = 0; u < units.length; u++) {
      let reply: unknown;
      try {
        reply = await this.runScript(
          node,
          ACQUIRE,
          units[u],
          this.acquireArgs(units, token, ttl, flag),
        );
      } catch (e) {
        if (u > 0) await this.releaseUnits(node, units.slice(0, u), token);
        return { kind: 'error', error: asError(e) };
      }
      const r = reply as number[];
      if (r[0] !== 1) {
        if (u > 0) await this.releaseUnits(node, units.slice(0, u), token);
        return { kind: 'busy', pttl: Number(r[1]) };
      }
      for (let i = 1; i < r.length; i++) fences.push(Number(r[i]));
    }
    return { kind: 'ok', fences };
  }

  /**
   * ACQUIRE's arguments. Single key on a single node: queue for a grant and reserve a block of
   * fences for local handoffs; otherwise race (flag the key), one fence per key.
   */
  private acquireArgs(
    units: string[][],
    token: string,
    ttl: number,
    flag: number,
  ): (string | number)[] {
    const single = this.fair && units.length === 1 && units[0].length === 5;
    return [token, ttl, flag, single ? '1' : '0', single ? this.block : 1];
  }

  /** Fences left after the holder's in what `acquireArgs` reserved. */
  private spareFor(units: string[][]): number {
    return this.fair && units.length === 1 && units[0].length === 5 ? this.block - 1 : 0;
  }

  private async releaseUnits(node: RedisNode, units: string[][], token: string): Promise<void> {
    await Promise.all(
      units.map((u) =>
        this.runScript(node, RELEASE, u, [token, '0', this.block]).catch(() => undefined),
      ),
    );
  }

  private async nodeExtend(node: RedisNode, lease: Lease, ttl: number): Promise<boolean> {
    const replies = await Promise.all(
      this.units(lease.keys).map((u) => this.runScript(node, EXTEND, u, [lease.token, ttl])),
    );
    return replies.every((r) => Number(r) === 1);
  }

  /**
   * Releases what `token` holds on one node; `leave` also takes it out of the Redis queue (a
   * waiter giving up). Returns how many freed keys were announced with a PUBLISH `r`.
   */
  private nodeRelease(
    node: RedisNode,
    keys: readonly string[],
    token: string,
    leave = false,
  ): Promise<number> {
    return new Promise((resolve, reject) =>
      this.nodeReleaseTo(
        node,
        keys,
        token,
        false,
        (r) => (r instanceof Error ? reject(r) : resolve(r)),
        leave,
      ),
    );
  }

  /**
   * `nodeRelease` to a callback: the PUBLISH count, or the error. `lean` (one key): FREE first,
   * RELEASE only when it finds someone waiting for a grant.
   */
  private nodeReleaseTo(
    node: RedisNode,
    keys: readonly string[],
    token: string,
    lean: boolean,
    answer: (r: number | Error) => void,
    leave = false,
  ): void {
    if (lean) {
      const free = this.keySet(keys[0]).free;
      this.send(node, FREE, free, [token, this.fair ? '1' : '0'], (e, r) => {
        if (e) return answer(e);
        const code = Number(r);
        if (code !== 2) return answer(code === 3 ? 1 : 0);
        this.nodeReleaseTo(node, keys, token, false, answer);
      });
      return;
    }
    const units = this.units(keys);
    const args = [token, leave ? '1' : '0', this.block];
    if (units.length === 1) {
      this.send(node, RELEASE, units[0], args, (e, r) => answer(e ?? Number((r as number[])[2])));
      return;
    }
    this.nodeReleaseUnits(node, units, args).then(answer, (e: unknown) => answer(asError(e)));
  }

  /** A waiter that gives up leaves the Redis queue (and passes on a grant it may have got). */
  private leaveQueue(keys: readonly string[], token: string): void {
    void this.onNodes((node) => this.nodeRelease(node, keys, token, true));
  }

  private async nodeReleaseUnits(
    node: RedisNode,
    units: string[][],
    args: (string | number)[],
  ): Promise<number> {
    const replies = await Promise.all(units.map((u) => this.runScript(node, RELEASE, u, args)));
    let published = 0;
    for (const r of replies) published += Number((r as number[])[2]);
    return published;
  }

  /** Runs `fn` on every node with the command timeout; an error becomes the node's vote. */
  private onNodes<T>(fn: (node: RedisNode) => Promise<T>): Promise<(T | Error)[]> {
    return Promise.all(
      this.nodes.map((node) =>
        fn(node).then(
          (v) => v,
          (e: unknown) => asError(e),
        ),
      ),
    );
  }

  /**
   * EVALSHA, falling back to EVAL once per node when the script is not loaded yet, bounded by
   * `commandTimeout`; `cb` gets the error or the reply, once. One shared sweeper enforces the
   * bound, so a round trip costs no timer of its own, and no promise but the command's.
   */
  private send(
    node: RedisNode,
    s: Script,
    keys: string[],
    args: (string | number)[],
    cb: (error: Error | undefined, reply?: unknown) => void,
  ): void {
    let settled = false;
    const finish = (error: Error | undefined, reply?: unknown) => {
      if (settled) return;
      settled = true;
      this.inFlight.remove(call);
      cb(error, reply);
    };
    const call: InFlight = { sent: this.ticks, reject: finish };
    this.inFlight.push(call);
    this.sweeper ??= this.startSweeper();
    node.evalsha(s.sha, keys.length, ...keys, ...args).then(
      (v) => finish(undefined, v),
      (e: unknown) => {
        if (e instanceof Error && e.message.startsWith('NOSCRIPT')) {
          node.eval(s.lua, keys.length, ...keys, ...args).then(
            (v) => finish(undefined, v),
            (e2: unknown) => finish(asError(e2)),
          );
        } else finish(asError(e));
      },
    );
  }

  /** `send` as a promise. */
  private runScript(
    node: RedisNode,
    s: Script,
    keys: string[],
    args: (string | number)[],
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.send(node, s, keys, args, (error, reply) => (error ? reject(error) : resolve(reply)));
    });
  }

  /**
   * Asks every node at once and settles, in one promise, once `yes` holds for a majority, or can
   * no longer hold for one, or every node answered, with what `conclude` makes of the answers.
   * Answers still out are `undefined`; they arrive later and are dropped (their effect in Redis
   * is undone by the caller if needed).
   */
  private collect<T, R = (T | undefined)[]>(
    ask: (node: RedisNode, answer: (v: T) => void) => void,
    yes: (v: T) => boolean,
    conclude: (answers: (T | undefined)[]) => R | Promise<R> = (a) => a as R,
  ): Promise<R> {
    const n = this.nodes.length;
    const answers = new Array<T | undefined>(n).fill(undefined);
    return new Promise((resolve, reject) => {
      let ayes = 0;
      let noes = 0;
      let done = false;
      for (let i = 0; i < n; i++) {
        ask(this.nodes[i], (v) => {
          if (done) return;
          answers[i] = v;
          if (yes(v)) ayes++;
          else noes++;
          if (ayes >= this.quorum || noes > n - this.quorum || ayes + noes === n) {
            done = true;
            try {
              resolve(conclude(answers));
            } catch (err) {
              reject(err);
            }
          }
        });
      }
    });
  }

  /**
   * Every `interval` ms: a call sent `commandTimeout` ms ago or more (up to one interval more)
   * fails. Calls are kept in sending order, so the sweep stops at the first recent one.
   */
  private startSweeper(): NodeJS.Timeout {
    const timeout = this.settings.commandTimeout;
    const interval = Math.max(5, Math.min(100, timeout / 10));
    const ticks = Math.ceil(timeout / interval);
    const timer = setInterval(() => {
      this.ticks++;
      let call: InFlight | undefined;
      while ((call = this.inFlight.first) && this.ticks - call.sent >= ticks) {
        this.inFlight.remove(call);
        call.reject(new Error(`no answer from Redis within ${timeout} ms (commandTimeout)`));
      }
    }, interval);
    timer.unref();
    return timer;
  }
}
