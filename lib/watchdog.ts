import { performance } from 'node:perf_hooks';
import { LockLostError, type LockLostReason } from './errors';
import type { Lease, LockClient } from './lock-client';

/**
 * Keeps a lease alive while the method runs: renews every `ttl / 3` (as Redisson does) and stops
 * the moment it is told to. Reports a loss once: the key gone or taken by someone else, renewals
 * failing until the lease ran out, or `maxHold` reached.
 * @internal
 */
export class Watchdog {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly startedAt = performance.now();

  constructor(
    private readonly client: LockClient,
    private readonly lease: Lease,
    private readonly ttl: number,
    private readonly maxHold: number,
    private readonly onLost: (error: LockLostError) => void,
  ) {}

  start(): void {
    this.schedule(this.ttl / 3);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    const held = performance.now() - this.startedAt;
    // Wake up exactly at maxHold if it comes before the next renewal.
    const untilCap = this.maxHold - held;
    this.timer = setTimeout(() => void this.tick(), Math.max(1, Math.min(ms, untilCap)));
    this.timer.unref();
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
