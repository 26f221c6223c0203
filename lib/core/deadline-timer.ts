import { performance } from 'node:perf_hooks';

/** Told once its deadline has come. */
export interface DeadlineListener {
  onDeadline(): void;
}

/**
 * Calls `listener.onDeadline()` once `performance.now()` has reached `deadline`, never before:
 * Node's timers run on the event loop's cached millisecond clock and can fire up to a
 * millisecond early, so an early firing waits the rest. No closure per timer (a waiter is its
 * own listener; 10,000 waiters in one line are normal).
 * @internal
 */
export class DeadlineTimer {
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly deadline: number,
    private readonly listener: DeadlineListener,
  ) {
    this.arm();
  }

  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private static fire(self: DeadlineTimer): void {
    if (performance.now() < self.deadline) return self.arm();
    self.timer = undefined;
    self.listener.onDeadline();
  }

  private arm(): void {
    const left = this.deadline - performance.now();
    this.timer = setTimeout(DeadlineTimer.fire, Math.max(0, Math.ceil(left)), this);
  }
}
