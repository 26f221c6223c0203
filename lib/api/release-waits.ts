import { performance } from 'node:perf_hooks';
import { Chain } from '../chain';

/**
 * How long a locked call's result waits for its release to be answered. A release answers in a
 * round trip; a stalled server would hold every result for the whole `commandTimeout`.
 */
export const RELEASE_ANSWER_WAIT_MS = 100;

/** A caller whose result waits for its hold's release to be answered. */
class PendingResult {
  prev?: PendingResult;
  next?: PendingResult;
  constructor(
    readonly since: number,
    public deliver: (() => void) | undefined,
  ) {}
}

/**
 * Delivers a locked call's result once its release is answered, or `graceMs` after the release
 * was sent, whichever comes first: the release then goes on in the background (the engine's line
 * of the key keeps the hold until it answers, so later callers of this process still wait for
 * it). One shared timer, armed at most once per `graceMs`: no timer per call.
 * @internal
 */
export class ReleaseWaits {
  private readonly waiting = new Chain<PendingResult>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly graceMs = RELEASE_ANSWER_WAIT_MS) {}

  /** `deliver` runs once: at `answered(returned)`, or `graceMs` from now. */
  wait(deliver: () => void): PendingResult {
    const pending = new PendingResult(performance.now(), deliver);
    this.waiting.push(pending);
    if (!this.timer) this.arm(this.graceMs);
    return pending;
  }

  /** The release of `pending` answered: its result goes now, unless it went already. */
  answered(pending: PendingResult): void {
    const deliver = pending.deliver;
    if (!deliver) return;
    pending.deliver = undefined;
    this.waiting.remove(pending);
    deliver();
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.sweep(), Math.max(1, Math.ceil(ms)));
    this.timer.unref();
  }

  /** Delivers the results that waited `graceMs`; oldest first, so it stops at the first too young. */
  private sweep(): void {
    this.timer = undefined;
    const now = performance.now();
    for (let p = this.waiting.first; p; p = this.waiting.first) {
      const waited = now - p.since;
      if (waited < this.graceMs) return this.arm(this.graceMs - waited);
      this.answered(p);
    }
  }
}
