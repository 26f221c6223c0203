import { performance } from 'node:perf_hooks';
import { LockLostError, type LockLostReason } from '../errors';
import { Chain } from '../chain';

/** Watchdogs one timer wakes at most (their renewals go out batched, see RenewalBatcher). */
const WAKE_UPS_PER_PASS = 256;

/** The watchdogs sleeping for one interval, in the order they went to sleep, and its timer. */
class Group extends Chain<Watchdog> {
  timer?: NodeJS.Timeout;
}

/**
 * Wake-ups of many watchdogs on few timers. Watchdogs that sleep for the same interval wake in
 * the order they went to sleep, so one timer per interval (the head's) serves them all: a hold
 * of a few milliseconds costs two list links, not a timer of its own (the list runs through the
 * watchdogs themselves: no Map or Set churned per hold). A timer whose members all left is not
 * cleared; it fires once, finds nobody due and ends.
 */
class WakeUps {
  private readonly groups = new Map<number, Group>();

  add(dog: Watchdog, ms: number, now: number): void {
    let group = this.groups.get(ms);
    if (!group) {
      group = new Group();
      this.groups.set(ms, group);
    }
    dog.due = now + ms;
    group.push(dog);
    if (!group.timer) this.arm(ms, group, ms);
  }

  remove(dog: Watchdog, ms: number): void {
    this.groups.get(ms)?.remove(dog);
  }

  private arm(ms: number, group: Group, delay: number): void {
    group.timer = setTimeout(() => this.fire(ms, group), Math.max(1, delay));
    group.timer.unref();
  }

  private fire(ms: number, group: Group): void {
    group.timer = undefined;
    // A timer may fire a little early: anything due within the next millisecond runs now.
    const now = performance.now() + 1;
    // One pass wakes those that were asleep when it began: one that goes back to sleep at once
    // (due "now" again on a clock that has not moved) waits for the next timer.
    const last = group.last;
    let woken = 0;
    for (let dog = group.first; dog; dog = group.first) {
      if (dog.due > now) {
        if (!group.timer) this.arm(ms, group, dog.due - now + 1);
        return;
      }
      // Many due at once (100,000 holds taken within seconds, or a pause): the rest wake at the
      // next timer, 1 ms on, so timers and I/O get their turn in between.
      if (woken === WAKE_UPS_PER_PASS) {
        if (!group.timer) this.arm(ms, group, 1);
        return;
      }
      group.remove(dog);
      woken++;
      dog.wake();
      if (dog === last) break;
    }
    if (group.first) {
      if (!group.timer) this.arm(ms, group, group.first.due - performance.now());
    } else if (this.groups.get(ms) === group) this.groups.delete(ms);
  }
}

const wakeUps = new WakeUps();

/** All a watchdog needs of the lock engine. @internal */
export interface LeaseRenewer {
  /**
   * Renews the lease to `ttl` ms from now; false when it is no longer held. `batched`: it may
   * wait a few ms to go out with other renewals (the watchdog's own renewals only).
   */
  extend(lease: WatchedLease, ttl: number, batched?: boolean): Promise<boolean>;
}

/** Told once when the watchdog finds the lock lost (an object, not a closure per hold). */
export interface LossListener {
  onLost(error: LockLostError): void;
}

/** Told the moment the lease is found over between renewals (see `WatchedLease.watcher`). */
export interface LeaseEndListener {
  leaseEnded(): void;
}

/** What a watchdog watches: the keys (for errors) and until when the lease is certainly ours. */
export interface WatchedLease {
  readonly keys: readonly string[];
  readonly validUntil: number;
  /**
   * The watchdog while it watches: the engine tells it when it finds the lease lost on its own
   * (a grant's claim, a fence refill), so the loss is reported then, not at the next renewal.
   */
  watcher?: LeaseEndListener;
}

/** A hold as its watchdog sees it: its lease, what renews it, and who hears of its loss. */
export interface WatchedHold extends LossListener {
  readonly lease: WatchedLease;
  readonly client: LeaseRenewer;
}

/** The watchdog's yes/no state, as bits of one field (a field each cost 8 bytes per hold). */
const STOPPED = 1;
/** A renewal is on its way (a wake-up meanwhile only checks the expiry). */
const RENEWING = 2;
/** The last renewal was cut to what was left of maxHold. */
const CAPPED = 4;
/** It renews (else it only reports the lease's end at expiry). */
const RENEWS = 8;

/**
 * Watches a lease while the method runs. With renewals on it renews every `ttl / 3` (as Redisson
 * does), sooner when less than twice that is left of the lease, and stops the moment it is told
 * to. Either way it reports a loss once, no later than the lease's local expiry (whether or not
 * Redis answered): the key gone or taken by someone else, the lease run out (renewals failing or
 * late, an event loop paused past it, or no renewals), or `maxHold` reached.
 * @internal
 */
export class Watchdog implements LeaseEndListener {
  /** @internal Its place in the wake-up list of its interval. */
  due = 0;
  /** @internal */
  prev?: Watchdog;
  /** @internal */
  next?: Watchdog;
  /** The interval it sleeps for now (its wake-up group), if it sleeps. */
  private sleeping?: number;
  /** STOPPED, RENEWING, CAPPED, RENEWS. */
  private flags: number;
  /**
   * When maxHold is reached (`performance.now()` clock); undefined without one: a fractional
   * number in a field is a heap number of its own, which most holds (no maxHold) need not pay.
   */
  private readonly capAt: number | undefined;

  constructor(
    private readonly hold: WatchedHold,
    private readonly ttl: number,
    maxHold: number,
    /** false: no renewals, only the report at expiry. */
    renews: boolean,
  ) {
    this.flags = renews ? RENEWS : 0;
    this.capAt = maxHold === Infinity ? undefined : performance.now() + maxHold;
  }

  private get stopped(): boolean {
    return (this.flags & STOPPED) !== 0;
  }

  private get renewing(): boolean {
    return (this.flags & RENEWING) !== 0;
  }

  private set renewing(on: boolean) {
    this.flags = on ? this.flags | RENEWING : this.flags & ~RENEWING;
  }

  private get capped(): boolean {
    return (this.flags & CAPPED) !== 0;
  }

  private get renews(): boolean {
    return (this.flags & RENEWS) !== 0;
  }

  start(): void {
    const now = performance.now();
    const untilExpiry = this.untilExpiry(now);
    // Without renewals it is checked when it would run out.
    const first = this.renews ? this.untilNextRenewal(untilExpiry) : untilExpiry;
    this.hold.lease.watcher = this;
    this.schedule(first, now);
  }

  stop(): void {
    this.flags |= STOPPED;
    this.unschedule();
    if (this.hold.lease.watcher === this) this.hold.lease.watcher = undefined;
  }

  /**
   * A server of the lease came back (reconnected): renew now rather than at the next interval,
   * so a lease lost with the server's data (a restart without persistence) is reported within a
   * round trip, not up to ttl / 3 later. Nothing for a watchdog that does not renew, or whose
   * renewal is already on its way.
   */
  renewNow(): void {
    if (this.stopped || this.renewing || !this.renews) return;
    this.unschedule();
    void this.tick();
  }

  /** The engine found the lease lost (not by a renewal of this watchdog's): reported now. */
  leaseEnded(): void {
    this.lose('lost');
  }

  /** @internal Called by the shared timers when its sleep is over. */
  wake(): void {
    this.sleeping = undefined;
    if (this.renewing) this.checkExpiry();
    else void this.tick();
  }

  private untilCap(now: number): number {
    return this.capAt === undefined ? Infinity : this.capAt - now;
  }

  private untilExpiry(now: number): number {
    return this.hold.lease.validUntil - now;
  }

  /**
   * Every ttl / 3, but never later than half of what is left of the lease: a lease that came
   * with less left (an acquire round or a renewal answered late, on a loaded machine) is renewed
   * while its renewal can still answer in time, not found over at the next interval.
   */
  private untilNextRenewal(untilExpiry: number): number {
    return Math.min(this.ttl / 3, untilExpiry / 2);
  }

  private schedule(ms: number, now = performance.now()): void {
    if (this.stopped) return;
    // Wake up exactly at maxHold if it comes before the next renewal.
    const untilCap = this.untilCap(now);
    // Whole milliseconds: few distinct intervals, so few shared timers.
    this.sleeping = Math.max(1, Math.ceil(Math.min(ms, untilCap)));
    wakeUps.add(this, this.sleeping, now);
  }

  private unschedule(): void {
    if (this.sleeping !== undefined) wakeUps.remove(this, this.sleeping);
    this.sleeping = undefined;
  }

  /** While a renewal is out: the lease ran out with no answer, or the wait goes on. */
  private checkExpiry(): void {
    const now = performance.now();
    if (this.untilExpiry(now) <= 0) return this.lose('expired');
    this.schedule(this.untilExpiry(now), now);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const now = performance.now();
    const left = this.untilCap(now);
    // The last renewal asked only for what was left of maxHold: its end is maxHold's.
    if (left <= 0 || (this.capped && this.untilExpiry(now) <= 0)) return this.lose('maxHold');
    // Checked before anything is sent: after an event-loop pause the lease may be over.
    if (this.untilExpiry(now) <= 0) return this.lose('expired');
    if (!this.renews) return this.schedule(this.untilExpiry(now), now);
    const next = Math.min(this.ttl, Math.ceil(left));
    // Its holder extended it past what a renewal gives (`extend(ms)` on its handle): renewing
    // now would shorten it. Wait until it is down to the usual (ttl - ttl / 3 left). A renewal
    // capped by maxHold does shorten it, on purpose: the lease ends at maxHold.
    const longer = this.untilExpiry(now) - next;
    if (next === this.ttl && longer > 0) {
      return this.schedule(longer + this.untilNextRenewal(next), now);
    }
    this.renewing = true;
    // Wakes at the local expiry if the renewal has not answered by then.
    this.schedule(this.untilExpiry(now), now);
    let ok: boolean;
    try {
      ok = await this.hold.client.extend(this.hold.lease, next, true);
    } catch (error) {
      this.renewing = false;
      if (this.stopped) return;
      this.unschedule();
      // Redis did not answer: keep trying while the lease may still be ours.
      const remaining = this.untilExpiry(performance.now());
      if (remaining <= 0) return this.lose('expired', error);
      this.schedule(this.untilNextRenewal(remaining));
      return;
    }
    this.renewing = false;
    if (this.stopped) return;
    this.unschedule();
    if (!ok) return this.lose('lost');
    if (next < this.ttl) {
      // Capped by maxHold: no more renewals; it ends with this lease.
      this.flags |= CAPPED;
      this.schedule(this.untilExpiry(performance.now()));
    } else this.schedule(this.untilNextRenewal(this.untilExpiry(performance.now())));
  }

  private lose(reason: LockLostReason, cause?: unknown): void {
    if (this.stopped) return;
    this.stop();
    this.hold.onLost(new LockLostError(this.hold.lease.keys, reason, cause));
  }
}
