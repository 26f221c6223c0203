import type { Logger } from '@nestjs/common';
import { Chain } from '../chain';
import type { Lease } from '../core/lock-backend';
import { LockBackendError, LockError, LockLostError, LockNotAcquiredError } from '../errors';
import { settleTo } from '../settle-to';
import { Watchdog } from '../watchdog/watchdog';
import { ActiveHold, type HoldOwner } from './active-hold';
import { type Behaviour, leaseTtl } from './call-behaviour';
import { HoldTimes, withRetryEstimate } from './hold-times';
import type { LockEvents } from './lock-events';
import { ReleaseWaits } from './release-waits';

/** What `finish` returns for a hold already finished. */
const DONE: Promise<void> = Promise.resolve();

/**
 * The holds in progress of one `LockService`, from the lease taken to the release sent: each
 * starts with its watchdog and the `acquired` event, may learn its lock was lost, and finishes
 * with a release (kept until `minHold`), the `released` (or `error`) event and its hold time
 * recorded for the Retry-After of later busy answers. Shutdown ends them all.
 * @internal
 */
export class ActiveHolds {
  /** Holds in progress, oldest first, for the board and shutdown. */
  private readonly holds = new Chain<ActiveHold>();
  /** Recent hold times per client group, for the Retry-After of busy answers. */
  private readonly holdTimes = new Map<string, HoldTimes>();
  /** Results of locked calls waiting (a bounded time) for their release to answer. */
  private readonly releaseWaits = new ReleaseWaits();
  private shuttingDown = false;
  /** What every hold calls back: one object for all of them, no closure per hold. */
  private readonly owner: HoldOwner = {
    lost: (hold, error) => this.lost(hold, error),
    finish: (hold) => this.finish(hold),
    leave: (hold, done) => this.leave(hold, done),
  };

  constructor(
    private readonly events: LockEvents,
    private readonly logger: Logger,
  ) {}

  /** The holds right now, oldest first. */
  *[Symbol.iterator](): IterableIterator<ActiveHold> {
    for (let hold = this.holds.first; hold; hold = hold.next) yield hold;
  }

  /** A lease taken for a call that behaves as `b`: its hold, watched, told to `acquired`. */
  start(lease: Lease, b: Behaviour): ActiveHold {
    const hold = new ActiveHold(lease, b.client, this.owner);
    hold.minHold = b.minHold;
    hold.mode = b.mode;
    hold.permits = b.permits;
    hold.site = b.site;
    // Without renewals it still reports the lease's end, so the signal never outlives it.
    hold.watchdog = new Watchdog(hold, leaseTtl(b), b.maxHold, b.watchdog);
    hold.watchdog.start();
    this.holds.push(hold);
    if (this.shuttingDown) hold.abort(new LockLostError(lease.keys, 'shutdown'));
    if (this.events.acquired && this.events.wants('acquired')) {
      const { keys, fences, waitedMs } = lease;
      this.events.emit('acquired', { keys, client: b.clientName, fence: fences[0], waitedMs });
    }
    return hold;
  }

  /** A busy answer gets the keys' usual hold here as its retry estimate. */
  estimated(err: unknown, b: Behaviour): unknown {
    if (!(err instanceof LockNotAcquiredError)) return err;
    return withRetryEstimate(err, this.holdTimes.get(b.clientName), b.segments);
  }

  /** The hold of `lease`, if any, learns now that its lock is gone. Whether a hold had it. */
  leaseLost(lease: Lease): boolean {
    for (let h = this.holds.first; h; h = h.next) {
      if (h.lease !== lease) continue;
      h.watchdog?.stop();
      this.lost(h, new LockLostError(lease.keys, 'lost'));
      return true;
    }
    return false;
  }

  /** Every hold of `group` renews now (a Redis connection of it is ready again). */
  renewGroup(group: string): void {
    for (let h = this.holds.first; h; h = h.next) {
      if (h.client.name === group) h.watchdog?.renewNow();
    }
  }

  /** Shutdown began: a hold that starts from now on is aborted at once. */
  shutdown(): void {
    this.shuttingDown = true;
  }

  /** Every hold in progress ends: aborted as lost by shutdown, then released. */
  endAll(): Promise<void> {
    return Promise.all(
      [...this].map((hold) => {
        hold.abort(new LockLostError(hold.lease.keys, 'shutdown'));
        return this.finish(hold);
      }),
    ).then(() => undefined);
  }

  /**
   * Stops renewals and releases; a failed release is logged, never thrown over the result. Not
   * async itself (a promise and an await less per call): the release's own promise carries on.
   */
  finish(hold: ActiveHold): Promise<void> {
    if (!hold.active) return DONE;
    return new Promise((resolve) => this.finishThen(hold, resolve));
  }

  /** A call in `hold` ended: the last one out finishes it (`finishThen`); the others go at once. */
  leave(hold: ActiveHold, done: () => void): void {
    if (hold.active && --hold.calls > 0) return done();
    this.finishThen(hold, done, false);
  }

  /**
   * `finish`, then `done` (at once for a hold already finished). Never throws. `untilAnswered`
   * false (a locked call's result): `done` runs once the release answers or at most
   * RELEASE_ANSWER_WAIT_MS after it was sent, the release going on in the background (with Redis
   * stalled, a result would otherwise wait the whole commandTimeout).
   */
  finishThen(hold: ActiveHold, done: () => void, untilAnswered = true): void {
    if (!hold.active) return done();
    this.holds.remove(hold);
    hold.watchdog?.stop();
    hold.active = false;
    const { lease, client } = hold;
    const held = Date.now() - lease.acquiredAt;
    // Kept for minHold, the key is busy that long whatever the method took.
    this.recordHold(client.name, lease.keys, Math.max(held, hold.minHold));
    const pending = untilAnswered ? undefined : this.releaseWaits.wait(done);
    const after = (err?: unknown) => {
      if (err !== undefined) {
        const why = err instanceof LockError || err instanceof Error ? err.message : String(err);
        this.logger.warn(`Release failed, the lease will expire by itself: ${why}`);
        if (this.events.error && this.events.wants('error')) this.releaseFailed(hold, err);
      }
      this.released(hold, held);
      if (pending) this.releaseWaits.answered(pending);
      else done();
    };
    try {
      if (hold.minHold > held) settleTo(client.releaseByExpiry(lease, hold.minHold - held), after);
      else client.releaseThen(lease, after);
    } catch (err) {
      after(err ?? new Error('release failed'));
    }
  }

  private lost(hold: ActiveHold, error: LockLostError): void {
    hold.abort(error);
    if (error.reason === 'expired') hold.client.leaseEnded(hold.lease);
    this.logger.warn(error.message);
    if (this.events.lost && this.events.wants('lost')) {
      const { keys, fences } = hold.lease;
      this.events.emit('lost', { keys, client: hold.client.name, fence: fences[0], error });
    }
  }

  private recordHold(client: string, keys: readonly string[], ms: number): void {
    let times = this.holdTimes.get(client);
    if (!times) this.holdTimes.set(client, (times = new HoldTimes()));
    for (const key of keys) times.record(key, ms);
  }

  /** The `released` event, once the release was sent (whether or not it succeeded). */
  private released(hold: ActiveHold, heldMs: number): void {
    if (this.events.released && this.events.wants('released')) {
      const { keys, fences } = hold.lease;
      this.events.emit('released', { keys, client: hold.client.name, fence: fences[0], heldMs });
    }
  }

  private releaseFailed(hold: ActiveHold, err: unknown): void {
    const { keys } = hold.lease;
    const error =
      err instanceof LockBackendError
        ? err
        : new LockBackendError(
            keys,
            [err instanceof Error ? err : new Error(String(err))],
            'release',
          );
    this.events.emit('error', { keys, client: hold.client.name, operation: 'release', error });
  }
}
