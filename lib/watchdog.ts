import { performance } from 'node:perf_hooks';
import { LockLostError, type LockLostReason } from './errors';
import { Chain } from './chain';
import type { Lease, LockClient } from './lock-client';

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
    for (let dog = group.first; dog; dog = group.first) {
      if (dog.due > now) {
        this.arm(ms, group, dog.due - now + 1);
        return;
      }
      group.remove(dog);
      dog.wake();
    }
    if (this.groups.get(ms) === group && !group.first) this.groups.delete(ms);
  }
}

const wakeUps = new WakeUps();

/**
 * Keeps a lease alive while the method runs: renews every `ttl / 3` (as Redisson does) and stops
 * the moment it is told to. Reports a loss once: the key gone or taken by someone else, renewals
 * failing until the lease ran out, or `maxHold` reached.
 * @internal
 */
export class Watchdog {
  /** @internal Its place in the wake-up list of its interval. */
  due = 0;
  /** @internal */
  prev?: Watchdog;
  /** @internal */
  next?: Watchdog;
  private stopped = false;
  /** The interval it sleeps for now (its wake-up group), if it sleeps. */
  private sleeping?: number;
  private readonly startedAt = performance.now();

  constructor(
    private readonly client: LockClient,
    private readonly lease: Lease,
    private readonly ttl: number,
    private readonly maxHold: number,
    private readonly onLost: (error: LockLostError) => void,
  ) {}

  start(): void {
    this.schedule(this.ttl / 3, this.startedAt);
  }

  stop(): void {
    this.stopped = true;
    if (this.sleeping !== undefined) wakeUps.remove(this, this.sleeping);
    this.sleeping = undefined;
  }

  /** @internal Called by the shared timers when its sleep is over. */
  wake(): void {
    this.sleeping = undefined;
    void this.tick();
  }

  private schedule(ms: number, now = performance.now()): void {
    if (this.stopped) return;
    const held = now - this.startedAt;
    // Wake up exactly at maxHold if it comes before the next renewal.
    const untilCap = this.maxHold - held;
    // Whole milliseconds: few distinct intervals, so few shared timers.
    this.sleeping = Math.max(1, Math.ceil(Math.min(ms, untilCap)));
    wakeUps.add(this, this.sleeping, now);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const held = performance.now() - this.startedAt;
    const left = this.maxHold - held;
    if (left <= 0) return this.lose('maxHold');
    const next = Math.min(this.ttl, Math.ceil(left));
    try {
      const ok = await this.client.extend(this.lease, next);
      if (this.stopped) return;
      if (!ok) return this.lose('lost');
      this.schedule(next < this.ttl ? next : this.ttl / 3);
    } catch (error) {
      if (this.stopped) return;
      // Redis did not answer: keep trying while the lease may still be ours.
      const remaining = this.lease.validUntil - performance.now();
      if (remaining <= 0) return this.lose('expired', error);
      this.schedule(Math.min(this.ttl / 3, remaining / 2));
    }
  }

  private lose(reason: LockLostReason, cause?: unknown): void {
    if (this.stopped) return;
    this.stop();
    this.onLost(new LockLostError(this.lease.keys, reason, cause));
  }
}
