import { performance } from 'node:perf_hooks';
import type { Lease } from './lease';

/** What a key line needs of a waiting caller. */
export interface LineWaiter {
  readonly token: string;
  /** Nudges it to try over the network now. */
  wake(): void;
}

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
 * - consecutive local handoffs are counted, so the key goes public after `localHandoffs` (on a
 *   single node: once a waiter of another process is known to be queued).
 * @internal
 */
export class KeyLine<W extends LineWaiter = LineWaiter> {
  private readonly waiters: W[] = [];
  /** Holds of this key by this process whose release has not reached Redis yet (usually 0-1). */
  private readonly holds: Lease[] = [];
  /** First tries in flight (callers arriving meanwhile queue behind them). */
  private trying = 0;
  /** Consecutive local handoffs since the key last went public. */
  private handoffs = 0;
  /** A waiter of another process may be queued in Redis for the key (single node). */
  private othersQueued = false;
  /** Times this process was told a waiter of another process queued (see `nobodyElseSince`). */
  private notices = 0;
  /** A REFILL of the fences of the hold passed on in memory is on its way. */
  private refilling = false;
  /** The subscription to the key's release channel (quorum groups), while anyone waits. */
  private listener?: LineListener;
  /** Whether that subscription is active (its head hears every PUBLISH). */
  private listening = false;

  constructor(readonly key: string) {}

  get head(): W | undefined {
    return this.waiters[0];
  }

  /** Callers waiting. */
  get length(): number {
    return this.waiters.length;
  }

  /** Queues a waiter: at the end, or `first` (ahead of those that queued behind its try). */
  join(waiter: W, first: boolean): void {
    if (first) this.waiters.unshift(waiter);
    else this.waiters.push(waiter);
  }

  /** Takes a waiter out; a new head competes now unless the key is busy here. */
  leave(waiter: W): void {
    const i = this.waiters.indexOf(waiter);
    if (i < 0) return;
    this.waiters.splice(i, 1);
    if (this.waiters.length === 0) this.stopListening();
    else if (i === 0 && !this.heldHere()) this.waiters[0].wake();
  }

  /** The waiter holding `token`, if it still waits. */
  waiterOf(token: string): W | undefined {
    return this.waiters.find((w) => w.token === token);
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
  hold(lease: Lease): void {
    this.holds.push(lease);
  }

  /** The key passed from one caller of this process to the next: the hold goes on. */
  passHold(from: Lease, to: Lease): void {
    const i = this.holds.indexOf(from);
    if (i >= 0) this.holds[i] = to;
    else this.holds.push(to);
  }

  /**
   * Redis has the key back (or it went to another process), so the hold is over. `wakeHead`:
   * whether the head must be told to try (a listening head hears the release itself).
   */
  endHold(lease: Lease, wakeHead: boolean): void {
    const i = this.holds.indexOf(lease);
    if (i >= 0) this.holds.splice(i, 1);
    if (wakeHead && !this.heldHere()) this.head?.wake();
  }

  /** A hold was found lost or ran out: the head must not wait for its release. */
  holdEnded(): void {
    if (!this.busyHere()) this.head?.wake();
  }

  /** Whether a caller of this process holds the key with a lease still valid. */
  heldHere(now = performance.now()): boolean {
    let held = false;
    for (let i = this.holds.length - 1; i >= 0; i--) {
      if (this.holds[i].validAt(now)) held = true;
      // Over: it can no longer hold anything up.
      else this.holds.splice(i, 1);
    }
    return held;
  }

  /** Held here or being tried here: a caller arriving now queues behind. */
  busyHere(): boolean {
    return this.trying > 0 || this.heldHere();
  }

  /** Held, tried or awaited here: a one-shot try of this process would only compete with it. */
  occupied(): boolean {
    return this.waiters.length > 0 || this.busyHere();
  }

  /** When the first valid hold here runs out (Infinity if none). */
  holdsEnd(now = performance.now()): number {
    let end = Infinity;
    for (const l of this.holds) if (l.validAt(now)) end = Math.min(end, l.validUntil);
    return end;
  }

  /**
   * Whether the key may pass to a caller of this process once more before going public: fewer
   * than `limit` times in a row, or (`queued`: single node, whose waiters queue in Redis) any
   * number of times while no waiter of another process is known to be queued. A `limit` of 0
   * keeps strict FIFO across processes: never.
   */
  mayHandOff(limit: number, queued: boolean): boolean {
    return this.handoffs < limit || (queued && limit > 0 && !this.othersQueued);
  }

  /** A waiter of another process queued for the key (or may have: a conservative guess). */
  othersWait(): void {
    this.othersQueued = true;
    this.notices++;
  }

  /** Whether a waiter of another process may be queued (so the key goes public soon). */
  get othersMayWait(): boolean {
    return this.othersQueued;
  }

  /** Marks the moment a script that looks at the Redis queue is sent (see `nobodyElseSince`). */
  noticeMark(): number {
    return this.notices;
  }

  /**
   * A script sent at `mark` found no waiter of another process queued. Believed only if no
   * notice came since it was sent: a notice heard meanwhile may be of a waiter that queued after
   * the script ran (the notice and the reply come on different connections).
   */
  nobodyElseSince(mark: number): void {
    if (mark === this.notices) this.othersQueued = false;
  }

  /** The hold of `token` in progress (not released yet), if any. */
  holdOf(token: string): Lease | undefined {
    for (const l of this.holds) if (l.token === token && !l.released) return l;
    return undefined;
  }

  /** Starts a refill unless one is on its way; false if one is. */
  startRefill(): boolean {
    if (this.refilling) return false;
    this.refilling = true;
    return true;
  }

  endRefill(): void {
    this.refilling = false;
  }

  handedOff(): void {
    this.handoffs++;
  }

  wentPublic(): void {
    this.handoffs = 0;
  }

  /** Nothing held, tried or awaited here: the line can go. */
  idle(): boolean {
    return this.trying <= 0 && this.waiters.length === 0 && !this.heldHere();
  }

  /** Whether the head hears the key's releases (so it need not be woken directly). */
  get hearsReleases(): boolean {
    return this.listening;
  }

  /** Subscribes the line to the key's releases once (`subscribe` is called at most once). */
  listen(subscribe: () => LineListener): Promise<void> {
    if (!this.listener) {
      const listener = subscribe();
      this.listener = listener;
      listener.ready.then(
        () => {
          if (this.listener === listener) this.listening = true;
        },
        () => undefined,
      );
    }
    return this.listener.ready;
  }

  stopListening(): void {
    this.listener?.stop();
    this.listener = undefined;
    this.listening = false;
  }
}
