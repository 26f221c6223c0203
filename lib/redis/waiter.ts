import { performance } from 'node:perf_hooks';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import type { Outcome, ReplicaAcks, Taken } from './protocol/lock-protocol';
import { type DeadlineListener, DeadlineTimer } from '../core/deadline-timer';
import type { KeyLine } from './key-line';

/** A key line of waiters. */
type WaiterLine = KeyLine<Waiter>;
import type { RedisLease, RedisTaker } from './redis-lease';
import {
  abortReason,
  FRESH_ANSWER_MS,
  MAX_POLL_MS,
  outageRetryDelay,
  retryDelay,
} from '../core/wait-rules';
import { WakeLatch } from './wake-latch';

/** How soon a racing waiter looks again when a release woke it but the key was still busy. */
const RELEASE_SETTLE_MS = 10;

/** What a wait in a key line needs from the engine. @internal */
export interface LineWaitContext {
  /** Single node: waiters queue in Redis and are granted the key by the release. */
  readonly fair: boolean;
  /** Aborted when the backend closes. */
  readonly closing: AbortSignal;
  /** One acquire round that queues (fair) or flags (racing) for `waitMs`. */
  attempt(keys: readonly string[], taker: RedisTaker, waitMs: number): Promise<Outcome>;
  /** The lease of a round that took the key (the line counts it as held). */
  hold(keys: readonly string[], taker: RedisTaker, taken: Taken): RedisLease;
  /** Subscribes as the group needs, so a release wakes the line's head; never waits long. */
  listen(line: WaiterLine): Promise<void>;
  /** Whether `token` holds the key now (a grant made it ours). */
  holds(token: string): boolean;
  /** Whether an undo of `token`'s may still run (a Cluster re-sends it: `LockNodes.undosOf`). */
  undoing(token: string): boolean;
  /** Gives back whatever `token` may hold or have queued in Redis, at once. */
  abandon(keys: readonly string[], token: string): void;
  /** The line is done with a waiter: drop it if idle. */
  dropIfIdle(line: WaiterLine): void;
  /** Counts a waiter woken by its timer rather than by a release. */
  timerWakeup(): void;
  /**
   * Confirms a grant in one round trip: renews the key the release granted to the waiter's token
   * from its claim window to the waiter's full lease. The round's outcome (the lease runs from
   * the moment the claim was sent), or undefined when the key is no longer the token's.
   */
  claim(keys: readonly string[], taker: RedisTaker, grant: GrantedKey): Promise<Taken | undefined>;
}

/** What a grant message gave a waiter's token: its fence and the spare ones after it. */
export interface GrantedKey {
  readonly fence: number;
  readonly spare: number;
}

/**
 * A caller of this process waiting in a key's line, and its wait. Only the line's head competes
 * over the network; the others wait for a local handoff or to become the head. The wait ends
 * with the lease (taken, granted or handed over), at the deadline with a LockNotAcquiredError,
 * or when its signal or the client aborts; in every ending but the lease, whatever its token may
 * have in Redis is given back at once (a queue entry, an attempt still on its way). A backend
 * failure of an attempt does not end the wait: it retries with back-off until its deadline.
 * At the deadline the last word goes to Redis: an attempt in flight, or one last try, decides
 * between the lock, LockNotAcquiredError and LockBackendError (so a wait ends within
 * waitTimeout + commandTimeout, never with contention reported for an outage).
 * @internal
 */
export class Waiter implements RedisTaker, DeadlineListener {
  readonly token: string;
  readonly ttl: number;
  readonly startedAt: number;
  readonly acks?: ReplicaAcks;
  /** The wait itself: settles once, with the lease or why there is none. */
  readonly lease: Promise<RedisLease>;
  /** It may sit in the key's Redis queue (so it must leave it when it gives up). */
  enqueued = false;
  /** Queued in Redis by this process's last holder, so a grant is on its way. */
  queuedByHolder = false;
  /** Its wait is over (it holds the key, or gave up). */
  done = false;
  /** Its loop (`run`) has started: until the first nudge, a waiter behind the head has none. */
  private running = false;
  /** Its links in the key's line (the line sets them). */
  prev?: Waiter;
  next?: Waiter;
  /** A grant message came for its token and is not confirmed yet. */
  private grant?: GrantedKey;
  /** A holder of this process is passing the key to its token in a round of its own. */
  private passing = false;

  private readonly latch = new WakeLatch();
  private readonly deadlineTimer: DeadlineTimer;
  private resolve!: (lease: RedisLease) => void;
  private reject!: (reason: unknown) => void;
  /** An attempt is on its way (giving up must undo it). */
  private attempting = false;
  /** The holder's remaining lease at the last busy answer. */
  private lastPttl: number;
  /** Busy answers in a row with no lease to wait for (back-off). */
  private idleRounds = 0;
  /** Its last sleep was ended by a release (not by its timer). */
  private woken = false;
  /** The deadline passed: the next answer (or the lack of one) decides how the wait ends. */
  private expired = false;
  /** `performance.now()` of the last answer from Redis. */
  private answeredAt = -Infinity;
  /** The backend error of the last attempt, while Redis keeps failing (a blip or worse). */
  private outage?: LockBackendError;
  private failures = 0;
  /** Listens to the caller's signal, if it gave one (the backend's close comes by `abort`). */
  private readonly onAbort?: () => void;

  /**
   * Joins `line` (`first`: ahead of the callers that queued behind its own first try) and
   * starts waiting; `lease` settles the wait.
   */
  constructor(
    private readonly ctx: LineWaitContext,
    private readonly line: WaiterLine,
    private readonly keys: readonly string[],
    taker: RedisTaker,
    readonly deadline: number,
    private readonly signal: AbortSignal | undefined,
    first: boolean,
  ) {
    this.token = taker.token;
    this.ttl = taker.ttl;
    this.startedAt = taker.startedAt;
    this.acks = taker.acks;
    this.lastPttl = taker.ttl;
    this.lease = new Promise<RedisLease>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.deadlineTimer = new DeadlineTimer(deadline, this);
    if (signal?.aborted || ctx.closing.aborted) {
      // Aborted before it waited (during a first try, say).
      this.done = true;
      this.deadlineTimer.cancel();
      ctx.dropIfIdle(line);
      this.reject(abortReason(keys, signal));
      return;
    }
    if (signal) {
      this.onAbort = () => this.abort();
      signal.addEventListener('abort', this.onAbort);
    }
    line.join(this, first);
    // Behind the head, a waiter only waits for a nudge: its loop starts with the first one, so a
    // long line holds no suspended loop (a generator, its promises and closures) per waiter.
    if (line.head === this) this.start();
  }

  /** Starts the wait's loop, once. */
  private start(): void {
    this.running = true;
    this.loop();
  }

  private loop(): void {
    this.run().catch((err: unknown) => {
      this.attempting = false;
      this.giveUp(err);
    });
  }

  /**
   * A holder of this process is about to pass the key to this waiter's token in a round of its
   * own (HANDOFF, RELEASE_TO): false, and no pass, while the waiter has a round of its own on
   * the way (an attempt, a claim) or has left. Until `passEnded` or `handOver` the waiter sends
   * nothing itself. One round at a time per token: a round that fails undoes what it took for
   * the token (the pass's undo, an acquire's), and that undo must not land on a lease the
   * token's other round took meanwhile (ACQUIRE counts "the token holds it already" as taken).
   * Nor while an undo of the token's may still run (a Cluster client re-sends it late).
   */
  passStarts(): boolean {
    if (this.done || this.attempting || this.ctx.undoing(this.token)) return false;
    this.passing = true;
    return true;
  }

  /**
   * The pass ended without handing the waiter a lease (it failed, having undone what it took,
   * or it queued the token in Redis): the waiter goes on with its wait.
   */
  passEnded(): void {
    if (!this.passing) return;
    this.passing = false;
    this.wake();
  }

  /** Hands the waiter a lease; false if it already left (the caller keeps the lease then). */
  handOver(lease: RedisLease): boolean {
    if (this.done) return false;
    this.finish();
    this.resolve(lease);
    return true;
  }

  /**
   * A release granted the key to this waiter's token. The grant is a hold only once its claim
   * is confirmed by Redis: the message may have been read long after it was sent (a stalled
   * event loop, a starved CPU, a subscriber catching up), when the claim window had run out and
   * someone else had taken the key. False if the waiter already left.
   */
  granted(grant: GrantedKey): boolean {
    if (this.done) return false;
    this.grant = grant;
    this.wake();
    return true;
  }

  /**
   * Ends the wait with the caller's signal's reason, or the client's close (called by the
   * client for every waiter in its lines: one listener each on the close signal would cost
   * thousands of listeners, each added by a walk of all the others).
   */
  abort(): void {
    this.giveUp(abortReason(this.keys, this.signal));
  }

  /**
   * Nudges the waiter to try over the network now (remembered if it is busy): ends its loop's
   * sleep, or starts its loop if it has none yet, in a microtask, as a nudge resumes a sleeping
   * loop (the caller may be changing the line).
   */
  wake(): void {
    this.latch.wake();
    if (this.running || this.done) return;
    this.running = true;
    queueMicrotask(() => {
      if (!this.done) this.loop();
    });
  }

  /** Remaining wait in ms. */
  remaining(): number {
    return this.deadline - performance.now();
  }

  private async run(): Promise<void> {
    while (!this.done) {
      // A pass to its token is on its way: it decides, even past the deadline, as an attempt
      // in flight does (`passEnded` or `handOver` wakes it).
      if (this.passing) {
        await this.latch.wait();
        continue;
      }
      // A grant goes first, even past the deadline: Redis gave the key to this token.
      if (this.grant) {
        await this.claimGrant(this.grant);
        continue;
      }
      if (this.expired) return this.lastTry();
      if (this.line.head !== this) {
        // Not our turn: the line wakes us when we become its head (the deadline timer at the
        // latest). No timer of our own: a line of 10,000 must not poll.
        await this.latch.wait();
        continue;
      }
      this.latch.clear();
      // Held or tried here: the holder hands it over or releases it (a nudge), or its lease runs
      // out; the timer also covers a lost release message (nothing to listen for before that).
      if (this.line.busyHere()) {
        await this.sleepWhileBusyHere();
        continue;
      }
      await this.ctx.listen(this.line);
      if (this.done) return;
      if (this.line.busyHere()) {
        await this.sleepWhileBusyHere();
        continue;
      }
      if (this.queuedByHolder) {
        // Queued in Redis by our last holder: a release will grant it to us. Try ourselves
        // only if nothing came (a lost message, or the holder died and the lease expired).
        this.queuedByHolder = false;
        const why = await this.latch.sleep(this.untilDeadline());
        if (why === 'woken' || this.done) continue;
      }
      await this.attempt();
    }
  }

  /** One round trip: the lease, or a sleep until it is worth trying again. */
  private async attempt(): Promise<void> {
    // A pass to its token started while the loop was on its way here: it goes first.
    if (this.passing) return;
    // From the moment it is sent, the attempt may queue the token.
    if (this.ctx.fair) this.enqueued = true;
    this.attempting = true;
    let outcome: Outcome;
    try {
      // Past the deadline: one plain try (no queueing), its answer ends the wait.
      const waitMs = this.expired ? 0 : Math.max(1, this.remaining());
      outcome = await this.ctx.attempt(this.keys, this, waitMs);
    } catch (err) {
      this.attempting = false;
      if (this.done || !(err instanceof LockBackendError) || this.ctx.closing.aborted) throw err;
      if (this.expired) throw err;
      this.outage = this.line.outage = err;
      await this.latch.sleep(outageRetryDelay(++this.failures, this.deadline));
      return;
    }
    this.attempting = false;
    this.outage = this.line.outage = undefined;
    this.failures = 0;
    this.answeredAt = performance.now();
    // Given up while the attempt was in flight: `giveUp` already undid it.
    if (this.done) return;
    if (outcome.kind === 'ok') {
      // Counted as held before leaving the line, so the next head waits for a handoff instead
      // of competing for a key this process holds.
      const lease = this.ctx.hold(this.keys, this, outcome);
      this.finish();
      this.resolve(lease);
      return;
    }
    this.lastPttl = outcome.pttl;
    if (this.expired) return this.giveUp(this.deadlineError());
    this.idleRounds = outcome.pttl > 0 ? 0 : this.idleRounds + 1;
    let delay = retryDelay(outcome.pttl, this.deadline, this.idleRounds);
    // Woken by a release and still busy: on a quorum the release may still be landing on the
    // other nodes (the wake-up came from the first one), so look again soon, once.
    if (this.woken && !this.ctx.fair) delay = Math.min(delay, RELEASE_SETTLE_MS);
    const why = await this.latch.sleep(delay);
    this.woken = why === 'woken';
    if (why === 'timer') this.ctx.timerWakeup();
  }

  /** Confirms a grant: the lease, or (the key went to someone else) back to trying. */
  private async claimGrant(grant: GrantedKey): Promise<void> {
    this.grant = undefined;
    this.attempting = true;
    let taken: Taken | undefined;
    try {
      taken = await this.ctx.claim(this.keys, this, grant);
    } catch (err) {
      this.attempting = false;
      if (this.done || !(err instanceof LockBackendError) || this.ctx.closing.aborted) throw err;
      if (this.expired) throw err;
      // Unknown whether it renewed: the next attempt finds the key ours, or busy.
      this.outage = err;
      await this.latch.sleep(outageRetryDelay(++this.failures, this.deadline));
      return;
    }
    this.attempting = false;
    this.answeredAt = performance.now();
    // Given up while the claim was in flight: `giveUp` already gave the key back.
    if (this.done) return;
    if (taken) {
      const lease = this.ctx.hold(this.keys, this, taken);
      this.finish();
      this.resolve(lease);
      return;
    }
    // The claim window ran out before the grant was read and someone else has the key.
    if (this.expired) return this.giveUp(this.deadlineError());
  }

  /**
   * The deadline passed. A wait ends with what Redis says then, not with an old answer: an
   * attempt in flight decides; otherwise the head, unless it heard from Redis moments ago, tries
   * once more (bounded by commandTimeout), so an outage is never reported as contention.
   */
  onDeadline(): void {
    if (this.done) return;
    this.expired = true;
    if (!this.attempting) this.wake();
  }

  /** The head's last word with Redis after its deadline; any other waiter ends at once. */
  private async lastTry(): Promise<void> {
    const fresh = performance.now() - this.answeredAt < FRESH_ANSWER_MS;
    if (this.line.head !== this || this.line.busyHere() || fresh || this.ctx.closing.aborted) {
      return this.giveUp(this.deadlineError());
    }
    await this.attempt();
  }

  private giveUp(reason: unknown): void {
    if (this.done) return;
    this.finish();
    // An attempt in flight runs before this undo on its connection.
    if ((this.enqueued || this.attempting) && !this.ctx.holds(this.token)) {
      this.ctx.abandon(this.keys, this.token);
    }
    this.reject(reason);
  }

  private finish(): void {
    this.done = true;
    this.deadlineTimer.cancel();
    // Ends a pending sleep now, so its timer does not outlive the wait.
    this.latch.wake();
    if (this.onAbort) this.signal?.removeEventListener('abort', this.onAbort);
    this.line.leave(this);
    this.ctx.dropIfIdle(this.line);
  }

  /**
   * At the deadline: still failing on the backend (its own attempts, or, behind the head, the
   * head's), or contention.
   */
  private deadlineError(): Error {
    const waited = performance.now() - this.startedAt;
    const outage = this.outage ?? (this.line.head === this ? undefined : this.line.outage);
    return outage ?? new LockNotAcquiredError(this.keys, waited, this.lastPttl);
  }

  private sleepWhileBusyHere(): Promise<'woken' | 'timer'> {
    return this.latch.sleep(Math.min(this.untilDeadline(), this.untilHoldsEnd()));
  }

  private untilDeadline(): number {
    return Math.min(MAX_POLL_MS, this.remaining());
  }

  private untilHoldsEnd(): number {
    return this.line.holdsEnd() - performance.now();
  }
}
