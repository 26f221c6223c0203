import type { LocalWait, LockBackend } from '../core/lock-backend';
import { HOLDER_HERE, LONG_WAIT } from './lock-order.messages';

/** Who holds a key in this process, as the service knows it. @internal */
export interface LocalHolder {
  /** `Class.method`, or `LockService.using/acquire`. */
  readonly site: string;
  /** `Date.now()` when it took the key. */
  readonly acquiredAt: number;
}

/** Waits read per group and sweep, at most: the report is about the oldest. */
const WAITS_PER_SWEEP = 1_000;

/**
 * A caller waiting longer than `afterMs` for a lock is logged once, with who holds it when this
 * instance does (the method and for how long), as go-deadlock prints a long wait's holder. It
 * sweeps the waits the backends report (`waitingNow`) every `afterMs / 2` in the background, so
 * nothing is added to a lock's path.
 * @internal
 */
export class LongWaits {
  private timer?: NodeJS.Timeout;
  /** The waits already reported (key and start), dropped once they are over. */
  private reported = new Set<string>();
  private groups: readonly LockBackend[] = [];

  constructor(
    private readonly afterMs: number,
    private readonly instance: string,
    private readonly holderOf: (backend: LockBackend, key: string) => LocalHolder | undefined,
    private readonly warn: (message: string) => void,
  ) {}

  start(groups: readonly LockBackend[]): void {
    this.groups = groups.filter((g) => g.waitingNow !== undefined);
    if (this.groups.length === 0) return;
    this.timer = setInterval(() => this.sweep(Date.now()), Math.max(50, this.afterMs / 2));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reports every wait older than `afterMs` at `now` that was not reported yet. */
  sweep(now: number): void {
    const seen = new Set<string>();
    for (const backend of this.groups) {
      for (const wait of (backend.waitingNow as (limit: number) => LocalWait[])(WAITS_PER_SWEEP)) {
        if (now - wait.since < this.afterMs) continue;
        const id = `${backend.name}\0${wait.key}\0${wait.since}`;
        seen.add(id);
        if (this.reported.has(id)) continue;
        const holder = this.holderOf(backend, wait.key);
        const here = holder && HOLDER_HERE(holder.site, this.instance, now - holder.acquiredAt);
        this.warn(LONG_WAIT([wait.key], now - wait.since, here));
      }
    }
    // Waits that ended are forgotten; those still on stay reported.
    this.reported = seen;
  }
}
