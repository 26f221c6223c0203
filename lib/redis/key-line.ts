import { performance } from 'node:perf_hooks';
import { Chain } from '../chain';
import type { RedisLease } from './redis-lease';

/** What a key line needs of a waiting caller. */
export interface LineWaiter {
  readonly token: string;
  /** Nudges it to try over the network now. */
  wake(): void;
  /** Its links in the line (set by the line only). */
  prev?: this;
  next?: this;
}

/**
 * The callers waiting in one line, oldest first, linked through the waiters themselves, and by
 * token: joining, leaving from anywhere and finding a token cost the same whatever the length
 * (a grant in a line of 10,000 costs what it costs in a line of 2). Also the line's release
 * subscription, which lives only while anyone waits.
 */
class Waiters<W extends LineWaiter> extends Chain<W> {
  size = 0;
  /** The subscription to the key's release channel (quorum groups), while anyone waits. */
  listener?: LineListener;
  /** Whether that subscription is active (its head hears every PUBLISH). */
  listening = false;
  /** The backend error of the head's last attempt, while Redis keeps failing it. */
  outage?: Error;
  private readonly byToken = new Map<string, W>();

  add(waiter: W, first: boolean): void {
    if (first) this.unshift(waiter);
    else this.push(waiter);
    this.byToken.set(waiter.token, waiter);
    this.size++;
  }

  /** Takes `waiter` out; false if it was not in the line. */
  delete(waiter: W): boolean {
    if (!this.remove(waiter)) return false;
    if (this.byToken.get(waiter.token) === waiter) this.byToken.delete(waiter.token);
    this.size--;
    return true;
  }

  of(token: string): W | undefined {
    return this.byToken.get(token);
  }
}

/**
 * A key's run of local handoffs and what its process knows of other processes' waiters: kept
 * apart from the line because most keys never pass in memory (a held key costs memory for each
 * field it has).
 */
class HandoffRun {
  /** Consecutive local handoffs since the key last went public. */
  handoffs = 0;
  /**
   * Callers of this process already waiting when the key came here after a wait (a grant, an
   * attempt): each may have it once in this run, past the bound (see `KeyLine.turnBegins`).
   */
  turn = 0;
  /** A waiter of another process may be queued in Redis for the key (single node). */
  othersQueued = true;
  /**
   * When (performance.now()) the script that last found nobody else queued was sent: a process
   * that has not listened for notices since then cannot know who queued after it.
   */
  quiet = Infinity;
  /** Times this process was told a waiter of another process queued (see `nobodyElseSince`). */
  notices = 0;
  /** The REFILL of the fences of the hold passed on in memory on its way, if any. */
  refilling?: Promise<void>;
}

/** What a key that never passed in memory knows: read only (a line writes to a run of its own). */
const NO_RUN: Readonly<HandoffRun> = Object.freeze(new HandoffRun());

/** A key's subscription to its release channel. */
export interface LineListener {
  readonly ready: Promise<void>;
  stop(): void;
}

/**
 * One key's state in this process: its holds, the callers waiting for it in FIFO order, and the
 * first tries in flight. Only the head waiter competes over the network; the others wait for a
 * local handoff or to become the head. Rules it enforces:
 * - a hold counts only while its lease is valid: a holder that stalled, lost the key or forgot
 *   to release is not waited for past its lease (Redis decides then);
 * - whenever the key stops being busy here, the head is woken to try;
 * - a new head is always woken (when the key is busy here it only sleeps, with a timer, until
 *   the hold ends), so the callers behind the head need no timer of their own;
 * - consecutive local handoffs are counted, so the key goes public after `localHandoffs` (on a
 *   single node: once a waiter of another process is known to be queued).
 * @internal
 */
export class KeyLine<W extends LineWaiter = LineWaiter> {
  /** Made when the first caller waits (most lines only ever count a hold). */
  private waiters?: Waiters<W>;
  /**
   * Holds of this key by this process whose release has not reached Redis yet: usually 0-1, so
   * the first is a field and only further ones take an array.
   */
  private held?: RedisLease;
  private moreHeld?: RedisLease[];
  /** First tries in flight (callers arriving meanwhile queue behind them). */
  private trying = 0;
  /**
   * Its run of local handoffs and what it knows of other processes' waiters: made the first time
   * any of it departs from the defaults (most keys are taken and given back and never need it).
   */
  private run?: HandoffRun;

  constructor(readonly key: string) {}

  get head(): W | undefined {
    return this.waiters?.first;
  }

  /**
   * Why Redis failed the head's last attempt (undefined once Redis answers again): what a
   * caller behind it, who never asks Redis itself, meets too.
   */
  get outage(): Error | undefined {
    return this.waiters?.outage;
  }

  set outage(error: Error | undefined) {
    if (this.waiters) this.waiters.outage = error;
  }

  /** Callers waiting. */
  get length(): number {
    return this.waiters?.size ?? 0;
  }

  /** Queues a waiter: at the end, or `first` (ahead of those that queued behind its try). */
  join(waiter: W, first: boolean): void {
    (this.waiters ??= new Waiters<W>()).add(waiter, first);
  }

  /**
   * Takes a waiter out; a new head is woken: it competes now unless the key is busy here (then
   * it waits for the hold's end on a timer of its own, which a lost release message cannot
   * outlast).
   */
  leave(waiter: W): void {
    const waiters = this.waiters;
    if (!waiters) return;
    const wasHead = waiters.first === waiter;
    if (!waiters.delete(waiter)) return;
    if (waiters.size === 0) this.stopListening();
    else if (wasHead) waiters.first!.wake();
  }

  /** The waiter holding `token`, if it still waits. */
  waiterOf(token: string): W | undefined {
    return this.waiters?.of(token);
  }

  startTry(): void {
    this.trying++;
  }

  /** A first try ended; the head tries now if the key is not busy here. */
  endTry(): void {
    this.trying--;
    if (!this.busyHere()) this.head?.wake();
  }

  /** A caller of this process holds the key now. */
  hold(lease: RedisLease): void {
    if (!this.held) this.held = lease;
    else (this.moreHeld ??= []).push(lease);
  }

  /** The key passed from one caller of this process to the next: the hold goes on. */
  passHold(from: RedisLease, to: RedisLease): void {
    if (this.held === from) return void (this.held = to);
    const i = this.moreHeld ? this.moreHeld.indexOf(from) : -1;
    if (i >= 0) this.moreHeld![i] = to;
    else this.hold(to);
  }

  /**
   * Redis has the key back (or it went to another process), so the hold is over. `wakeHead`:
   * whether the head must be told to try (a listening head hears the release itself).
   */
  endHold(lease: RedisLease, wakeHead: boolean): void {
    this.forget(lease);
    if (wakeHead && !this.heldHere()) this.head?.wake();
  }

  /** A hold was found lost or ran out: the head must not wait for its release. */
  holdEnded(): void {
    if (!this.busyHere()) this.head?.wake();
  }

  /** Whether a caller of this process holds the key with a lease still valid. */
  heldHere(now?: number): boolean {
    if (this.held === undefined && !this.moreHeld?.length) return false;
    now ??= performance.now();
    let held = false;
    const more = this.moreHeld;
    if (more) {
      for (let i = more.length - 1; i >= 0; i--) {
        if (more[i].validAt(now)) held = true;
        // Over: it can no longer hold anything up.
        else more.splice(i, 1);
      }
    }
    if (this.held) {
      if (this.held.validAt(now)) held = true;
      else this.forget(this.held);
    }
    return held;
  }

  /** Held here or being tried here: a caller arriving now queues behind. */
  busyHere(): boolean {
    return this.trying > 0 || this.heldHere();
  }

  /** Held, tried or awaited here: a one-shot try of this process would only compete with it. */
  occupied(): boolean {
    return this.length > 0 || this.busyHere();
  }

  /** When the first valid hold here runs out (Infinity if none). */
  holdsEnd(now = performance.now()): number {
    let end = this.held?.validAt(now) ? this.held.validUntil : Infinity;
    if (this.moreHeld) {
      for (const l of this.moreHeld) if (l.validAt(now)) end = Math.min(end, l.validUntil);
    }
    return end;
  }

  /**
   * Whether the key may pass to a caller of this process once more before going public: fewer
   * than `limit` times in a row or than the callers of this turn, or (`queued`: single node,
   * whose waiters queue in Redis, and this process has heard every notice since `quietSince`)
   * any number of times while no waiter of another process is known to be queued. Until a
   * script found nobody else queued, someone may be. A `limit` of 0 keeps strict FIFO across
   * processes: never.
   */
  mayHandOff(limit: number, queued: boolean): boolean {
    if (limit <= 0) return false;
    return this.passesLeft(limit) > 0 || (queued && !this.othersMayWait);
  }

  /**
   * Local passes this run may still make while a waiter of another process is queued (at
   * least `limit` in a row, or one per caller of the turn).
   */
  passesLeft(limit: number): number {
    const { handoffs, turn } = this.run ?? NO_RUN;
    return limit <= 0 ? 0 : Math.max(limit, turn) - handoffs;
  }

  /**
   * The key came to `holder` after a wait (from another process, or freed in Redis): a turn
   * begins, in which the callers of this process already waiting behind it, at most `most`, may
   * each have the key once before it goes to a waiter of another process, even past
   * `localHandoffs`. So while a process has no more callers waiting than that, each of them
   * waits one round of the callers waiting in every process (strict FIFO's own bound), and the
   * key crosses processes once per process and round, not once per `localHandoffs` holds;
   * callers arriving during the turn wait for the next one. `most` bounds what a waiter of
   * another process waits for one turn of a process with a long line.
   */
  turnBegins(holder: string, most: number): void {
    const behind = Math.min(this.length - (this.waiterOf(holder) ? 1 : 0), most);
    if (behind > 0) this.runNow().turn = behind;
    else if (this.run) this.run.turn = 0;
  }

  /** A waiter of another process queued for the key (or may have: a conservative guess). */
  othersWait(): void {
    const run = this.runNow();
    run.othersQueued = true;
    run.notices++;
  }

  /** Whether a waiter of another process may be queued (so the key goes public soon). */
  get othersMayWait(): boolean {
    return (this.run ?? NO_RUN).othersQueued;
  }

  /** Marks the moment a script that looks at the Redis queue is sent (see `nobodyElseSince`). */
  noticeMark(): number {
    return (this.run ?? NO_RUN).notices;
  }

  /**
   * A script sent at `mark` found no waiter of another process queued. Believed only if no
   * notice came since it was sent: a notice heard meanwhile may be of a waiter that queued after
   * the script ran (the notice and the reply come on different connections).
   */
  nobodyElseSince(mark: number, sentAt: number): void {
    if (mark !== this.noticeMark()) return;
    const run = this.runNow();
    run.othersQueued = false;
    run.quiet = sentAt;
  }

  /** When the script that last found nobody else queued was sent (Infinity: none did). */
  get quietSince(): number {
    return (this.run ?? NO_RUN).quiet;
  }

  /**
   * The hold of `token` this line counts (one at most: a pass in memory replaces it), released
   * or not: a released one is still being passed on (or given back), so fences reserved for the
   * token belong to it.
   */
  leaseOf(token: string): RedisLease | undefined {
    if (this.held?.token === token) return this.held;
    return this.moreHeld?.find((l) => l.token === token);
  }

  /** The refill on its way (settled once its answer is applied), if any. */
  get refilling(): Promise<void> | undefined {
    return this.run?.refilling;
  }

  /**
   * Sends a refill (`send`: settles once its answer is applied, never rejects) unless one is on
   * its way: one at a time.
   */
  refillOnce(send: () => Promise<void>): void {
    const run = this.runNow();
    if (run.refilling) return;
    const pending = send().then(() => {
      if (run.refilling === pending) run.refilling = undefined;
    });
    run.refilling = pending;
  }

  handedOff(): void {
    this.runNow().handoffs++;
  }

  wentPublic(): void {
    if (!this.run) return;
    this.run.handoffs = 0;
    this.run.turn = 0;
  }

  /** Its handoff run, made now if it has none yet (a first write departs from `NO_RUN`). */
  private runNow(): HandoffRun {
    return (this.run ??= new HandoffRun());
  }

  /** Nothing held, tried or awaited here: the line can go. */
  idle(): boolean {
    return this.trying <= 0 && this.length === 0 && !this.heldHere();
  }

  /** Whether the head hears the key's releases (so it need not be woken directly). */
  get hearsReleases(): boolean {
    return this.waiters?.listening ?? false;
  }

  /** Subscribes the line to the key's releases once (`subscribe` is called at most once). */
  listen(subscribe: () => LineListener): Promise<void> {
    const waiters = (this.waiters ??= new Waiters<W>());
    if (!waiters.listener) {
      const listener = subscribe();
      waiters.listener = listener;
      listener.ready.then(
        () => {
          if (waiters.listener === listener) waiters.listening = true;
        },
        () => undefined,
      );
    }
    return waiters.listener.ready;
  }

  stopListening(): void {
    const waiters = this.waiters;
    if (!waiters) return;
    waiters.listener?.stop();
    waiters.listener = undefined;
    waiters.listening = false;
  }

  /** Stops counting `lease` (the first of the others takes the field). */
  private forget(lease: RedisLease): void {
    if (this.held === lease) {
      this.held = this.moreHeld?.pop();
      return;
    }
    const i = this.moreHeld ? this.moreHeld.indexOf(lease) : -1;
    if (i >= 0) this.moreHeld!.splice(i, 1);
  }
}
